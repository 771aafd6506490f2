"""How long a drained training pod needs to lose no step: its ``terminationGracePeriodSeconds``.

On SIGTERM every worker finishes its step, they agree to stop, rank 0 writes a checkpoint of that step to the
shared volume and all exit (``training/drain.py``). The kubelet SIGKILLs the pod when its grace period runs out, and
torchrun SIGKILLs its workers when its own shutdown timeout does (30 s unless raised), so both must cover, in the worst
case, one whole step plus one checkpoint write:

    grace = step_seconds + checkpoint_bytes / write throughput + Kubernetes' default grace period

- ``step_seconds``: SIGTERM can come just after the workers agreed to go on, so a whole step runs before the next
  agreement (the script checkpoints before it agrees, so a step that writes its periodic checkpoint writes no second).
- the write: weights and AdamW's two moments, in fp32, from ``checkpoint_bytes``, at the file system's throughput,
  which the platform publishes as ``fsxThroughputMBps`` (``trainium_eks.fsx_throughput.write_mb_s``).
- the margin, ``KUBERNETES_DEFAULT_GRACE_SECONDS``: what any pod gets to exit, kept on top for what the two terms do
  not count: copying the state off the device, the checkpoint's rename, tearing down the process group and exiting.

Where no source gives the step's time (any pairing but the tutorial's), the step is left out and the description says
so: the pods still get the checkpoint write and the margin, and ``--step-seconds`` adds the step.

On a Capacity Block's node a drain has ``CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS`` (Karpenter drains it ten minutes before
EC2 reclaims it, less the minute its controller may take to see the block expire), so the launcher refuses a job whose
grace period exceeds it and names what would fit: the file system throughput and, where the step is counted, the
longest step. With the step not known, the known terms must fit
and the verdict says how long the uncounted step may take.

``job_grace_period`` is what the launcher calls; ``grace_period_seconds`` is the formula alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from training.options import CONFIGS
from trainium_eks import catalog, karpenter_termination

# "By default, all deletes are graceful within 30 seconds" (Kubernetes docs, "Pod Lifecycle", termination of pods;
# the pod spec's terminationGracePeriodSeconds defaults to 30).
KUBERNETES_DEFAULT_GRACE_SECONDS = 30
# What the checkpoint holds per parameter: the fp32 weight (the script never casts its parameters; bf16 is autocast
# or XLA_DOWNCAST_BF16 on the device) and AdamW's exp_avg and exp_avg_sq, each the parameter's size and dtype
# (torch.optim.AdamW). training/checkpoint.py writes exactly these; tests/test_grace_period.py measures one.
FP32_BYTES = 4
BYTES_PER_PARAMETER = FP32_BYTES * (1 + 2)
# The time a drained pod surely has on a Capacity Block's node: Karpenter deletes the block's NodeClaims 40 minutes
# before its end, seen within a minute, and EC2 terminates its instances 30 minutes before it; the pools'
# terminationGracePeriod is this window, so Karpenter deletes each training pod its grace period before the window
# ends (``trainium_eks.karpenter_termination``, with the lines of Karpenter it follows). A longer grace period would be
# cut short when the instance goes.
CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS = karpenter_termination.CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS
# The longest grace period the launcher sets (``karpenter_termination.LONGEST_DRAIN_SECONDS``: a day): a drain longer
# than that means a misstated step, checkpoint or throughput (``--step-seconds 1e308`` would give a 309-digit
# terminationGracePeriodSeconds, past Kubernetes' int64). The other pools' terminationGracePeriod is this bound.
MAX_GRACE_SECONDS = karpenter_termination.LONGEST_DRAIN_SECONDS
# What of the window the step and the checkpoint's write may take: the rest is the exit's margin.
STEP_AND_WRITE_WINDOW_SECONDS = CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS - KUBERNETES_DEFAULT_GRACE_SECONDS
# The workload whose models training.options.CONFIGS holds: its step rates are the catalog rows' (``step_rates``).
BERT = "bert"
MB = 1000**2  # FSx states throughput in MB/s


def parameter_count(config: Mapping[str, Any]) -> int:
    """The parameters of Hugging Face's BertForPreTraining of ``config`` (training/options.py's plain data), counted
    from its layers; the masked-LM decoder shares the word embeddings and adds only its bias."""
    hidden, vocab, inner = config["hidden_size"], config["vocab_size"], config["intermediate_size"]
    linear = lambda inputs, outputs: inputs * outputs + outputs  # noqa: E731  weight and bias
    layer_norm = 2 * hidden
    embeddings = (vocab + config["max_position_embeddings"] + config["type_vocab_size"]) * hidden + layer_norm
    attention = 4 * linear(hidden, hidden) + layer_norm  # query, key, value, output
    feed_forward = linear(hidden, inner) + linear(inner, hidden) + layer_norm
    pooler = linear(hidden, hidden)
    heads = linear(hidden, hidden) + layer_norm + vocab + linear(hidden, 2)  # MLM transform, decoder bias, NSP
    return embeddings + config["num_hidden_layers"] * (attention + feed_forward) + pooler + heads


def checkpoint_bytes(model: str) -> int:
    """The tensor bytes of a ``training.pretrain_bert`` checkpoint of ``--model model`` (file headers aside)."""
    return parameter_count(CONFIGS[model]) * BYTES_PER_PARAMETER


def grace_period_seconds(checkpoint_bytes: int, throughput_mb_s: float, step_seconds: float | None) -> int:
    """The module's formula: one step (None: not known, left out), one checkpoint write and Kubernetes' default grace
    period, in whole seconds."""
    write_seconds = checkpoint_bytes / (throughput_mb_s * MB)
    return math.ceil((step_seconds or 0.0) + write_seconds + KUBERNETES_DEFAULT_GRACE_SECONDS)


def step_seconds_of(model: str, instance_type: str, batch_size: int, grad_accum_steps: int) -> float | None:
    """A BERT worker's step time: its sequences per step at the sourced per-worker rate of ``model`` on
    ``instance_type`` (the type's catalog row); None where no source gives that rate."""
    rate = catalog.INSTANCE_TYPES[instance_type].sequences_per_second_per_worker(BERT, model)
    return None if rate is None else batch_size * grad_accum_steps / rate


@dataclass(frozen=True)
class GracePeriod:
    """A pod's terminationGracePeriodSeconds and the terms it adds up."""

    checkpoint_bytes: int
    throughput_mb_s: float
    step_seconds: float | None  # None: no source gives it, and --step-seconds was not given

    @property
    def seconds(self) -> int:
        return grace_period_seconds(self.checkpoint_bytes, self.throughput_mb_s, self.step_seconds)

    @property
    def write_seconds(self) -> float:
        return self.checkpoint_bytes / (self.throughput_mb_s * MB)

    @property
    def fits_capacity_block_window(self) -> bool:
        """Whether the drain ends before EC2 reclaims a Capacity Block's node (the step, where not known, left out)."""
        return self.seconds <= CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS

    def throughput_to_fit(self) -> int | None:
        """The lowest whole MB/s at which the checkpoint's write fits the window beside the step and the exit; None
        where the step and the exit alone fill it."""
        time_to_write = STEP_AND_WRITE_WINDOW_SECONDS - (self.step_seconds or 0.0)
        return math.ceil(self.checkpoint_bytes / (time_to_write * MB)) if time_to_write > 0 else None

    def step_to_fit(self) -> int | None:
        """The longest whole-second step that fits the window beside the write and the exit; None where they fill it."""
        longest = math.floor(STEP_AND_WRITE_WINDOW_SECONDS - self.write_seconds)
        return longest if longest > 0 else None

    def capacity_block_verdict(self) -> str:
        """Whether the drain fits a Capacity Block's window, in words: the time to spare (what a step not counted may
        take), or what would make it fit: the file system throughput (``fsxThroughputMBps``) or a shorter step."""
        window = f"a Capacity Block's {CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS} s drain window"
        if self.fits_capacity_block_window:
            spare = CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS - self.seconds
            step = f"; the step, not counted, must take under {spare} s" if self.step_seconds is None else ""
            return f"a drain takes {self.seconds} s, within {window} ({spare} s to spare{step})"
        step = "step not counted" if self.step_seconds is None else f"{self.step_seconds:g} s step"
        terms = (
            f"{self.checkpoint_bytes / 1000**3:.2f} GB checkpoint at {self.throughput_mb_s:.0f} MB/s, {step}, "
            f"{KUBERNETES_DEFAULT_GRACE_SECONDS} s to exit"
        )
        throughput, longest = self.throughput_to_fit(), self.step_to_fit()
        faster = f"fsxThroughputMBps >= {throughput} MB/s (fsxStorageCapacityGiB x fsxThroughputPerTiB)"
        shorter = f"a step <= {longest} s"
        if throughput is None and longest is None:  # the step and the write each fill the window alone
            needs = f"a step under {STEP_AND_WRITE_WINDOW_SECONDS} s and a faster file system"
        elif throughput is None:
            needs = shorter
        elif self.step_seconds is None:
            needs = f"{faster}, more for the step"
        elif longest is None:
            needs = faster
        else:
            needs = f"{faster} or {shorter}"
        return f"a drain takes {self.seconds} s ({terms}), over {window}; it needs {needs}"

    def beyond_bound(self) -> str | None:
        """Why the grace period is longer than ``MAX_GRACE_SECONDS``, in words; None when it is not. Summed in floats,
        which a near-zero throughput takes to infinity, before ``seconds`` rounds them up to an int."""
        if (self.step_seconds or 0.0) + self.write_seconds + KUBERNETES_DEFAULT_GRACE_SECONDS <= MAX_GRACE_SECONDS:
            return None
        return (
            f"a drain would take over {MAX_GRACE_SECONDS} s (a day), the longest grace period a pod may have: a "
            f"{self.checkpoint_bytes / 1000**3:.3g} GB checkpoint at {self.throughput_mb_s:.3g} MB/s, a "
            f"{self.step_seconds or 0:.3g} s step"
        )

    def pod_spec(self) -> dict[str, int]:
        """What the launcher sets in each task's pod spec."""
        return {"terminationGracePeriodSeconds": self.seconds}

    def environment(self) -> dict[str, str]:
        """torchrun's shutdown timeout (``training/drain.py``), raised to the whole grace period: the kubelet's
        SIGKILL bounds it anyway, and torchrun's default 30 s would cut a longer drain short."""
        return {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(self.seconds)}

    def describe(self) -> str:
        gigabytes = self.checkpoint_bytes / 1000**3
        step = (
            "the step in progress not counted (no measured step time: give --step-seconds)"
            if self.step_seconds is None
            else f"a step {self.step_seconds:.1f} s"
        )
        return (
            f"{self.seconds} s: {step} + a {gigabytes:.2f} GB checkpoint at "
            f"{self.throughput_mb_s:.0f} MB/s + {KUBERNETES_DEFAULT_GRACE_SECONDS} s to exit"
        )


def job_grace_period(
    model: str,
    instance_type: str,
    batch_size: int,
    grad_accum_steps: int,
    throughput_mb_s: float,
    step_seconds: float | None = None,
) -> GracePeriod:
    """The grace period of a ``training.pretrain_bert`` job: ``step_seconds`` if given, else the sourced rate's (none
    where no source gives one)."""
    if step_seconds is None:
        step_seconds = step_seconds_of(model, instance_type, batch_size, grad_accum_steps)
    return GracePeriod(checkpoint_bytes(model), throughput_mb_s, step_seconds)


def pod_grace_seconds(job: Mapping[str, Any]) -> int:
    """The grace period a Volcano Job's pods get: their spec's, or Kubernetes' default (``jobs.rehearsal`` gives its
    agents this long after SIGTERM, as the kubelet would)."""
    (seconds,) = {
        task["template"]["spec"].get("terminationGracePeriodSeconds", KUBERNETES_DEFAULT_GRACE_SECONDS)
        for task in job["spec"]["tasks"]
    }
    return int(seconds)
