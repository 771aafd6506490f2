"""The infrastructure path stands without the training stack: ``preflight`` (which evaluates the Pulumi program and
runs the policy packs) checks every stack and plans a Capacity Block group's drains with torch, TorchTitan,
transformers and the job tools' command-line packages unimportable, as on a machine with the infrastructure set of
requirements alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import yaml
from support import FIXTURE_STACKS, one_group

from preflight import stackfile

# The training set's packages, and the job tools' command-line packages and cluster access.
UNIMPORTABLE = (
    *("torch", "torchtitan", "torchx", "transformers", "tensorboard", "h5py"),
    *("jobs.launch", "jobs.rehearsal", "jobs.acceptance", "jobs.cluster_access"),
)

# Runs ``python -m preflight ARGS`` with the packages above refused by the import system, as if not installed.
BLOCKED_RUN = """
import importlib.abc, runpy, sys
refused = {refused!r}
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == top or name.startswith(top + ".") for top in refused):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Refuse())
sys.argv = ["preflight", *{args!r}]
runpy.run_module("preflight", run_name="__main__", alter_sys=True)
"""


def preflight_without_training(*args: str) -> subprocess.CompletedProcess:
    script = BLOCKED_RUN.format(refused=UNIMPORTABLE, args=list(args))
    return subprocess.run([sys.executable, "-c", script], cwd=stackfile.REPO_ROOT, capture_output=True, text=True, timeout=300)


def test_check_all_runs_without_the_training_stack():
    result = preflight_without_training("check", "--all")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr


def test_a_capacity_block_groups_drains_are_planned_without_the_training_stack(tmp_path):
    document = yaml.safe_load((FIXTURE_STACKS / "Pulumi.staging.yaml").read_text())
    overrides = one_group("trn2.48xlarge")
    document["config"].update({key if ":" in key else f"trainium-eks:{key}": value for key, value in overrides.items()})
    stack = tmp_path / "Pulumi.staging.yaml"
    stack.write_text(yaml.safe_dump(document))
    result = preflight_without_training("plan", "staging", "--stack-file", str(stack), "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    (group,) = json.loads(result.stdout)["capacityBlockDrains"]["groups"]
    assert {drain["workload"] for drain in group["drains"]} == {"bert", "torchtitan"}


def requirement_names(path) -> set[str]:
    """The distributions a requirements file installs by name, following its ``-r`` includes."""
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            names |= requirement_names(path.parent / line[3:].strip())
        elif line:
            names.add(re.split(r"[=<>~\[ ]", line, maxsplit=1)[0].lower())
    return names


def test_the_infrastructure_set_installs_no_training_stack_and_the_full_set_holds_it():
    infra = requirement_names(stackfile.REPO_ROOT / "requirements-infra.txt")
    training = {"torch", "torchtitan", "torchx", "transformers", "tensorboard", "h5py"}
    assert {"pulumi", "pulumi-policy", "pydantic"} <= infra and not infra & training
    assert infra | training <= requirement_names(stackfile.REPO_ROOT / "requirements-dev.txt")
