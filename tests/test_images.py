"""`make image` builds and pushes what `python -m trainium_eks.images` lists: every training stack's image and one
data shell, each from a stage of its Dockerfile and with the tag trainium_eks/versions.py gives it."""

from __future__ import annotations

import re
import subprocess
import sys

import dockerfiles

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
    assert all(len(build) == 3 for build in builds), builds  # the Makefile reads three words a line
    for stack in versions.TRAINING_STACKS.values():
        assert (stack.dockerfile, stack.target, stack.image_tag) in builds, stack.name


def test_every_build_is_a_stage_of_its_dockerfile_with_a_tag_of_its_own():
    builds = listed_builds()
    assert len({tag for *_, tag in builds}) == len(builds)  # ECR tags are immutable: one image per tag
    for dockerfile, target, tag in builds:
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
