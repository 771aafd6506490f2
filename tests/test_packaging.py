"""The repository as a package: every top-level package is installable, nothing edits sys.path, and the SDK
internals module is pinned to the SDK release requirements.txt installs."""

from __future__ import annotations

import re
import subprocess
import tomllib

from preflight.stackfile import REPO_ROOT
from trainium_eks import sdk_internals, versions


def tracked_python_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()


def test_every_package_of_the_repository_is_declared():
    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {path.parent.name for path in REPO_ROOT.glob("*/__init__.py")}
    assert packages == {pattern.rstrip("*") for pattern in declared}


def test_nothing_edits_sys_path():
    edit = re.compile(r"\bsys\.path\.(insert|append|extend|remove)\(|\bsys\.path\s*=")
    offenders = [path for path in tracked_python_files() if edit.search((REPO_ROOT / path).read_text())]
    assert not offenders


def test_sdk_internals_are_read_from_the_pinned_sdk_release():
    (pin,) = re.findall(r"^pulumi==(\S+)", (REPO_ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert pin == sdk_internals.PULUMI_VERSION
    (policy_pin,) = re.findall(r"^pulumi-policy==(\S+)", (REPO_ROOT / "requirements-infra.txt").read_text(), re.MULTILINE)
    assert policy_pin == sdk_internals.PULUMI_POLICY_VERSION
    for pack in ("trainium-topology", "security-baseline", "cost-guard"):  # the packs' own virtualenvs
        assert f"pulumi-policy=={policy_pin}" in (REPO_ROOT / "policies" / pack / "requirements.txt").read_text()


def test_only_the_internals_module_imports_sdk_internals():
    private = re.compile(
        r"from pulumi\.runtime(\.\w+)? import|pulumi\.runtime\.(rpc|settings|proto|sync_await|config)\b"
        r"|from pulumi_policy\.\w+ import[^\n]*\b_[A-Za-z]"  # the policy SDK's underscored names
    )
    importers = [p for p in tracked_python_files() if private.search((REPO_ROOT / p).read_text())]
    assert importers == ["trainium_eks/sdk_internals.py"]


def test_every_training_image_tag_is_written_once():
    """trainium_eks/versions.py names each training stack's tag; the Dockerfiles, the Makefile, the launcher and the
    docs refer to it instead of copying it."""
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]
    files = subprocess.run(listed, cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.split()
    texts = {name: (REPO_ROOT / name).read_text(errors="ignore") for name in files if (REPO_ROOT / name).is_file()}
    for stack in versions.TRAINING_STACKS.values():
        copies = [name for name, text in texts.items() if stack.image_tag in text]
        assert copies == ["trainium_eks/versions.py"], stack.name
