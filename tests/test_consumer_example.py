"""A team installs this package from a release tag and builds in the workspace the platform granted it. Walked as a team
would: the checkout is released with README's release commands into a repository of its own, the example is installed
from the pushed tag into a clean virtualenv with README's commands for a local clone, and examples/team-workspace
runs in that virtualenv under the SDK's mocks against the outputs of a real plan of a platform that grants two teams.
It builds in its team's workspace, and stops in one line for a team the platform does not declare or outputs it
cannot read."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from support import evaluate, node_group_config, offering

from preflight.stackfile import REPO_ROOT
from trainium_eks.contract import CONTRACT_VERSION
from trainium_eks.team import TEAMS_SINCE

EXAMPLE = REPO_ROOT / "examples" / "team-workspace"
EXAMPLE_STACK = "dev"
RUNNER = Path(__file__).with_name("team_program_under_mocks.py")
VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
# The example's requirement of this package: the team extra, from a tag of the platform's repository.
PACKAGE_REQUIREMENT = re.compile(r"^trainium-eks\[team\] @ git\+(?P<repository>\S+)@(?P<tag>\S+)$", re.MULTILINE)
# A plan cannot know the secret kubeconfig; the stack reference hands the team the real one, which is JSON.
KUBECONFIG = json.dumps({"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": [], "users": []})
OTHER_TEAM = "vision"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "release test",
    "GIT_AUTHOR_EMAIL": "release@example.com",
    "GIT_COMMITTER_NAME": "release test",
    "GIT_COMMITTER_EMAIL": "release@example.com",
}


def run(command: list, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{' '.join(map(str, command))}: {done.stderr}"
    return done


def example_config() -> dict[str, str]:
    """The example's stack config, keys without the project prefix."""
    stack = yaml.safe_load((EXAMPLE / f"Pulumi.{EXAMPLE_STACK}.yaml").read_text())
    return {key.split(":", 1)[1]: value for key, value in stack["config"].items()}


def releasing_a_version() -> str:
    """README's section "Releasing a version"."""
    readme = (REPO_ROOT / "README.md").read_text()
    (section,) = re.findall(r"^### Releasing a version\n(.*?)^##+ ", readme, re.DOTALL | re.MULTILINE)
    return section


def releasing_blocks() -> tuple[str, str]:
    """The section's shell blocks: the release commands, then the install from a local clone."""
    release, local_install = re.findall(r"^```sh\n(.*?)^```", releasing_a_version(), re.DOTALL | re.MULTILINE)
    return release, local_install


def readme_requirement(origin: str) -> str:
    """The section's requirement of this package from the hosting repository or a local clone, ``<...>`` unfilled."""
    (requirement,) = re.findall(rf"`(trainium-eks\[team\] @ git\+{re.escape(origin)}[^`]*@v<version>)`", releasing_a_version())
    return requirement


def bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def released_repository(root: Path, files: dict[str, Path | str]) -> tuple[Path, subprocess.CompletedProcess]:
    """A bare ``origin`` whose main holds ``files`` (name: a file to copy or a text), released with README's release
    commands from a clone of it; returns ``origin`` and how the release commands ended."""
    origin, clone = root / "origin.git", root / "clone"
    run(["git", "init", "--quiet", "--bare", "--initial-branch", "main", origin], root)
    for name, content in files.items():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copy2(content, clone / name)
        else:
            (clone / name).write_text(content)
    for command in (
        ["init", "--quiet", "--initial-branch", "main"],
        ["add", "--all"],
        ["commit", "--quiet", "--message", "the release's pull request, merged"],
        ["remote", "add", "origin", origin],
        ["push", "--quiet", "origin", "main"],
    ):
        run(["git", *command], clone, **GIT_IDENTITY)
    return origin, bash(releasing_blocks()[0], clone, **GIT_IDENTITY)


def tags(origin: Path) -> list[str]:
    listed = run(["git", "ls-remote", "--tags", origin], origin).stdout.split("\n")
    return [line.split()[1] for line in listed if line]


@pytest.fixture(scope="module")
def origin(tmp_path_factory) -> Path:
    """The platform's repository with this checkout merged to main, released by README's commands from a clone."""
    # The checkout as its next commit holds it: tracked and new files, less what .gitignore leaves out.
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], REPO_ROOT).stdout
    checkout = {name: REPO_ROOT / name for name in filter(None, listed.split("\0")) if (REPO_ROOT / name).is_file()}
    origin, released = released_repository(tmp_path_factory.mktemp("release"), checkout)
    assert released.returncode == 0, released.stderr
    return origin


@pytest.fixture(scope="module")
def team_workspace(origin, tmp_path_factory) -> Path:
    """A copy of the example, installed by README's commands for a local clone, ``origin`` being that clone, into a
    clean virtualenv ``.venv`` (pip constrained to the project's pins)."""
    workspace = tmp_path_factory.mktemp("team") / EXAMPLE.name
    shutil.copytree(EXAMPLE, workspace, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    done = bash(
        releasing_blocks()[1],
        workspace,
        clone=str(origin),
        version=VERSION,
        PIP_CONSTRAINT=str(REPO_ROOT / "constraints.txt"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # `python` is the project's Python
    )
    assert done.returncode == 0, done.stderr
    return workspace


@pytest.fixture(scope="module")
def team_python(team_workspace) -> Path:
    return team_workspace / ".venv" / "bin" / "python"


@pytest.fixture(scope="module")
def platform_outputs() -> dict:
    """The outputs of a real plan of a platform that grants the example's team and one more, half a node group each."""
    teams = [{"name": example_config()["team"], "neuronShare": 0.5}, {"name": OTHER_TEAM, "neuronShare": 0.5}]
    group = node_group_config("trn1-32xl", "trn1.32xlarge", size=2)
    plan = evaluate("staging", teams=teams, trainiumNodeGroups=[group], **offering("trn1.32xlarge"))
    return {**plan.outputs, "kubeconfig": KUBECONFIG}


def run_example(python: Path, outputs: dict, tmp_path: Path, **config: str) -> subprocess.CompletedProcess:
    """The example as `pulumi up` runs its stack: that stack's config (``config`` changes keys), the platform stack
    answering with ``outputs``."""
    project = yaml.safe_load((EXAMPLE / "Pulumi.yaml").read_text())["name"]
    stack_config = {f"{project}:{key}": value for key, value in {**example_config(), **config}.items()}
    outputs_file = tmp_path / "platform-outputs.json"
    outputs_file.write_text(json.dumps(outputs))
    return subprocess.run(
        [python, "-I", RUNNER, EXAMPLE, EXAMPLE_STACK, outputs_file],
        cwd=EXAMPLE,
        env={**os.environ, "PULUMI_CONFIG": json.dumps(stack_config)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_release_commands_tag_the_merged_version(origin):
    listed = run(["git", "ls-remote", origin, "refs/heads/main", f"refs/tags/v{VERSION}^{{}}"], origin).stdout.split("\n")
    (main, tagged) = [line.split()[0] for line in listed if line]
    assert tagged == main
    assert PACKAGE_REQUIREMENT.search((EXAMPLE / "requirements.txt").read_text())["tag"] == f"v{VERSION}"


def test_the_release_commands_make_no_tag_the_example_does_not_pin(tmp_path):
    pinned = (EXAMPLE / "requirements.txt").read_text().replace(f"@v{VERSION}\n", "@v0.0.1\n")
    assert f"@v{VERSION}" not in pinned
    release = {"pyproject.toml": REPO_ROOT / "pyproject.toml", "examples/team-workspace/requirements.txt": pinned}
    origin, released = released_repository(tmp_path, release)
    assert released.returncode != 0
    assert tags(origin) == []


def test_the_example_pins_the_readme_requirement_and_installs_the_local_one(origin, team_workspace):
    """The example's requirement is README's for the hosting repository; README's commands for a local clone put in
    README's requirement for it."""
    hosted = readme_requirement("https://").replace("<version>", VERSION)
    assert hosted in (EXAMPLE / "requirements.txt").read_text().splitlines()
    local = readme_requirement("file://").replace("/<absolute path>", str(origin)).replace("<version>", VERSION)
    assert local in (team_workspace / "requirements.txt").read_text().splitlines()


def test_the_team_program_builds_in_its_workspace(team_python, platform_outputs, tmp_path):
    done = run_example(team_python, platform_outputs, tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert Path(result["trainium_eks"]).is_relative_to(team_python.parent.parent)  # the release, not this checkout
    registered = result["resources"]
    config = example_config()
    (team,) = [t for t in platform_outputs["teams"] if t["name"] == config["team"]]

    def of_type(type_: str) -> list[dict]:
        return [r["inputs"] for r in registered if r["type"] == type_]

    (reference,) = of_type("pulumi:pulumi:StackReference")
    assert reference["name"] == config["platformStack"]
    objects = [r["inputs"] for r in registered if r["type"].startswith("kubernetes:")]
    assert objects and {o["metadata"]["namespace"] for o in objects} == {team["namespace"]}
    (defaults,) = [o["data"] for o in of_type("kubernetes:core/v1:ConfigMap") if o["metadata"]["name"] == "job-defaults"]
    assert (defaults["queue"], defaults["claimName"]) == (team["queue"], team["claimName"])
    assert defaults["etcdEndpoint"] == platform_outputs["etcdEndpoint"]
    software = platform_outputs["trainiumNodeGroupSoftware"]
    assert json.loads(defaults["trainingImages"]) == {name: entry["trainingImage"] for name, entry in software.items()}
    (provider,) = of_type("pulumi:providers:kubernetes")
    assert provider["namespace"] == team["namespace"]  # what the program forgets to place lands in the team's namespace


@pytest.mark.parametrize(
    ("config", "edit", "words"),
    [
        ({"team": "search"}, lambda o: None, "declares no team 'search' (teams: {teams}); add it to the platform stack's teams"),
        ({}, lambda o: o.pop("teams"), "teams: missing"),
        ({}, lambda o: o.update(contractVersion="1.4.0"), f"publishes 1.4.0, this consumer needs {TEAMS_SINCE}"),
        ({}, lambda o: o.update(contractVersion="2.0.0"), f"publishes 2.0.0, this consumer needs {TEAMS_SINCE}"),
    ],
    ids=["undeclared-team", "no-teams-output", "older-contract", "next-major-contract"],
)
def test_what_the_platform_did_not_grant_fails_in_one_line(team_python, platform_outputs, tmp_path, config, edit, words):
    outputs = dict(platform_outputs)
    edit(outputs)
    done = run_example(team_python, outputs, tmp_path, **config)
    teams = ", ".join(t["name"] for t in platform_outputs["teams"])
    assert done.returncode == 1
    assert words.format(teams=teams) in done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1


def test_the_changelog_records_the_release_and_its_contract():
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text()
    (heading,) = re.findall(rf"^## {re.escape(VERSION)} .*$", changelog, re.MULTILINE)
    assert f"contract {CONTRACT_VERSION}" in heading
