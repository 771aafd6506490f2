"""The pull-request gate as the workflow runs it: a git repository holding this one's files, a base commit, and per
case a pull request's change on top of it, checked by the very command the workflow's step runs (read from
.github/workflows/pull-request-report.yml), against the base as the workflow names it (HEAD^1)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from preflight import analysis, engine, pull_request, stackfile
from trainium_eks import tokens, versions

WORKFLOW = stackfile.REPO_ROOT / ".github" / "workflows" / "pull-request-report.yml"
STACK = "dev"
MERMAID_PARSER = stackfile.REPO_ROOT / "tests" / "mermaid" / "parse.mjs"  # Mermaid's own parser (npm, pinned)
GIT_IDENTITY = ("-c", "user.name=trainium-eks tests", "-c", "user.email=tests@example.com")
ENVIRONMENT = {k: v for k, v in os.environ.items() if k != stackfile.STACK_DIR_VARIABLE}


def steps() -> list[dict]:
    return [step for job in yaml.safe_load(WORKFLOW.read_text())["jobs"].values() for step in job["steps"]]


def step_running(text: str) -> dict:
    (step,) = [step for step in steps() if text in step.get("run", "")]
    return step


def gate_command() -> list[str]:
    """The words of the workflow's command that runs the gate, its line continuations joined."""
    script = step_running("-m preflight.pull_request")["run"]
    (line,) = [line for line in script.replace("\\\n", " ").splitlines() if "-m preflight.pull_request" in line]
    return shlex.split(line)


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", *GIT_IDENTITY, "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return result.stdout


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    """This repository's files as they are now (tracked and new, not ignored) in a new repository: the base commit."""
    repo = tmp_path_factory.mktemp("repository")
    listed = git(stackfile.REPO_ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, listed):
        source = stackfile.REPO_ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is gone from the copy too
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_bytes(source.read_bytes())
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "--message", "base")
    return repo


def change(repository: Path, name: str, edit) -> Path:
    """A pull request's checkout: a worktree of the base with one commit on top, made by ``edit(worktree)``."""
    worktree = repository.parent / name
    git(repository, "worktree", "add", "--quiet", "--detach", str(worktree), "main")
    edit(worktree)
    git(worktree, "commit", "--quiet", "--all", "--message", name)
    (worktree / ".venv").symlink_to(Path(sys.prefix))  # the workflow's .venv/bin/python, this one
    return worktree


def edit_stack(**config):
    def edit(worktree: Path) -> None:
        path = worktree / stackfile.read_project(worktree).stack_config_dir / f"Pulumi.{STACK}.yaml"
        document = yaml.safe_load(path.read_text())
        document["config"].update({f"trainium-eks:{key}": value for key, value in config.items()})
        path.write_text(yaml.safe_dump(document))

    return edit


def run_step(step: dict, worktree: Path, runner_temp: Path, **env: str) -> subprocess.CompletedProcess:
    """A workflow step's ``run`` script as GitHub's runner runs it: bash with -e and pipefail (docs.github.com,
    "Workflow syntax", defaults.run.shell), in the checkout, with the step's environment."""
    variables = {"RUNNER_TEMP": str(runner_temp), "GITHUB_OUTPUT": str(runner_temp / "output")}
    variables["GITHUB_STEP_SUMMARY"] = str(runner_temp / "summary")
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=worktree,
        env={**ENVIRONMENT, **variables, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def run_gate(worktree: Path, *labels: str) -> tuple[int, str, str]:
    """The workflow's report step, then its gate step, in ``worktree`` on a pull request with ``labels``: the gate
    step's exit status, the comment and the job summary."""
    runner_temp = Path(tempfile.mkdtemp(dir=worktree.parent))
    report = run_step(step_running("-m preflight.pull_request"), worktree, runner_temp, LABELS=json.dumps(labels))
    assert report.returncode == 0, report.stderr  # the gate is the next step's
    (status,) = re.findall(r"^status=(\d+)$", (runner_temp / "output").read_text(), re.MULTILINE)
    gate = run_step(step_running('exit "$STATUS"'), worktree, runner_temp, STATUS=status)
    comment = runner_temp / "comment.md"
    return gate.returncode, comment.read_text() if comment.exists() else "", (runner_temp / "summary").read_text()


def busy_monthly_usd(stack_file: Path) -> float:
    plan = engine.evaluate(stackfile.load(STACK, stack_file)).to_json()
    return analysis.annotate(plan)["cost"]["monthlyUsd"]


def test_the_workflow_runs_the_gate_module_against_the_base_with_the_labels_and_writes_the_comment():
    words = gate_command()
    assert words[: words.index("-m") + 2] == [".venv/bin/python", "-m", "preflight.pull_request"]
    assert words[words.index("--base") + 1] == "HEAD^1" and "--output" in words
    assert "${labels[@]/#/--label=}" in words, "each of the pull request's labels"


def test_the_workflow_installs_the_infrastructure_set_alone():
    """The report job builds .venv with the Makefile's infrastructure target, which installs requirements-infra.txt
    (no training stack: tests/test_layers.py), not the full development set."""
    (install,) = [step["run"].strip() for step in steps() if step.get("run", "").strip().startswith("make ")]
    assert install == "make .venv/.installed-infra"
    makefile = (stackfile.REPO_ROOT / "Makefile").read_text()
    (recipe,) = re.findall(r"^\$\(INFRA_STAMP\):.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert "-r requirements-infra.txt" in recipe and "requirements-dev.txt" not in recipe


def test_replacing_the_file_system_fails_the_check_with_data_loss_unless_the_label_approves_it(repository):
    worktree = change(repository, "file-system", edit_stack(fsxDeploymentType="PERSISTENT_2", fsxThroughputPerTiB=125))
    status, comment, summary = run_gate(worktree)
    assert status == 1
    assert summary == comment, "the job summary has the report, for a fork's pull request too"
    assert comment.splitlines()[0] == pull_request.MARKER
    assert "The check fails" in comment and "DATA LOSS" in comment
    assert tokens.FSX_LUSTRE_FILE_SYSTEM in comment and "trainium-storage-lustre" in comment
    assert f"no `{pull_request.APPROVAL_LABEL}` label" in comment
    headings = re.findall(r"^### (\S+):", comment, re.MULTILINE)
    assert headings == [STACK], "a stack file's change touches that stack alone"

    status, comment, _ = run_gate(worktree, "good first issue", pull_request.APPROVAL_LABEL)
    assert status == 0
    assert "The check passes" in comment and "DATA LOSS" in comment
    assert f"approved by the `{pull_request.APPROVAL_LABEL}` label" in comment
    assert tokens.FSX_LUSTRE_FILE_SYSTEM in comment


def test_moving_kubernetes_back_fails_the_check_as_refused_by_eks(repository):
    current = stackfile.load(STACK, root=repository).config["trainium-eks:kubernetesVersion"]
    older = max(
        (v for v in versions.SUPPORTED_KUBERNETES_VERSIONS if versions.minor_version(v) < versions.minor_version(current)),
        key=versions.minor_version,
    )
    worktree = change(repository, "downgrade", edit_stack(kubernetesVersion=older))
    status, comment, _ = run_gate(worktree, pull_request.APPROVAL_LABEL)
    assert status == 1
    assert "The check fails" in comment and "REFUSED BY EKS" in comment and tokens.EKS_CLUSTER in comment


def test_raising_a_size_passes_and_the_comment_shows_the_cost_before_and_after(repository):
    stack_file = repository / "stacks" / f"Pulumi.{STACK}.yaml"
    groups = yaml.safe_load(stack_file.read_text())["config"]["trainium-eks:trainiumNodeGroups"]
    raised = [{**groups[0], "maxSize": groups[0]["maxSize"] * 2}, *groups[1:]]
    worktree = change(repository, "size", edit_stack(trainiumNodeGroups=raised))
    status, comment, _ = run_gate(worktree)
    assert status == 0
    assert "The check passes" in comment and f"| {STACK} | applies |" in comment
    before, after = busy_monthly_usd(stack_file), busy_monthly_usd(worktree / "stacks" / f"Pulumi.{STACK}.yaml")
    assert after > before
    assert f"{before:,.0f}" in comment and f"{after:,.0f}" in comment
    (picture,) = re.findall(r"^```mermaid\n(.*?)^```$", comment, re.MULTILINE | re.DOTALL)
    parsed = subprocess.run(["node", str(MERMAID_PARSER)], input=picture, capture_output=True, text=True, timeout=120)
    assert parsed.returncode == 0, f"Mermaid's parser refuses the picture: {parsed.stderr}"
    assert groups[0]["name"] in picture, "the raised group is in the picture"


def test_a_change_to_the_docs_alone_touches_no_stack_and_passes(repository):
    worktree = change(repository, "docs", lambda tree: (tree / "README.md").write_text("A README that says less.\n"))
    status, comment, _ = run_gate(worktree)
    assert status == 0
    assert "No stack touched" in comment and "###" not in comment


def test_the_program_touches_every_stack_a_stack_file_or_policy_config_its_own_and_the_rest_none():
    stacks = set(stackfile.stack_names())
    touched = pull_request.touched_stacks(
        stackfile.REPO_ROOT,
        ["components/storage.py", "policies/config/prod.json", "stacks/Pulumi.dev.yaml", "preflight/diff.py", "docs/a.md"],
        stacks,
    )
    assert touched == {
        "dev": ("components/storage.py", "stacks/Pulumi.dev.yaml"),
        "prod": ("components/storage.py", "policies/config/prod.json"),
        **{name: ("components/storage.py",) for name in stacks - {"dev", "prod"}},
    }
    for path in ["trainium_eks/catalog.py", "policies/cost-guard/requirements.txt", "requirements.txt", "Pulumi.yaml"]:
        assert pull_request.touched_stacks(stackfile.REPO_ROOT, [path], stacks).keys() == stacks, path


def test_a_report_longer_than_github_takes_is_cut_to_its_verdicts():
    long = pull_request.StackReport(STACK, "applies", True, ("stacks/Pulumi.dev.yaml",), "x" * pull_request.COMMENT_LIMIT)
    full = pull_request.markdown("0" * 40, [long], 1)
    comment = pull_request.comment(full, "0" * 40, [long], 1)
    assert len(full) > pull_request.COMMENT_LIMIT >= len(comment)
    assert f"| {STACK} | applies |" in comment and "job summary" in comment


@pytest.mark.parametrize(
    ("arguments", "named"),
    [(["--base", "no-such-commit"], "--base"), (["--base", "HEAD", "--label="], "--label"), ([], "--base")],
)
def test_bad_input_is_one_line_and_exit_status_2(repository, arguments, named):
    result = subprocess.run(
        [sys.executable, "-m", "preflight.pull_request", *arguments],
        cwd=repository,
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and named in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
