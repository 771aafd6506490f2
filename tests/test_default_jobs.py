"""What the plan reads without building jobs is what the launcher builds: on every group of the shipped and fixture
stacks, and on a trn2 Capacity Block group, each workload the launcher runs there is declared
(``jobs.workloads.registry.default_jobs``) under the launcher's default name, with the grace period the launcher's own run
gives it, and a whole node's requests (``capacity.whole_node_requests``) are those of the launcher's one-node job."""

from __future__ import annotations

import pytest
from support import STACKS, cached_plan, evaluate, one_group

from jobs.errors import LaunchError
from jobs.job_building.capacity import whole_node_requests
from jobs.job_building.platform_job import JobRequest, whole_node_usage
from jobs.workloads.registry import default_jobs, workloads
from trainium_eks.contract import PlatformContract

CASES = [(stack, False) for stack in STACKS] + [(stack, True) for stack in ("dev", "staging", "prod")]


def launched_defaults(contract: PlatformContract, group) -> dict[str, tuple[str, object]]:
    """Each workload the launcher runs on ``group`` by default: its job's name and its pods' grace period."""
    runs = {}
    for workload in workloads().values():
        request = JobRequest(name=workload.default_name, node_group=group.name)
        try:
            run = workload.plan(contract, request)
        except LaunchError:
            continue  # the launcher refuses it on this group (a backend or recipe it lacks)
        runs[workload.name] = (workload.default_name, run.grace_period(contract.fsx_throughput_mbps))
    return runs


def check_declared(contract: PlatformContract) -> int:
    checked = 0
    for group in contract.node_groups:
        software = contract.software(group)
        launched = whole_node_usage(
            contract,
            group,
            queue=contract.queues[0],
            image=software.training_image,
            backend=software.backend,
            workers=group.neuron_cores_per_node,
        )
        assert whole_node_requests(group) == launched, group.name
        declared = {
            job.workload: (job.name, job.grace) for job in default_jobs(group.instance_type, contract.fsx_throughput_mbps)
        }
        assert declared == launched_defaults(contract, group), group.name
        checked += len(declared)
    return checked


@pytest.mark.parametrize(("stack", "fixture"), CASES)
def test_every_groups_declared_default_jobs_are_the_launchers(stack, fixture):
    contract = PlatformContract.from_outputs(cached_plan(stack, False, fixture).outputs)
    assert check_declared(contract) >= len(contract.node_groups)  # BERT at least, on every group


def test_a_trn2_capacity_block_groups_torchtitan_job_is_declared_as_launched():
    contract = PlatformContract.from_outputs(evaluate("staging", fixture=True, **one_group("trn2.48xlarge")).outputs)
    (group,) = contract.node_groups
    assert {job.workload for job in default_jobs(group.instance_type, contract.fsx_throughput_mbps)} == set(workloads())
    check_declared(contract)
