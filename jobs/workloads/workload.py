"""A training workload's run and the one builder of a torchrun job on whole nodes.

A workload (``jobs.workloads.registry``) works out a request's run (``TrainingRun``): the training options, worked out
once, and what follows from them: the compile cache, the steps to the first checkpoint, the pods' grace period and
the job's annotations. ``training_job`` turns any run into the Volcano Job of
``jobs.job_building.platform_job.whole_node_job``, and ``launched_job`` finishes a training run's job with the grace
period its drain needs (refused where a Capacity Block's window cannot hold it): `jobs.launch` submits that job,
`jobs.rehearsal` runs the same job on CPUs, grace period included (``Workload.job``), and the acceptance checks that
run torchrun build theirs with ``training_job`` (``jobs.acceptance.check_workload.check_job``, the builder of every
check's job), as they write no checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from jobs.errors import LaunchError
from jobs.job_building.capacity_blocks import in_capacity_block
from jobs.job_building.grace_period import KUBERNETES_DEFAULT_GRACE_SECONDS, GracePeriod
from jobs.job_building.paths import run_directory
from jobs.job_building.platform_job import (
    COMPILE_CACHE_ANNOTATION,
    COMPILE_CACHE_INPUTS,
    GRACE_PERIOD_ANNOTATION,
    JobRequest,
    Placement,
    whole_node_job,
    with_crash_budget,
    with_grace_period,
)
from jobs.job_building.torchx_component import DdpRun
from jobs.workloads.compile_cache import CompileCache
from trainium_eks.contract import PlatformContract
from trainium_eks.karpenter_termination import disruption_summary

# Whether a drain of the job's pods fits a Capacity Block's window, on a group whose nodes run in one.
CAPACITY_BLOCK_ANNOTATION = "trainium-eks/capacity-block-drain"
# What each way Karpenter takes an elastic group's node does to the job (``trainium_eks.karpenter_termination``).
DISRUPTIONS_ANNOTATION = "trainium-eks/disruptions"


@dataclass(frozen=True)
class TrainingRun:
    """One request's run of a workload, its training options worked out once: the job, the pods' grace period, the
    steps to the first checkpoint and the compile cache all read them."""

    request: JobRequest
    placed: Placement
    module: str  # the training module, run by torchrun -m
    options: tuple[str, ...]  # its command line
    cache: CompileCache
    bf16_flag: bool  # whether the component adds --bf16 (BERT's option; others state precision among their options)
    # A new run's steps before its first checkpoint, and its pods' grace period at a file system throughput in MB/s;
    # None for an acceptance check, which writes no checkpoint and runs once.
    first_checkpoint_steps: int | None = None
    grace_period: Callable[[float], GracePeriod] | None = None
    precompile: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)  # what the job's annotations add of the workload's


def training_job(contract: PlatformContract, run: TrainingRun) -> dict:
    """The Volcano Job of ``run``, annotated with the workload's own annotations and a compile cache named by its
    inputs with them (which, and why: `kubectl describe vcjob` shows it as the launcher prints it); a check's shared
    cache has none."""
    placed = run.placed
    cache = f"{contract.neuron_compile_cache_path}/{run.cache.name}"
    ddp = DdpRun(
        image=placed.image,
        module=run.module,
        name=run.request.name,
        nnodes=placed.nodes,
        nproc_per_node=placed.workers,
        compile_cache=cache,
        backend=placed.software.backend,
        bf16=run.bf16_flag,
        precompile=run.precompile,
    )
    job = whole_node_job(contract, placed.group, ddp, *run.options, queue=placed.queue)
    if run.first_checkpoint_steps is not None:  # a training run, which resumes: its crashes are counted where it writes
        with_crash_budget(job, run_directory(contract, run.request.name, placed.group))
    annotations = dict(run.annotations)
    if run.cache.inputs:
        annotations = {COMPILE_CACHE_ANNOTATION: cache, COMPILE_CACHE_INPUTS: run.cache.describe(), **annotations}
    if annotations:
        job["metadata"].setdefault("annotations", {}).update(annotations)
    return job


def launched_job(contract: PlatformContract, run: TrainingRun) -> tuple[dict, GracePeriod | None]:
    """The Volcano Job of ``run``, its pods given the grace period a drain needs (returned beside it), refused where
    its nodes run in a Capacity Block and that drain does not fit the block's window; on a platform older than
    contract 1.6.0, which publishes no file system throughput, Kubernetes' default (None), and the annotation says
    why."""
    job = training_job(contract, run)
    if contract.fsx_throughput_mbps is None:
        job["metadata"]["annotations"][GRACE_PERIOD_ANNOTATION] = (
            f"Kubernetes' default {KUBERNETES_DEFAULT_GRACE_SECONDS} s: contract {contract.version} publishes no "
            "fsxThroughputMBps to size a drain's checkpoint write by; upgrade the platform stack"
        )
        return job, None
    grace = run.grace_period(contract.fsx_throughput_mbps)
    too_long = grace.beyond_bound()
    if too_long:
        raise LaunchError(f"fsxThroughputMBps or --step-seconds: {too_long}; check the outputs' throughput and the step")
    group = run.placed.group
    block = in_capacity_block(contract, group)
    if block:
        if not grace.fits_capacity_block_window:
            raise LaunchError(f"--node-group {group.name}: {grace.capacity_block_verdict()}")
        job["metadata"]["annotations"][CAPACITY_BLOCK_ANNOTATION] = grace.capacity_block_verdict()
    if contract.elastic(group):
        job["metadata"]["annotations"][DISRUPTIONS_ANNOTATION] = disruption_summary(grace.seconds, block)
    return with_grace_period(job, grace), grace
