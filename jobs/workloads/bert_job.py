"""The BERT pretraining workload of the seed tutorial (``training/pretrain_bert.py``), on any node group: its training
options (the launcher's own, each replaced by the one of the same name given after ``--``), worked out once into its
run (``jobs.workloads.workload``): its Volcano Job, its pods' grace period and the steps before a new run's first checkpoint.
``jobs.launch`` runs it as ``--workload bert``."""

from __future__ import annotations

from functools import partial
from typing import Any

from jobs.errors import LaunchError
from jobs.job_building.capacity import choose_node_group
from jobs.job_building.grace_period import job_grace_period
from jobs.job_building.paths import on_shared_volume, run_directory
from jobs.job_building.platform_job import JobRequest, placement
from jobs.workloads.bert import BATCH_SIZE, GRAD_ACCUM_STEPS, WORKLOAD
from jobs.workloads.compile_cache import compile_cache
from jobs.workloads.workload import TrainingRun
from training import options
from trainium_eks.cli import UsageError
from trainium_eks.contract import PlatformContract

MODULE = "training.pretrain_bert"
DATASET = "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128"
PRECOMPILE_STEPS = 10  # a few steps trace every graph
# The training module's options that name directories on the shared volume, which every pod mounts.
VOLUME_OPTIONS = ("data_dir", "output_dir", "tensorboard_dir")


def bert_run(contract: PlatformContract, request: JobRequest) -> TrainingRun:
    """``request``'s BERT run, validated against the platform's capacity, its training options worked out once."""
    placed = placement(contract, request)
    chosen = training_options(contract, request)
    defaults = options.parser()
    model = chosen.get("model", defaults.get_default("model"))
    return TrainingRun(
        request=request,
        placed=placed,
        module=MODULE,
        options=tuple(options.command_line(chosen)),
        cache=compile_cache(
            chosen,
            bf16=request.bf16,
            world_size=placed.world_size,
            instance_type=placed.group.instance_type,
            training_stack=placed.software.training_stack,
            image_tag=placed.image.rpartition(":")[2],
        ),
        first_checkpoint_steps=first_checkpoint_steps(chosen, defaults),
        # a step at the sourced rate of the model it trains on the group's instance type, or --step-seconds
        grace_period=partial(
            job_grace_period,
            model,
            placed.group.instance_type,
            chosen["batch_size"],
            chosen["grad_accum_steps"],
            step_seconds=request.step_seconds,
        ),
        bf16_flag=request.bf16,
        precompile=request.precompile,
    )


def volcano_job(contract: PlatformContract, request: JobRequest) -> dict:
    """The Volcano Job for ``request``, validated against the platform's capacity."""
    return WORKLOAD.job(contract, request)


def first_checkpoint_steps(chosen: dict[str, Any], defaults) -> int:
    """The steps a new BERT run trains before its first checkpoint: its interval, or its last step if that comes
    first, where the script writes one too (``training/pretrain_bert.py``: ``step == last_step``)."""
    every = chosen.get("checkpoint_every", defaults.get_default("checkpoint_every"))
    last = chosen.get("max_steps", defaults.get_default("max_steps"))
    this_run = chosen.get("steps_this_run", defaults.get_default("steps_this_run"))
    return min(every, last if this_run < 0 else min(last, this_run))


def training_options(contract: PlatformContract, request: JobRequest) -> dict[str, Any]:
    """The training module's options the job passes, by name: the launcher's own (its dataset, checkpoint and
    TensorBoard directories on the shared volume, the tutorial's micro-batch and accumulation, a few steps for a
    precompile), each replaced by the option of the same name given after `--`, and the other options given."""
    try:
        given = options.given(request.training_args)
    except UsageError as error:
        raise LaunchError(f"after --: {error}") from None
    if "bf16" in given:
        raise LaunchError("--bf16 after --: the launcher passes it itself (bf16 is its default); --no-bf16 turns it off")
    group = choose_node_group(contract, request.node_group)
    backend = contract.software(group).backend
    if given.get("device", "auto") not in ("auto", backend):
        raise LaunchError(
            f"--device {given['device']} after --: node group {group.name}'s image trains on the {backend} backend; "
            f"drop it (auto takes the image's) or pass --device {backend}"
        )
    chosen = {
        "data_dir": f"{contract.datasets_path}/{DATASET}",
        # The run's own: another node group's run of the same name never resumes from these checkpoints.
        "output_dir": run_directory(contract, request.name, group),
        "tensorboard_dir": f"{contract.tensorboard_log_path}/{request.name}",
        "batch_size": BATCH_SIZE,
        "grad_accum_steps": GRAD_ACCUM_STEPS,
        **({"steps_this_run": PRECOMPILE_STEPS} if request.precompile else {}),
        **given,
    }
    for name in VOLUME_OPTIONS:
        on_shared_volume(contract, "--" + name.replace("_", "-"), str(chosen[name]), after_dashes=True)
    return chosen
