"""Test helpers: evaluate a stack (optionally with config overrides) through the same engine `preflight` uses,
run the preflight CLI and read its one-line refusals, pick resources out of a plan, and wait for a training run's step.
Test modules share helpers through this module, never by importing one another.

The stacks are read from ``$PREFLIGHT_STACK_DIR`` when it is set (``stackfile.stack_directory``): tests marked
``stacks`` read them and derive what they expect from them, so they pass on a user's edited stacks too
(tests/test_user_edits.py runs them on such copies)."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from jobs.rehearsal.local_agents import Rehearsal, read_metrics
from preflight import engine, planfile, stackfile
from trainium_eks import catalog
from trainium_eks.config import BOOTSTRAP_VARIABLE, PlatformConfig, parse

PROJECT = "trainium-eks"
# Copies of the shipped stacks that the policy mutation cases edit (README.md there says why).
FIXTURE_STACKS = Path(__file__).resolve().parent / "fixture_stacks"
STACKS = tuple(stackfile.stack_names())
# Existing network IDs for a stack that brings its own VPC and subnets.
EXISTING = {
    "existingVpcId": "vpc-0123456789abcdef0",
    "existingPrivateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    "existingTrainiumSubnetId": "subnet-0123456789abcdef0",
}


def settings(stack: str, *, fixture: bool = False, **overrides: Any) -> stackfile.StackSettings:
    """The stack's settings with project keys overridden (``None`` drops a key from the map the CLI would pass); with
    ``fixture``, the settings of the fixture stack of that name (tests/fixture_stacks) instead of the shipped one."""
    base = stackfile.load(stack, FIXTURE_STACKS / f"Pulumi.{stack}.yaml" if fixture else None)
    config = dict(base.config)
    for key, value in overrides.items():
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        if value is None:
            config.pop(full_key, None)
        else:
            config[full_key] = stackfile.cli_string(value)
    return dataclasses.replace(base, config=config)


# An On-Demand Capacity Reservation of two nodes in the fixture staging stack's Trainium AZ ID.
STAGING_AZ = settings("staging", fixture=True).config[f"{PROJECT}:trainiumAzId"]
RESERVATION = {"type": "odcr", "id": "cr-0123456789abcdef0", "azId": STAGING_AZ, "instanceCount": 2}


def platform(stack: str, **overrides: Any) -> PlatformConfig:
    """The stack's typed configuration, as the program reads it: what a test derives its expectations from."""
    return parse(settings(stack, **overrides).config, stack=stack)


def offering(instance_type: str) -> dict[str, str]:
    """Overrides that move a stack to the first region and AZ ID where the catalog offers ``instance_type``, so that a
    test's node group is valid whatever region the shipped stack is in: on demand, else the first region whose Capacity
    Blocks sell it, in an AZ ID that offers another Trainium type on demand there (a group of it needs ``sold_as``)."""
    spec = catalog.INSTANCE_TYPES[instance_type]
    if spec.az_ids:
        region, az_ids = next(iter(spec.az_ids.items()))
        return {"aws:region": region, "trainiumAzId": az_ids[0]}
    region = spec.capacity_block_regions[0]
    on_demand = [az_id for other in catalog.TRAINIUM_TYPES for az_id in catalog.az_ids_offering(other, region)]
    return {"aws:region": region, "trainiumAzId": (on_demand or catalog.REGIONS[region])[0]}


def sold_as(instance_type: str, instances: int = 2) -> dict[str, Any]:
    """What a group of ``instance_type`` needs where ``offering`` puts it: nothing where it is sold on demand; a Capacity
    Block of ``instances`` where it is sold in blocks only (an example block: its ID and price are what a user bought)."""
    where = offering(instance_type)
    if not catalog.INSTANCE_TYPES[instance_type].block_only(where["aws:region"]):
        return {}
    block = {"type": "capacity-block", "id": "cr-0a1b2c3d4e5f60718", "azId": where["trainiumAzId"], "hourlyUsd": 30.0}
    return {"capacityReservation": {**block, "instanceCount": instances}}


def one_group(instance_type: str, **group: Any) -> dict[str, Any]:
    """Overrides that make a fixture of a stack: one Trainium group of ``instance_type`` (elastic, 2 nodes at most,
    named like trn1-32xl, in a Capacity Block where that is how the type is sold, unless ``group`` says otherwise)
    where the catalog offers it, and no teams."""
    name = instance_type.replace(".", "-").replace("xlarge", "xl")
    nodes = {"name": name, "instanceType": instance_type, "provisioning": "karpenter", "maxSize": 2}
    nodes = {**nodes, **sold_as(instance_type, group.get("maxSize", nodes["maxSize"])), **group}
    return {"trainiumNodeGroups": [nodes], "teams": [], **offering(instance_type)}


# Plans already evaluated in this process, pickled, by what they were evaluated from: the tests of a file build the
# stacks they need, often the same ones. Each caller gets a plan of its own (a plan is plain data). A test that
# monkeypatches evaluates afresh and remembers nothing (tests/conftest.py): a remembered plan predates its patch.
_EVALUATED: dict[tuple, bytes] = {}
REMEMBER = {"plans": True}


def evaluate(stack: str, *, preview: bool = False, mocks_factory=None, fixture: bool = False, **overrides: Any) -> engine.Plan:
    chosen = settings(stack, fixture=fixture, **overrides)
    if mocks_factory:
        return engine.evaluate(chosen, preview=preview, mocks_factory=mocks_factory)
    if not REMEMBER["plans"]:
        return engine.evaluate(chosen, preview=preview)
    source = (chosen.project, chosen.stack, str(chosen.path), chosen.secret_keys, json.dumps(chosen.config, sort_keys=True))
    key = (*source, preview, os.environ.get(BOOTSTRAP_VARIABLE))
    if key not in _EVALUATED:
        _EVALUATED[key] = pickle.dumps(engine.evaluate(chosen, preview=preview))
    return pickle.loads(_EVALUATED[key])


@functools.cache
def cached_plan(stack: str, preview: bool, fixture: bool = False) -> engine.Plan:
    return evaluate(stack, preview=preview, fixture=fixture)


def kubernetes_objects(plan: engine.Plan) -> list[planfile.PlannedResource]:
    """The plan's Kubernetes objects (Helm releases are charts, not objects)."""
    return [r for r in plan.resources if r.type.startswith("kubernetes:") and not r.type.startswith("kubernetes:helm.sh")]


def manifest(resource: planfile.PlannedResource) -> dict:
    """The object sent to the API server: a Kubernetes resource's wire inputs, whose numbers the engine carries
    as floats and the provider sends whole ones as integers (``runAsUser: 10001``, not ``10001.0``)."""
    return _as_sent(resource.inputs)


def _as_sent(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _as_sent(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_sent(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def node_group_config(name: str, instance_type: str, size: int = 2, **extra: Any) -> dict:
    return {"name": name, "instanceType": instance_type, "minSize": size, "desiredSize": size, "maxSize": size, **extra}


def one(resources: list[planfile.PlannedResource]) -> planfile.PlannedResource:
    assert len(resources) == 1, [r.urn for r in resources]
    return resources[0]


def by_urn(plan: engine.Plan) -> dict[str, planfile.PlannedResource]:
    return {r.urn: r for r in plan.resources}


def stack_copy(tmp_path, stack: str, edit, *, fixture: bool = False) -> str:
    """A copy of the shipped stack file (with ``fixture``, of the fixture stack) with ``edit`` applied to its config, as
    a path for ``--against`` or ``--stack-file``."""
    directory = FIXTURE_STACKS if fixture else stackfile.stack_directory()
    document = yaml.safe_load((directory / f"Pulumi.{stack}.yaml").read_text())
    edit(document["config"])
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def run_preflight(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "preflight", *args], cwd=stackfile.REPO_ROOT, capture_output=True, text=True, timeout=120
    )


def answer_json(handler, status: int, body: dict) -> None:
    """A test API server's answer: ``body`` as JSON with ``status``, as the API server sends it."""
    answer = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(answer)))
    handler.end_headers()
    handler.wfile.write(answer)


def wait_for_step(metrics: Path, step: int, run: Rehearsal | subprocess.Popen, timeout: float = 180) -> list[dict]:
    """The training script's records once one reaches ``step``. Fails if the run (one process, or a rehearsal's
    agents) ends first; stops it and raises TimeoutError if no record reaches ``step`` within ``timeout`` seconds."""
    if isinstance(run, Rehearsal):
        processes, logs, stop = [agent.process for agent in run.agents], run.logs_text, run.stop
    else:
        processes, logs, stop = [run], lambda: "", run.kill
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        records = read_metrics(metrics)
        if records and records[-1]["step"] >= step:
            return records
        assert all(process.poll() is None for process in processes), f"the run ended before step {step}:\n{logs()}"
        time.sleep(0.01)
    stop()
    raise TimeoutError(f"no step {step} within {timeout} s:\n{logs()}")


# A plan of the shape `plan --json` prints, with the one resource every plan has.
STACK_URN = "urn:pulumi:staging::trainium-eks::pulumi:pulumi:Stack::trainium-eks-staging"
MINIMAL_PLAN = {
    "project": "trainium-eks",
    "stack": "staging",
    "resources": [
        {
            "urn": STACK_URN,
            "type": "pulumi:pulumi:Stack",
            "name": "trainium-eks-staging",
            "custom": False,
            "parent": None,
            "provider": None,
            "protect": False,
            "retainOnDelete": False,
            "dependencies": [],
            "propertyDependencies": {},
            "inputs": {},
        }
    ],
    "outputs": {},
}


def one_line(result: subprocess.CompletedProcess, *names: str) -> str:
    """The error line, after checking the exit status, that it is the only line, and that it names ``names``."""
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def check_report(result: subprocess.CompletedProcess) -> dict:
    """The report `check --json` printed for one plan, after checking that it read the plan and exited as the report
    calls for: 1 with a mandatory violation, 0 without."""
    assert result.stderr == "" and result.returncode != 2, result.stderr
    report = json.loads(result.stdout)
    mandatory = [v["policy"] for v in report["violations"] if v["enforcementLevel"] == "mandatory"]
    assert result.returncode == (1 if mandatory else 0), (result.returncode, mandatory)
    return report


def ec2_recommended_layout(cards: int) -> list[tuple[int, int, str]]:
    """The EC2 User Guide's layout for EFA on several network cards ("Maximize network bandwidth on Amazon EC2
    instances with multiple network cards"), written out: an ENA primary interface, card 0's EFA-only interface at
    device 1, every other card's EFA-only interface at device 0."""
    return [(0, 0, "interface"), (0, 1, "efa-only"), *((card, 0, "efa-only") for card in range(1, cards))]


def with_groups(instance_type: str, *groups: dict, **overrides: Any) -> engine.Plan:
    """The staging stack with ``groups`` of ``instance_type``, where the catalog offers it, and no teams."""
    return evaluate("staging", trainiumNodeGroups=list(groups), teams=[], **offering(instance_type), **overrides)
