"""A training workload of the platform's (BERT, TorchTitan) and the one builder of its Volcano Job.

A workload declares its module and how it works out a request's run (``Workload.plan``): the training options, worked
out once, and what follows from them: the compile cache, the steps to the first checkpoint, the pods' grace period
and the job's annotations. ``training_job`` turns any run into the Volcano Job of ``jobs.platform_job.whole_node_job``;
`jobs.launch` submits it and `jobs.rehearsal` runs the same job on CPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from jobs.compile_cache import CompileCache
from jobs.grace_period import GracePeriod
from jobs.platform_job import COMPILE_CACHE_ANNOTATION, COMPILE_CACHE_INPUTS, JobRequest, Placement, whole_node_job
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
    first_checkpoint_steps: int  # a new run's steps before its first checkpoint
    grace_period: Callable[[float], GracePeriod]  # the pods' grace period at a file system throughput in MB/s
    bf16_flag: bool  # whether the component adds --bf16 (BERT's option; others state precision among their options)
    precompile: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)  # what the job's annotations add of the workload's


@dataclass(frozen=True)
class Workload:
    """What the launcher runs as ``--workload NAME``: how a request's run is worked out, the training options after
    -- that bring its first checkpoint sooner (its interval, its steps), and its job's default name."""

    name: str
    plan: Callable[[PlatformContract, JobRequest], TrainingRun]
    checkpoint_options: tuple[str, str]
    default_name: str

    def job(self, contract: PlatformContract, request: JobRequest) -> dict:
        return training_job(contract, self.plan(contract, request))


def training_job(contract: PlatformContract, run: TrainingRun) -> dict:
    """The Volcano Job of ``run``, annotated with its compile cache (which, and why: `kubectl describe vcjob` shows it
    as the launcher prints it) and the workload's own annotations."""
    placed = run.placed
    job = whole_node_job(
        contract,
        placed.group,
        *run.options,
        name=run.request.name,
        queue=placed.queue,
        image=placed.image,
        backend=placed.software.backend,
        nnodes=placed.nodes,
        nproc_per_node=placed.workers,
        cache_set=run.cache.name,
        module=run.module,
        bf16=run.bf16_flag,
        precompile=run.precompile,
    )
    job["metadata"].setdefault("annotations", {}).update(
        {
            COMPILE_CACHE_ANNOTATION: f"{contract.neuron_compile_cache_path}/{run.cache.name}",
            COMPILE_CACHE_INPUTS: run.cache.describe(),
            **run.annotations,
        }
    )
    return job
