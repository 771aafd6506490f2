"""Every workload the platform runs, in one registry, as TorchTitan registers its train specs: a workload is one
module that declares ``WORKLOAD``, a ``Workload`` record, and ``WORKLOAD_MODULES`` names those modules in the order
``--workload`` lists them (the first is the default). The launcher's ``--workload`` choices, help and job names, the
rehearsal's choices and CPU shape, and the plan's Capacity Block drains (``preflight.drain_windows``) all read it.

A declaration is data and light to import: what builds its jobs (TorchX) and what runs it on CPUs (torch) it names by
import path, ``"module:attribute"``, which only the command that uses them imports, so ``preflight`` reads every
workload without the training stack (tests/test_layers.py). What every workload's request is checked for (its node
group's backend among the workload's) is done here once, before its planner works out the run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.errors import LaunchError
from jobs.job_building.capacity import choose_node_group
from jobs.job_building.grace_period import GracePeriod
from trainium_eks import backends, versions
from trainium_eks.contract import PlatformContract

if TYPE_CHECKING:  # the planners' types: their modules import TorchX, which the plan does without
    from jobs.job_building.platform_job import JobRequest
    from jobs.workloads.workload import TrainingRun

# The workloads' modules, in the order `--workload` lists them.
WORKLOAD_MODULES = ("jobs.workloads.bert", "jobs.workloads.torchtitan")


@dataclass(frozen=True)
class DefaultJob:
    """A workload's default job on an instance type: ``jobs.launch --workload WORKLOAD`` with no other option."""

    workload: str
    name: str
    recipe: str  # the model it trains
    grace: GracePeriod


@dataclass(frozen=True)
class BuiltJob:
    """A request's job as the cluster runs it (``launched_job``, the builder's last step), beside the run it was built
    from and its pods' grace period (None on a platform that publishes no file system throughput)."""

    job: dict
    run: TrainingRun
    grace: GracePeriod | None


@dataclass(frozen=True)
class Workload:
    """What the launcher runs as ``--workload NAME``: which backends run its training module, how a request's run is
    worked out (``planner``), the options after ``--`` that bring its first checkpoint sooner (its interval, its
    steps), its job's default name (with ``--precompile``, its precompile job's, where it has one), its default job on
    an instance type as the plan judges its drain, and how the rehearsal runs it on CPUs."""

    name: str
    summary: str  # what it trains and where, for --workload's help
    backends: tuple[str, ...]  # the training backends (``trainium_eks.backends``) its training module runs on
    planner: str  # "module:function" of (contract, JobRequest) -> jobs.workloads.workload.TrainingRun
    checkpoint_options: tuple[str, str]
    default_name: str
    # Its default job on an instance type at a file system throughput in MB/s; None where it has none there.
    default_job: Callable[[str, float], DefaultJob | None]
    rehearsal: str | None = None  # "module:attribute" of its CPU recipe (a jobs.rehearsal.cpu_workloads.RehearsedWorkload)
    default_precompile_name: str | None = None

    def job_name(self, precompile: bool) -> str:
        """The job's name when ``--name`` is not given."""
        return self.default_precompile_name if precompile and self.default_precompile_name else self.default_name

    def plan(self, contract: PlatformContract, request: JobRequest, planner: Callable | None = None) -> TrainingRun:
        """``request``'s run (``planner``, default the workload's own), refused in one line where the node group's
        image trains on a backend the workload's training module does not run on."""
        group = choose_node_group(contract, request.node_group)
        software = contract.software(group)
        # a backend this launcher does not know is placement's to refuse
        if software.backend in backends.BACKENDS and not self.trains(software.backend, software.generation):
            raise LaunchError(f"--node-group {group.name}: a {group.instance_type} is {software.generation}; {self.runs_on()}")
        return (planner or resolve(self.planner))(contract, request)

    def trains(self, backend: str, generation: str) -> bool:
        """Whether a group of ``generation`` whose training stack runs ``backend`` runs it."""
        return generation in self.generations().get(backend, ())

    def build(self, contract: PlatformContract, request: JobRequest, planner: Callable | None = None) -> BuiltJob:
        """``request``'s job, the one the launcher submits: its run (``plan``) and that run's ``launched_job``."""
        from jobs.workloads.workload import launched_job  # TorchX builds it: imported by the commands that build jobs

        run = self.plan(contract, request, planner)
        job, grace = launched_job(contract, run)
        return BuiltJob(job, run, grace)

    def job(self, contract: PlatformContract, request: JobRequest, planner: Callable | None = None) -> dict:
        """``request``'s job alone (``build``), as the rehearsal and the tests take it."""
        return self.build(contract, request, planner).job

    def cpu_recipe(self) -> Any:
        """Its CPU recipe, its module imported now; None where it declares none."""
        return None if self.rehearsal is None else resolve(self.rehearsal)

    def generations(self) -> dict[str, tuple[str, ...]]:
        """The Trainium generations that train it, by backend: those whose training stacks run one of its backends."""
        trained = {name: versions.backend_generations(name) for name in backends.BACKENDS if name in self.backends}
        return {name: generations for name, generations in trained.items() if generations}

    def help(self) -> str:
        """Its line in --workload's help: what it trains and the generations of the groups that run it."""
        generations = dict.fromkeys(g for on_backend in self.generations().values() for g in on_backend)
        return f"{self.summary} ({'/'.join(generations) or 'no'} groups)"

    def runs_on(self) -> str:
        """Which groups run it, worded from the generations' and backends' records, with the fix."""
        own = self.generations()
        if not own:
            return f"--workload {self.name} runs on no Trainium generation's training image"
        where = " and ".join(f"the {backend} backend ({', '.join(generations)})" for backend, generations in own.items())
        generations = dict.fromkeys(g for on_backend in own.values() for g in on_backend)
        return f"--workload {self.name} runs on {where}; choose a {' or '.join(generations)} group"


def resolve(reference: str) -> Any:
    """The attribute a ``"module:attribute"`` reference names, its module imported now."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def workloads() -> Mapping[str, Workload]:
    """Every registered workload by name, in ``WORKLOAD_MODULES``' order."""
    declared: dict[str, Workload] = {}
    for module in WORKLOAD_MODULES:
        workload = importlib.import_module(module).WORKLOAD
        if workload.name in declared:
            raise ValueError(f"{module}: workload {workload.name} is declared twice; give it another name")
        declared[workload.name] = workload
    return declared


def default_jobs(instance_type: str, throughput_mb_s: float) -> tuple[DefaultJob, ...]:
    """Each workload's default job on ``instance_type``, where it has one."""
    jobs = (workload.default_job(instance_type, throughput_mb_s) for workload in workloads().values())
    return tuple(job for job in jobs if job is not None)
