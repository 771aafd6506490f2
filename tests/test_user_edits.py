"""The suite tests the code, not today's stack files: the edits every user makes to the shipped stacks (another region
and AZ ID, their own account's ARNs, other CIDRs, sizes up and down, another Trainium type, teams added and removed)
leave every stack-dependent test (marker ``stacks``) green when it runs on the edited copies.

The edits are derived from the stacks they edit and from the catalog, so that each edited stack stays valid."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from preflight import stackfile
from trainium_eks import catalog

pytestmark = pytest.mark.minutes  # real components for minutes: scheduled first (tests/conftest.py)

NS = "trainium-eks:"
ACCOUNT = re.compile(r"(?<=:)\d{12}(?=:)")
USER_ACCOUNT = "444455556666"  # a documentation account ID, as AWS's examples use
USER_VPC_CIDR = "10.48.0.0/16"
USER_OFFICE_CIDR = "198.51.100.0/24"  # RFC 5737 TEST-NET-2


def first_group(config: dict) -> dict:
    return config[f"{NS}trainiumNodeGroups"][0]


def sold_to(group: dict, region: str, az_id: str) -> bool:
    """Whether the catalog sells the group's type in ``az_id`` of ``region`` the way the group buys it (a group with a
    Capacity Block may run where blocks sell the type)."""
    block = (group.get("capacityReservation") or {}).get("type") == "capacity-block"
    return catalog.INSTANCE_TYPES[group["instanceType"]].offered_in(region, az_id, capacity_block=block)


def with_account(value):
    """``value`` with every ARN's account ID replaced by the user's own."""
    if isinstance(value, str):
        return ACCOUNT.sub(USER_ACCOUNT, value) if value.startswith("arn:") else value
    if isinstance(value, list):
        return [with_account(item) for item in value]
    if isinstance(value, dict):
        return {key: with_account(item) for key, item in value.items()}
    return value


def move_region(config: dict) -> None:
    """Another region that sells every Trainium group of the stack, in the first AZ ID where it sells them all (a
    group's reservation moves with it: a user buys one there)."""
    region, groups = config["aws:region"], config[f"{NS}trainiumNodeGroups"]
    other, az_id = next(
        (r, az_id)
        for r, az_ids in catalog.REGIONS.items()
        if r != region
        for az_id in az_ids
        if all(sold_to(g, r, az_id) for g in groups)
    )
    config["aws:region"], config[f"{NS}trainiumAzId"] = other, az_id
    for group in groups:
        if group.get("capacityReservation"):
            group["capacityReservation"]["azId"] = az_id
    for key, value in config.items():  # the region in the stack's ARNs follows the stack
        if isinstance(value, str) and value.startswith("arn:"):
            config[key] = value.replace(f":{region}:", f":{other}:")


def own_reservations(config: dict) -> None:
    """The user's own reservations in place of the shipped examples: another ID, and a block's price as bought."""
    for index, group in enumerate(config[f"{NS}trainiumNodeGroups"]):
        reservation = group.get("capacityReservation")
        if reservation:
            reservation["id"] = f"cr-0{index:016x}"
            if "hourlyUsd" in reservation:
                reservation["hourlyUsd"] = round(reservation["hourlyUsd"] * 1.25, 2)


def change_trainium_type(config: dict) -> None:
    """Another Trainium type of the catalog offered in the stack's AZ, with EFA as the stack's type has it."""
    group = first_group(config)
    current = catalog.INSTANCE_TYPES[group["instanceType"]]
    region, az_id = config["aws:region"], config[f"{NS}trainiumAzId"]
    other = next(
        t
        for t in catalog.TRAINIUM_TYPES
        if t != current.name
        and catalog.INSTANCE_TYPES[t].offered_in(region, az_id)
        and catalog.INSTANCE_TYPES[t].supports_efa == current.supports_efa
    )
    group["instanceType"], group["name"] = other, other.replace(".", "-")


def edit_dev(config: dict, _) -> None:
    move_region(config)
    config[f"{NS}publicAccessCidrs"] = [USER_OFFICE_CIDR]
    config[f"{NS}clusterAdminPrincipalArns"] = [f"arn:aws:iam::{USER_ACCOUNT}:role/platform-admins"]


def edit_staging(config: dict, policy_config: dict) -> None:
    group = first_group(config)
    grown = 4 / group["maxSize"]
    group["maxSize"] = 4  # README "Scaling"
    own_reservations(config)
    # The stack's own limits in its policy config follow, as the user raises them with the stack (README "Scaling"):
    # nodes as many as the groups' maxSize together, and a budget grown by the pool's factor (fixed costs do not grow).
    nodes = sum(g["maxSize"] for g in config[f"{NS}trainiumNodeGroups"])
    policy_config.setdefault("trainium-node-limit", {})["maxTrainiumNodes"] = nodes
    budget = policy_config.get("monthly-cost-budget", {})
    if "maxMonthlyUsd" in budget:
        budget["maxMonthlyUsd"] *= grown
    config.pop(f"{NS}teams", None)
    config[f"{NS}vpcCidr"] = USER_VPC_CIDR


def edit_prod(config: dict, _) -> None:
    change_trainium_type(config)
    group = first_group(config)
    group.update(minSize=1, desiredSize=2, maxSize=4)
    config[f"{NS}nodeRepairMaxUnhealthy"] = 1
    config[f"{NS}vpcCidr"] = USER_VPC_CIDR
    config[f"{NS}teams"] = [
        {"name": "speech", "neuronShare": 0.25, "principalArns": [f"arn:aws:iam::{USER_ACCOUNT}:role/speech-researchers"]}
    ]


EDITS = {"dev": edit_dev, "staging": edit_staging, "prod": edit_prod}


def edited_stacks(directory) -> None:
    """Every shipped stack and its policy config, copied into ``directory`` as ``$PREFLIGHT_STACK_DIR`` has them, with
    the stack's account's ARNs replaced and its own edits applied."""
    (directory / "policy-config").mkdir()
    for stack in stackfile.stack_names():
        document = yaml.safe_load((stackfile.stack_directory() / f"Pulumi.{stack}.yaml").read_text())
        policy_config = json.loads((stackfile.policy_config_directory() / f"{stack}.json").read_text())
        config = with_account(document["config"])
        EDITS.get(stack, lambda *_: None)(config, policy_config)
        document["config"] = config
        (directory / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
        (directory / "policy-config" / f"{stack}.json").write_text(json.dumps(policy_config))


def shares(workers: int) -> list[list[str]]:
    """The test files, in ``workers`` shares of about equal size (the suite runs in one process: the others are idle)."""
    files = sorted(Path(__file__).parent.glob("test_*.py"), key=lambda path: path.stat().st_size, reverse=True)
    groups: list[list[Path]] = [[] for _ in range(workers)]
    for path in files:
        if path.name != Path(__file__).name:
            min(groups, key=lambda group: sum(p.stat().st_size for p in group)).append(path)
    return [[str(path) for path in group] for group in groups if group]


def run_stack_tests(directory) -> list[subprocess.CompletedProcess]:
    """The tests marked ``stacks``, run on the stacks in ``directory``, in parallel processes."""
    environment = {**os.environ, stackfile.STACK_DIR_VARIABLE: str(directory)}
    command = [sys.executable, "-m", "pytest", "-m", "stacks", "-q", "-p", "no:cacheprovider", "-x"]
    runs = [
        subprocess.Popen(
            [*command, *share],
            cwd=stackfile.REPO_ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for share in shares(max(1, os.cpu_count() or 1))
    ]
    outputs = [run.communicate(timeout=1800)[0] for run in runs]  # in turn: one blocked on a full pipe waits for its turn
    return [subprocess.CompletedProcess(run.args, run.returncode, output) for run, output in zip(runs, outputs, strict=True)]


def test_every_edit_reaches_the_copies_and_leaves_stacks_untouched(tmp_path):
    shipped = {p.name: p.read_text() for p in stackfile.stack_directory().glob("Pulumi.*.yaml")}
    edited_stacks(tmp_path)
    assert {p.name for p in tmp_path.glob("Pulumi.*.yaml")} == set(shipped)
    for name, text in shipped.items():
        assert (tmp_path / name).read_text() != text, name
        assert (stackfile.stack_directory() / name).read_text() == text, name
    probe = "from preflight import check, stackfile; print(stackfile.stack_directory(), check.CONFIG_DIR)"
    environment = {**os.environ, stackfile.STACK_DIR_VARIABLE: str(tmp_path)}
    seen = subprocess.run([sys.executable, "-c", probe], env=environment, capture_output=True, text=True, check=True)
    assert seen.stdout.split() == [str(tmp_path.resolve()), str(tmp_path.resolve() / "policy-config")]


def test_the_stack_dependent_tests_pass_on_a_users_edited_stacks(tmp_path):
    edited_stacks(tmp_path)
    runs = run_stack_tests(tmp_path)
    assert any(" passed" in run.stdout for run in runs), [run.stdout[-2000:] for run in runs]
    for run in runs:  # a share may hold no test of the marker
        assert run.returncode in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), run.stdout[-6000:]
