"""LLM pre-training with TorchTitan Neuron (``training/titan_train.py``) on trn2 and trn3 groups:
``jobs.launch --workload torchtitan``. ``torchtitan_job`` works out its runs from the Neuron tutorials' recipe for the
group's instance type (``titan_recipes``); its default job there, whose checkpoint is the recipe's sourced model, is
what the plan judges a drain by."""

from __future__ import annotations

from jobs.job_building.grace_period import GracePeriod
from jobs.workloads.registry import DefaultJob, Workload
from jobs.workloads.titan_recipes import WORKLOAD_NAME, recipe_for

DEFAULT_NAME = "qwen3train"


def default_job(instance_type: str, throughput_mb_s: float) -> DefaultJob | None:
    """The default job where a cited recipe with a sourced model size exists for ``instance_type``."""
    recipe = recipe_for(instance_type)
    if recipe is None or recipe.checkpoint_bytes is None:
        return None
    # no source gives a TorchTitan step time: the default job's grace period leaves the step out
    return DefaultJob(WORKLOAD_NAME, DEFAULT_NAME, recipe.name, GracePeriod(recipe.checkpoint_bytes, throughput_mb_s, None))


WORKLOAD = Workload(
    name=WORKLOAD_NAME,
    summary="LLM pre-training, the Neuron tutorial's configuration for the group's instance type",
    # TorchTitan Neuron runs on TorchNeuron (Neuron docs, "Quickstart: Install and verify torch-neuronx"; the
    # backend's record), and the rehearsal's CPU recipe on gloo
    backends=("neuron", "cpu"),
    planner="jobs.workloads.torchtitan_job:titan_run",
    checkpoint_options=("--checkpoint.interval", "--training.steps"),
    default_name=DEFAULT_NAME,
    default_job=default_job,
    rehearsal="jobs.rehearsal.cpu_workloads:TORCHTITAN_ON_CPU",
)
