"""What a plan says of a drain on each Trainium group whose nodes run in a Capacity Block: for each workload the
launcher runs there (each registered workload's default job on the instance type, where it has one: BERT on any group,
TorchTitan where a Neuron recipe exists for the instance type), the default job's termination grace period, from what
the workloads declare of their default jobs (``jobs.workloads.registry.default_jobs``, which tests check against the
launcher's own runs; read without TorchTitan, TorchX or the launcher),
against the window such a node surely gets between Karpenter's drain and EC2's reclaim (``jobs.job_building.grace_period``).
``capacity_block_drains`` computes them once; ``plan --json`` carries them as ``capacityBlockDrains`` and the text
(``drain_lines``) is printed from that same object."""

from __future__ import annotations

from jobs.job_building import capacity_blocks
from jobs.job_building.grace_period import CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS, GracePeriod
from jobs.workloads.registry import DefaultJob, default_jobs
from plan_graph.graph import Graph
from plan_graph.trainium_groups import trainium_groups
from preflight import planfile
from trainium_eks.contract import ContractError, PlatformContract
from trainium_eks.karpenter_termination import disruption_summary

PREVIEW = "not known in a preview: the stack's outputs the launcher reads are not"


def _drain(job: DefaultJob) -> planfile.CapacityBlockDrain:
    grace = job.grace
    return planfile.CapacityBlockDrain.record(
        workload=job.workload,
        recipe=job.recipe,
        checkpoint_bytes=grace.checkpoint_bytes,
        throughput_mb_s=grace.throughput_mb_s,
        step_seconds=grace.step_seconds,
        grace_seconds=grace.seconds,
        fits=grace.fits_capacity_block_window,
        throughput_to_fit_mb_s=grace.throughput_to_fit(),
        step_to_fit_seconds=grace.step_to_fit(),
    )


def capacity_block_drains(graph: Graph, outputs: dict) -> dict:
    """Each Capacity Block group's default jobs' drains against the block's window, as the plan file carries them;
    ``launcherChecks``: whether ``jobs.launch`` knows the group runs in a block (``capacity_blocks.in_capacity_block``)
    and so refuses a drain too long."""
    names = [group.name for group in trainium_groups(graph) if group.in_capacity_block()]
    window = CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS
    if not names:
        return planfile.CapacityBlockDrains.record(window_seconds=window, groups=(), not_known=None).to_json()
    try:
        contract = PlatformContract.from_outputs(outputs)
    except ContractError:
        return planfile.CapacityBlockDrains.record(window_seconds=window, groups=(), not_known=PREVIEW).to_json()
    groups = tuple(
        planfile.CapacityBlockGroup.record(
            group=group.name,
            instance_type=group.instance_type,
            launcher_checks=capacity_blocks.in_capacity_block(contract, group),
            drains=tuple(_drain(job) for job in default_jobs(group.instance_type, contract.fsx_throughput_mbps)),
        )
        for group in contract.node_groups
        if group.name in names and contract.fsx_throughput_mbps is not None
    )
    return planfile.CapacityBlockDrains.record(window_seconds=window, groups=groups, not_known=None).to_json()


def drain_lines(drains: dict) -> list[str]:
    """For each Capacity Block group, each default job's drain against the window, worded as the launcher words it."""
    if drains["notKnown"]:
        return [f"Drains in a Capacity Block: {drains['notKnown']}"]
    lines = []
    for group in drains["groups"]:
        lines.append(
            f"Drains on Capacity Block group {group['group']} ({group['instanceType']}), each workload's default job "
            f"(Karpenter drains a block's nodes {drains['windowSeconds']} s before EC2 reclaims them):"
        )
        for drain in group["drains"]:
            grace = GracePeriod(drain["checkpointBytes"], drain["throughputMBps"], drain["stepSeconds"])
            lines.append(f"    {drain['workload']} ({drain['recipe']}): {grace.capacity_block_verdict()}")
            if drain["fits"]:  # then what each way a node of the pool goes does to it (Karpenter's termination path)
                lines.append(f"        {disruption_summary(grace.seconds, capacity_block=True)}")
        if not group["launcherChecks"]:
            lines.append(
                "    jobs.launch does not check it: the contract does not say this group runs in a block (its type is "
                "also sold on demand)"
            )
    return lines
