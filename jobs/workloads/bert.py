"""The BERT pretraining workload of the seed tutorial (``training/pretrain_bert.py``), on any node group:
``jobs.launch --workload bert``, the default. ``bert_job`` works out its runs; its default job on an instance type is
the launcher's with no option, whose grace period the plan judges (tests/test_default_jobs.py checks it against the
launcher's own run)."""

from __future__ import annotations

from jobs.job_building.grace_period import job_grace_period
from jobs.workloads.registry import DefaultJob, Workload
from training import options

# The seed tutorial's micro-batch and gradient accumulation, which the launcher passes unless given after --.
BATCH_SIZE = 16
GRAD_ACCUM_STEPS = 32
DEFAULT_NAME = "berttrain"


def default_job(instance_type: str, throughput_mb_s: float) -> DefaultJob:
    """The default job on any instance type: the training script's default model at the tutorial's batch."""
    model = options.parser().get_default("model")
    grace = job_grace_period(model, instance_type, BATCH_SIZE, GRAD_ACCUM_STEPS, throughput_mb_s)
    return DefaultJob("bert", DEFAULT_NAME, f"BERT-{model}", grace)


WORKLOAD = Workload(
    name="bert",
    summary="BERT pretraining, the seed tutorial's",
    backends=("xla", "neuron", "cpu"),  # training/pretrain_bert.py's --device choices
    planner="jobs.workloads.bert_job:bert_run",
    checkpoint_options=("--checkpoint-every", "--steps-this-run"),
    default_name=DEFAULT_NAME,
    default_precompile_name="bertcompile",
    default_job=default_job,
    rehearsal="jobs.rehearsal.cpu_workloads:BERT_ON_CPU",
)
