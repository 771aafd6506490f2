"""`make image` builds and pushes what `python -m trainium_eks.images` lists: every training stack's image and one
data shell, each from a stage of its Dockerfile and with the tag trainium_eks/versions.py gives it."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import dockerfiles
import pytest

from preflight.stackfile import REPO_ROOT
from trainium_eks import images, versions

# Docker's tag grammar (distribution/reference): what `docker build -t <repository>:<tag>` accepts.
DOCKER_TAG = re.compile(r"[\w][\w.-]{0,127}")


def listed_builds() -> list[tuple[str, ...]]:
    """The Makefile's input: one ``<dockerfile> <target> <tag>`` line per image."""
    listed = subprocess.run(
        [sys.executable, "-m", "trainium_eks.images"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    return [tuple(line.split()) for line in listed.stdout.splitlines()]


def test_every_training_stack_is_built_with_its_tag():
    builds = listed_builds()
    # the Makefile reads three words a line, then NAME=value build arguments
    assert all(len(build) >= 3 and all("=" in word for word in build[3:]) for build in builds), builds
    for stack in versions.TRAINING_STACKS.values():
        assert (stack.dockerfile, stack.target, stack.image_tag) in [build[:3] for build in builds], stack.name


def test_every_build_is_a_stage_of_its_dockerfile_with_a_tag_of_its_own():
    builds = listed_builds()
    assert len({tag for *_, tag in builds}) == len(builds)  # ECR tags are immutable: one image per tag
    for dockerfile, target, tag, *_ in builds:
        assert target in dockerfiles.stages(dockerfile), (dockerfile, target)
        assert DOCKER_TAG.fullmatch(tag), tag


def test_every_dockerfile_of_the_training_directory_is_built():
    present = {f"training/{path.name}" for path in (REPO_ROOT / "training").glob("Dockerfile*")}
    assert present == {dockerfile for dockerfile, *_ in listed_builds()}


def test_one_data_shell_versioned_with_the_image_of_its_dockerfile():
    with_a_shell = [d for d, *_ in listed_builds() if images.DATA_SHELL_TARGET in dockerfiles.stages(d)]
    assert set(with_a_shell) == {images.DATA_SHELL_DOCKERFILE}
    (shell_tag,) = [tag for _, target, tag in listed_builds() if target == images.DATA_SHELL_TARGET]
    (stack,) = [s for s in versions.TRAINING_STACKS.values() if s.dockerfile == images.DATA_SHELL_DOCKERFILE]
    version = shell_tag.removeprefix("data-shell-")
    assert shell_tag.startswith("data-shell-") and stack.image_tag.endswith(f"-{version}")


def test_every_training_image_holds_the_code_where_the_launcher_runs_it():
    """The launcher runs the same torchrun command in every stack's image: each training target copies the code to
    the same places and has the same command, with the same PYTHONPATH and working directory."""

    def layout(stack: versions.TrainingStack) -> tuple[list[tuple[str, str]], list[str], list[str]]:
        every = dockerfiles.instructions(stack.dockerfile)
        target = [i for i in dockerfiles.stages(stack.dockerfile)[stack.target] if i[0] in ("COPY", "CMD")]
        environment = " ".join(arguments for keyword, arguments in every if keyword == "ENV")
        pythonpath = re.findall(r"PYTHONPATH=(\S+)", environment)
        return target, pythonpath, [arguments for keyword, arguments in every if keyword == "WORKDIR"]

    layouts = [layout(stack) for stack in versions.TRAINING_STACKS.values()]
    assert layouts[0][0] and all(found == layouts[0] for found in layouts[1:])


NATIVE = versions.training_stack_of("trn2").dockerfile
COMMIT_ID = "0123456789abcdef0123456789abcdef01234567"  # any full commit ID: the check is of its form


def test_a_build_argument_of_versions_py_has_no_second_value_in_its_dockerfile():
    """TorchTitan Neuron's commit is written once: versions.py sets it, the Dockerfile declares it without a default."""
    assert any(stack.build_args for stack in versions.TRAINING_STACKS.values())
    for stack in versions.TRAINING_STACKS.values():
        declared = dockerfiles.build_args(stack.dockerfile)
        for name, _ in stack.build_args:
            assert name in declared and declared[name] is None, (stack.dockerfile, name)


def test_make_image_passes_a_set_build_argument_and_leaves_an_unset_one_to_the_dockerfiles_refusal(monkeypatch):
    (stack,) = [s for s in versions.TRAINING_STACKS.values() if s.build_args]
    ((name, _),) = stack.build_args
    for value, passed in ((COMMIT_ID, (f"{name}={COMMIT_ID}",)), (None, ())):
        changed = dataclasses.replace(stack, build_args=((name, value),))
        monkeypatch.setitem(versions.TRAINING_STACKS, stack.name, changed)
        (build,) = [b for b in images.image_builds() if b.dockerfile == stack.dockerfile]
        assert build.build_args == passed


@pytest.mark.parametrize(("given", "refused"), [(None, True), ("", True), ("HEAD", True), ("main", True), (COMMIT_ID, False)])
def test_the_native_build_refuses_torchtitan_neuron_without_a_full_commit_id(given, refused):
    """The Dockerfile's own check, run by the shell its SHELL line names, with the build argument as Docker hands a RUN
    its ARGs (an environment variable; unset when the build is not given it)."""
    (check,) = [run for run in dockerfiles.runs(NATIVE) if "TORCHTITAN_NEURON_COMMIT" in run and "git fetch" not in run]
    environment = {"PATH": os.environ["PATH"]} | ({} if given is None else {"TORCHTITAN_NEURON_COMMIT": given})
    result = subprocess.run(["bash", "-o", "pipefail", "-c", check], env=environment, capture_output=True, text=True)
    assert (result.returncode == 2) == refused and (result.returncode == 0) != refused, result
    if refused:
        assert result.stderr.count("\n") == 1 and "trainium_eks/versions.py" in result.stderr, result.stderr


@pytest.mark.parametrize("dockerfile", sorted({s.dockerfile for s in versions.TRAINING_STACKS.values()}))
def test_every_apt_package_is_pinned_to_a_version_or_to_an_ubuntu_snapshot(dockerfile):
    assert dockerfiles.unpinned_apt_packages(dockerfile) == []
    if "UBUNTU_SNAPSHOT" in dockerfiles.build_args(dockerfile):  # a snapshot ID: a UTC time (Ubuntu's snapshot service)
        assert re.fullmatch(r"\d{8}T\d{6}Z", dockerfiles.build_args(dockerfile)["UBUNTU_SNAPSHOT"] or "")


def test_an_apt_package_without_a_version_or_a_snapshot_is_found(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "FROM ubuntu AS base\nRUN apt-get update && apt-get install -y --no-install-recommends curl tools=1.2.3\n"
        "RUN sed -i 's/^Types: deb$/&\\nSnapshot: ${UBUNTU_SNAPSHOT}/' /etc/apt/sources.list.d/ubuntu.sources\n"
        "RUN apt-get update && apt-get install -y git\n"
        "RUN echo deb https://example.invalid main > /etc/apt/sources.list.d/other.list && apt-get install -y lib\n"
    )
    assert dockerfiles.unpinned_apt_packages(str(dockerfile)) == ["curl", "lib"]
