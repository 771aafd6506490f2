"""What `jobs.rehearsal` runs on CPUs, per workload: the job `jobs.launch` builds for it, what the shared volume must
hold first, the training options a CPU needs, where rank 0 writes its per-step records and checkpoints, how a
worker is killed at a step (``--kill-at``) and at every start (``--crash-at-start``). A workload's declaration names
its recipe (``jobs.workloads.registry.Workload.rehearsal``); ``cpu_recipes`` reads them all.

- ``bert``: the launcher's BERT job (``training.pretrain_bert``) with the tiny model; the training module kills its own
  last worker after the step (``--fail-at-step``), as an OOM kill would; at step 1 of every start that resumed from
  no checkpoint (training/pretrain_bert.py fail_here), none being written before step CHECKPOINT_EVERY, it crashes at
  every start.
- ``torchtitan``: the TorchTitan job (``jobs.workloads.torchtitan_job``) with the CPU rehearsal's recipe (TorchTitan 0.3.0's
  llama3 debug model with SDPA attention, ``training.titan_configs``; FSDP2 on gloo) and the generated tokenizer and
  text (``training.titan_assets``); a worker of the
  last agent is sent SIGKILL by its pid once the step is recorded. Its DCP checkpoints are the ``step-N`` folders
  whose ``.metadata`` is written, those TorchTitan resumes from.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath

from jobs.job_building.grace_period import BYTES_PER_PARAMETER
from jobs.job_building.platform_job import JobRequest
from jobs.rehearsal.local_agents import TINY_CPU_TRAINING, CpuOverrides, Rehearsal, stage_dataset, workers_of
from jobs.rehearsal.report import CHECKPOINT_EVERY, RehearsalRequest, checkpoints, rehearsed_workloads
from jobs.workloads import registry
from jobs.workloads.bert_job import DATASET
from jobs.workloads.titan_recipes import CPU_REHEARSAL
from jobs.workloads.torchtitan_job import MODULE, last_value, titan_run
from training import titan_assets
from trainium_eks.contract import PlatformContract


def container_command(job: dict) -> list[str]:
    (container,) = job["spec"]["tasks"][0]["template"]["spec"]["containers"]
    return container["command"]


def complete_checkpoints(folder: Path) -> list[int]:
    """The steps of the DCP checkpoints TorchTitan would resume from (those whose ``.metadata`` is written)."""
    return sorted(int(path.name.split("-")[1]) for path in folder.glob("step-*") if (path / ".metadata").exists())


def stage_titan_assets(fsx_root: Path, contract: PlatformContract) -> Path:
    """The CPU recipe's tokenizer and text where its job reads them: under the datasets path on the local volume."""
    datasets = fsx_root / PurePosixPath(contract.datasets_path).relative_to(contract.fsx_mount_path)
    return titan_assets.write_assets(datasets / titan_assets.ASSETS)


@dataclass(frozen=True)
class RehearsedWorkload:
    """How `jobs.rehearsal` runs a launcher's workload on CPUs: the job it builds, and what the rehearsal adds. Any
    workload whose training module it fits may name it (a BERT variant, BERT's)."""

    job_name: str
    workers_per_node: int  # a CPU has few cores
    stage: Callable[[Path, PlatformContract], object]
    training_args: Callable[[RehearsalRequest], dict[str, str]]
    output_flag: str  # the option naming the directory of metrics.jsonl
    saved: Callable[[Path], list[int]]  # the checkpoints' steps, from the output directory
    kill_module: str | None  # the module whose worker is killed by pid at --kill-at (None: it kills itself)
    # The training options that make a worker fail at every start (--crash-at-start); None: it has none.
    crash_at_start: Mapping[str, str] | None = None
    planner: Callable | None = None  # how its run is worked out on a CPU, where not the workload's own planner
    # One checkpoint's size in GiB where the launcher has no sourced one for the CPU model (its --checkpoint-gib).
    checkpoint_gib: Callable[[], float] | None = None

    def job(self, contract: PlatformContract, request: RehearsalRequest) -> dict:
        """The job `jobs.launch` builds for the request, grace period included (refused in one line as the launcher
        refuses it, before the CPU model's checkpoint is sized)."""
        workload = registry.workloads()[request.workload]
        asked = JobRequest(
            name=self.job_name, nodes=request.nodes, workers_per_node=request.workers_per_node, node_group=request.node_group
        )
        if self.checkpoint_gib is not None:
            workload.plan(contract, asked, self.planner)
            asked = asked.model_copy(update={"checkpoint_gib": self.checkpoint_gib()})
        return workload.job(contract, asked, self.planner)

    def output_dir(self, job: dict, overrides: CpuOverrides) -> Path:
        """Where the job's rank 0 writes its records and checkpoints, moved to the local volume."""
        return Path(overrides.localise(last_value(container_command(job), self.output_flag)))

    def kill_worker(self, agents: Rehearsal) -> None:
        """SIGKILL to a worker of the last agent, as an OOM kill would."""
        (worker, *_) = workers_of(agents.agents[-1].process.pid, self.kill_module)
        os.kill(worker, signal.SIGKILL)


def titan_cpu_checkpoint_gib() -> float:
    """The CPU recipe's checkpoint (``DEBUG_MODEL_OPTIONS``' config) in GiB: its model as TorchTitan builds it, on the
    meta device (no memory), in the layout ``TitanRecipe.checkpoint_bytes`` counts."""
    import torch

    from training import titan_configs

    with torch.device("meta"):
        model = titan_configs.llama3_debugmodel_sdpa().model_spec.model.build()
    return sum(parameter.numel() for parameter in model.parameters()) * BYTES_PER_PARAMETER / 1024**3


def bert_training(request: RehearsalRequest) -> dict[str, str]:
    fail = {"--fail-at-step": str(request.kill_at)} if request.kill_at else {}
    return {**TINY_CPU_TRAINING, "--max-steps": str(request.steps), **fail}


def titan_training(request: RehearsalRequest) -> dict[str, str]:
    return {"--device": "cpu", "--training.steps": str(request.steps), "--checkpoint.interval": str(CHECKPOINT_EVERY)}


BERT_ON_CPU = RehearsedWorkload(
    job_name="berttrain",
    workers_per_node=2,
    stage=lambda fsx, contract: stage_dataset(fsx, DATASET),
    training_args=bert_training,
    output_flag="--output-dir",
    saved=checkpoints,
    kill_module=None,
    crash_at_start={"--fail-at-step": "1"},
)
TORCHTITAN_ON_CPU = RehearsedWorkload(
    job_name="titantrain",
    workers_per_node=1,  # its FSDP2 steps are the heavier
    stage=stage_titan_assets,
    training_args=titan_training,
    output_flag="--dump_folder",
    saved=lambda dump_folder: complete_checkpoints(dump_folder / "checkpoint"),
    kill_module=MODULE,
    planner=partial(titan_run, recipe=CPU_REHEARSAL),
    checkpoint_gib=titan_cpu_checkpoint_gib,
)


def cpu_recipes() -> dict[str, RehearsedWorkload]:
    """Each registered workload's CPU recipe, where it declares one, by workload name."""
    declared = registry.workloads()
    return {name: declared[name].cpu_recipe() for name in rehearsed_workloads()}
