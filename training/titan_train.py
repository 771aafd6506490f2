"""LLM pre-training with TorchTitan, as the platform runs it: ``torchrun ... -m training.titan_train <TorchTitan options>``.

TorchTitan's own trainer and command line (``torchtitan.train.main``), with ``DrainingTrainer``, which adds what the
platform needs of every training process:

- Drains that lose no step (``training/drain.py``): on SIGTERM the worker finishes its step; every step ends with an
  all-reduce of "was any worker signalled?", so all workers stop after the same step; that step is then checkpointed
  in full (model, optimizer, schedule, data loader and step: resumable, even where ``--checkpoint.last_save_model_only``
  keeps the end of a run to the weights) unless its periodic checkpoint already holds it, and the process exits 0.
  TorchTitan has no SIGTERM handling of its own (0.2.2: no ``signal`` use outside ``experiments/``); a restarted job
  resumes from the newest ``step-N`` under ``--checkpoint.folder`` by itself.
- A record per logged step in ``<--job.dump_folder>/metrics.jsonl`` (step, loss, the step it resumed from, time),
  as ``training.pretrain_bert`` writes them, for `jobs.rehearsal` and the tests.

Where it computes. On the native training image TorchNeuron registers the ``neuron`` device (PyTorch's PrivateUse1
backend), which TorchTitan's own detection returns (``torch._utils._get_available_device_type``, called by
torchtitan/tools/utils.py:37), with the ``neuron`` process group: nothing here changes. Without an accelerator
TorchTitan cannot start: it falls back to "cuda" (tools/utils.py:37, ``... or "cuda"``) and calls
``torch.cuda.set_device`` (train.py:90), and it has no option for the device. The CPU shim, applied only where no
accelerator is present, does the least that makes TorchTitan 0.2.2 train on CPUs with gloo:

1. TorchTitan's device is ``cpu``: its device detection answers "cpu" while ``torchtitan.tools.utils`` is imported
   (tools/utils.py:37-43 fix the device once, at import; torch's own detection is restored right after). Its process
   group backend follows from the device: gloo (torch's default map for cpu, used by distributed/utils.py).
2. Its device module is ``torch.cpu`` with the CUDA calls TorchTitan makes of it answered for a CPU
   (``CpuDeviceModule``): the memory monitor's (components/metrics.py:45-53, 65) and an integer ``current_device``,
   which distributed/utils.py:386 passes to ``barrier(device_ids=...)`` (``torch.cpu.current_device`` returns "cpu").
3. gloo has no ``ReduceOp.PREMUL_SUM``, which FSDP2's reduce-scatter uses once a gradient divide factor is set
   (torch 2.13 torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:846-851); TorchTitan sets it to 1.0 on every FSDP module
   (models/llama3/infra/parallelize.py:284). On a gloo group the trainer asks FSDP2 for plain SUM reductions
   (``set_force_sum_reduction_for_comms``): SUM, then a division by 1.0, the same gradients.

TorchTitan 0.3.0 cannot train on CPUs at all (its language models' attention is flex, which torch refuses to
differentiate on a CPU, torch/nn/attention/flex_attention.py:2075-2083, or varlen, a CUDA flash kernel; sdpa was
removed, torchtitan/models/common/config_utils.py:97-101), so the CPU rehearsal runs 0.2.2, the version TorchTitan
Neuron 0.2.2+neuron.1 extends (Neuron release notes, components/torchtitan-neuron, 2.33.0).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule

from training.drain import Drain

if TYPE_CHECKING:
    from torchtitan.config import JobConfig


class CpuDeviceModule:
    """``torch.cpu``, with the CUDA-style calls TorchTitan makes of its device module answered for a CPU."""

    def __getattr__(self, name: str):
        return getattr(torch.cpu, name)

    @staticmethod
    def current_device() -> int:
        return 0  # an index, as barrier(device_ids=[...]) takes it; gloo ignores it

    @staticmethod
    def get_device_name(device=None) -> str:
        return platform.processor() or "cpu"

    @staticmethod
    def get_device_properties(device=None) -> SimpleNamespace:
        return SimpleNamespace(total_memory=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))

    @staticmethod
    def memory_stats(device=None) -> dict:
        return {}  # no allocator statistics for host memory: TorchTitan logs them as unknown (-1)

    @staticmethod
    def reset_peak_memory_stats(device=None) -> None:
        pass

    @staticmethod
    def empty_cache() -> None:
        pass


def use_cpu_without_accelerator() -> bool:
    """Make TorchTitan compute on the CPU when the process has no accelerator (items 1 and 2 of the module's
    docstring); whether it did. Must run before anything imports TorchTitan."""
    if "torchtitan" in sys.modules:
        raise RuntimeError("TorchTitan was imported before its device was chosen")
    detect = torch._utils._get_available_device_type
    if detect() is not None:
        return False  # TorchNeuron's neuron device (or another accelerator), which TorchTitan finds itself
    torch._utils._get_available_device_type = lambda: "cpu"
    try:
        from torchtitan.tools import utils as titan_utils
    finally:
        torch._utils._get_available_device_type = detect
    titan_utils.device_module = CpuDeviceModule()
    return True


ON_CPU = use_cpu_without_accelerator()

# TorchTitan fixes its device when first imported: these come after the choice above.
from torchtitan.components.metrics import BaseLogger  # noqa: E402
from torchtitan.tools.logging import logger  # noqa: E402
from torchtitan.train import Trainer  # noqa: E402
from torchtitan.train import main as titan_main  # noqa: E402

LOSS = "loss_metrics/global_avg_loss"


class StepRecords(BaseLogger):
    """TorchTitan's metric loggers, plus one JSON line per logged training step (rank 0 only)."""

    def __init__(self, inner: BaseLogger, path: Path, resumed_from: Callable[[], int]):
        self.inner, self.path, self.resumed_from = inner, path, resumed_from
        path.parent.mkdir(parents=True, exist_ok=True)

    def log(self, metrics: dict, step: int) -> None:
        self.inner.log(metrics, step)
        if LOSS in metrics:  # a training step's metrics (validation logs others)
            record = {"step": step, "loss": float(metrics[LOSS]), "resumed_from": self.resumed_from(), "time": time.time()}
            with self.path.open("a") as records:
                records.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self.inner.close()


@contextmanager
def full_last_save(checkpointer):
    """The "last step" save as a full, resumable checkpoint, whatever ``--checkpoint.last_save_model_only`` says of the
    end of a run (a weights-only or Hugging Face export cannot be resumed from)."""
    kept = checkpointer.last_save_model_only, checkpointer.last_save_in_hf
    checkpointer.last_save_model_only, checkpointer.last_save_in_hf = False, False
    try:
        yield checkpointer
    finally:
        checkpointer.last_save_model_only, checkpointer.last_save_in_hf = kept


class DrainingTrainer(Trainer):
    """TorchTitan's trainer, stopping after a whole, checkpointed step on SIGTERM (``training/drain.py``)."""

    def __init__(self, job_config: JobConfig, *, drain: Drain):
        super().__init__(job_config)
        self.drain = drain
        self.resumed_from: int | None = None  # the step the checkpoint loaded at the start of train() held
        if dist.get_backend() == "gloo":  # item 3 of the module's docstring
            for part in self.model_parts:
                for module in part.modules():
                    if isinstance(module, FSDPModule):
                        module.set_force_sum_reduction_for_comms(True)
        if dist.get_rank() == 0:
            path = Path(job_config.job.dump_folder) / "metrics.jsonl"
            self.metrics_processor.logger = StepRecords(self.metrics_processor.logger, path, lambda: self.resumed_from or 0)

    def anyone_signalled(self, signalled_here: bool) -> bool:
        """Whether any worker got SIGTERM: a collective every worker calls once per step, so all answer alike."""
        signalled = torch.tensor([int(signalled_here)], device=self.device)
        dist.all_reduce(signalled)  # SUM: every process-group backend has it
        return bool(signalled.item())

    def should_continue_training(self) -> bool:
        if self.resumed_from is None:  # the first call: train() has loaded the newest checkpoint, if any
            self.resumed_from = self.step
        if not super().should_continue_training():
            return False  # the last step: the loop has saved it as configured
        if not self.drain.agreed(self.anyone_signalled):
            return True
        if self.step > self.resumed_from and self.step % self.checkpointer.interval != 0:
            with full_last_save(self.checkpointer) as checkpointer:
                checkpointer.save(self.step, last_step=True)
        if not self.checkpointer.enable:
            held = "checkpointing is off (--checkpoint.enable), so nothing holds it"
        else:
            held = f"step-{self.step} holds it" if self.step else "nothing trained yet"
        logger.info(f"DRAIN rank {dist.get_rank()} stopped after step {self.step} on SIGTERM; {held}")
        return False


def main() -> None:
    if ON_CPU:
        logger.info("no accelerator: TorchTitan computes on the CPU with gloo (the CPU shim of training/titan_train.py)")
    with Drain() as drain:  # before the slow start: a SIGTERM from now on stops the run after a whole step
        titan_main(functools.partial(DrainingTrainer, drain=drain))


if __name__ == "__main__":
    main()
