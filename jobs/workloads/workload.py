"""A training workload of the platform's (BERT, TorchTitan) and the one builder of a torchrun job on whole nodes.

A workload declares its module and how it works out a request's run (``Workload.plan``): the training options, worked
out once, and what follows from them: the compile cache, the steps to the first checkpoint, the pods' grace period
and the job's annotations. ``training_job`` turns any run into the Volcano Job of
``jobs.job_building.platform_job.whole_node_job``: `jobs.launch` submits it, `jobs.rehearsal` runs the same job on CPUs, and the
acceptance checks that run torchrun build theirs with it too (``jobs.acceptance.check_workload.check_job``, the builder of every
check's job).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from jobs.job_building.grace_period import GracePeriod
from jobs.job_building.platform_job import COMPILE_CACHE_ANNOTATION, COMPILE_CACHE_INPUTS, JobRequest, Placement, whole_node_job
from jobs.job_building.torchx_component import DdpRun
from jobs.workloads.compile_cache import CompileCache
from trainium_eks.contract import PlatformContract


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


@dataclass(frozen=True)
class Workload:
    """What the launcher runs as ``--workload NAME``: how a request's run is worked out, the training options after
    -- that bring its first checkpoint sooner (its interval, its steps), and its job's default name (with
    ``--precompile``, its precompile job's, where it has one)."""

    name: str
    plan: Callable[[PlatformContract, JobRequest], TrainingRun]
    checkpoint_options: tuple[str, str]
    default_name: str
    default_precompile_name: str | None = None

    def job_name(self, precompile: bool) -> str:
        """The job's name when ``--name`` is not given."""
        return self.default_precompile_name if precompile and self.default_precompile_name else self.default_name

    def job(self, contract: PlatformContract, request: JobRequest) -> dict:
        return training_job(contract, self.plan(contract, request))


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
    annotations = dict(run.annotations)
    if run.cache.inputs:
        annotations = {COMPILE_CACHE_ANNOTATION: cache, COMPILE_CACHE_INPUTS: run.cache.describe(), **annotations}
    if annotations:
        job["metadata"].setdefault("annotations", {}).update(annotations)
    return job
