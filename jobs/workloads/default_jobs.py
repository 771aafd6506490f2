"""What a plan needs of each workload's default job, as data the workloads declare: the job's name, the model it
trains on an instance type, and its pods' termination grace period at a file system throughput. ``preflight``
judges Capacity Block drains from this without TorchTitan, TorchX or the launcher's command line
(``preflight.drain_windows``); the workloads build their jobs from the same values (``bert_job``,
``torchtitan_job``), and tests/test_default_jobs.py checks each against the launcher's own run of the default job.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.job_building.grace_period import GracePeriod, job_grace_period
from jobs.workloads.titan_recipes import RECIPES
from training import options

# The seed tutorial's micro-batch and gradient accumulation, which the launcher passes unless given after --.
BERT_BATCH_SIZE = 16
BERT_GRAD_ACCUM_STEPS = 32
BERT_DEFAULT_NAME = "berttrain"
TORCHTITAN_DEFAULT_NAME = "qwen3train"


@dataclass(frozen=True)
class DefaultJob:
    """A workload's default job on an instance type: ``jobs.launch --workload WORKLOAD`` with no other option."""

    workload: str
    name: str
    recipe: str  # the model it trains
    grace: GracePeriod


def default_jobs(instance_type: str, throughput_mb_s: float) -> tuple[DefaultJob, ...]:
    """Each workload's default job on ``instance_type``: BERT on any group, TorchTitan where a cited recipe exists."""
    model = options.parser().get_default("model")
    bert_grace = job_grace_period(model, instance_type, BERT_BATCH_SIZE, BERT_GRAD_ACCUM_STEPS, throughput_mb_s)
    jobs = [DefaultJob("bert", BERT_DEFAULT_NAME, f"BERT-{model}", bert_grace)]
    titan = RECIPES.get(instance_type)
    if titan is not None and titan.checkpoint_bytes is not None:
        # no source gives a TorchTitan step time: the default job's grace period leaves the step out
        jobs.append(
            DefaultJob(
                "torchtitan", TORCHTITAN_DEFAULT_NAME, titan.name, GracePeriod(titan.checkpoint_bytes, throughput_mb_s, None)
            )
        )
    return tuple(jobs)
