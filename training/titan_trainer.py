"""The platform's TorchTitan trainer: a recipe's own trainer, with what the platform needs of every training process.

TorchTitan 0.3 builds the trainer its configuration names: ``config.build()`` constructs the ``Config``'s owner class
(torchtitan/train.py:50; torchtitan/config/configurable.py:127-152, the owner wired at 161-180). ``draining(config)``
returns the recipe's configuration, unchanged, as the ``Config`` of a subclass of the recipe's own trainer class
(``Trainer``, or a fork's subclass of it) that adds:

- Drains that lose no step (``training/drain.py``): on SIGTERM the worker finishes its step; every step ends with an
  all-reduce of "was any worker signalled?", so all workers stop after the same step; that step is then checkpointed
  in full (model, optimizer, schedule, data loader and step: resumable, even where ``--checkpoint.last_save_model_only``
  keeps the end of a run to the weights) unless its periodic checkpoint already holds it, and the process exits 0.
  TorchTitan 0.3.0 has no SIGTERM handling of its own (no ``signal`` use outside ``experiments/``); the restarted job
  resumes from the newest ``step-N`` under the checkpoint folder by itself (components/checkpointer/dcp.py:640).
- A run's identity beside its checkpoints (``training.run_record``): before a checkpoint is loaded, a resume from a
  dump folder written by another model, world size or process-group backend is refused in one line.
- A record per logged step in ``<--dump_folder>/metrics.jsonl`` (step, loss, the step it resumed from, time), as
  ``training.pretrain_bert`` writes them, for `jobs.rehearsal` and the tests.
- On a gloo process group (the CPU rehearsal), FSDP2's reductions as plain SUMs: gloo has no ``ReduceOp.PREMUL_SUM``
  (torch 2.14.1 refuses it: "Cannot use ReduceOp.PREMUL_SUM with Gloo"), which FSDP2's reduce-scatter uses once a
  gradient divide factor is set (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:847-851, torch 2.14.1);
  TorchTitan sets it to 1.0 on every FSDP module (torchtitan/distributed/fsdp.py:27-41, called at 316). SUM, then a
  division by 1.0: the same gradients.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule
from torchtitan.components.metrics import BaseLogger
from torchtitan.tools.logging import logger
from torchtitan.trainer import Trainer

from training import run_record
from training.drain import Drain

LOSS = "loss_metrics/global_avg_loss"  # torchtitan/components/metrics.py:498


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


class DrainingMixin:
    """What ``draining`` adds to a recipe's trainer class (the module's docstring)."""

    def __init__(self, config):
        self.exits = ExitStack()
        self.drain = self.exits.enter_context(Drain())  # before the slow start: SIGTERM now stops after a whole step
        try:
            super().__init__(config)
        except BaseException:
            self.exits.close()
            raise
        self.resumed_from: int | None = None  # the step the checkpoint loaded at the start of train() held
        if dist.get_backend() == "gloo":
            for part in self.model_parts:
                for module in part.modules():
                    if isinstance(module, FSDPModule):
                        module.set_force_sum_reduction_for_comms(True)
        self.claim_dump_folder()
        if dist.get_rank() == 0:
            path = Path(config.dump_folder) / "metrics.jsonl"
            self.metrics_processor.logger = StepRecords(self.metrics_processor.logger, path, lambda: self.resumed_from or 0)

    def claim_dump_folder(self) -> None:
        """Rank 0 records (or checks) the run's identity beside its checkpoints; every rank stops if it refused."""
        spec = self.config.model_spec
        identity = run_record.RunIdentity(
            model=f"{spec.name} {spec.flavor}", world_size=dist.get_world_size(), backend=dist.get_backend()
        )
        refusal = None
        if dist.get_rank() == 0:
            folder = Path(self.config.dump_folder)
            folder.mkdir(parents=True, exist_ok=True)
            try:
                run_record.claim(folder, identity)
            except run_record.ResumeRefused as refused:
                refusal = refused
        if self.anyone(refusal is not None):
            raise refusal or run_record.ResumeRefused(f"rank 0 refused to resume in {self.config.dump_folder}: see its log")

    def anyone(self, here: bool) -> bool:
        """Whether ``here`` holds on any worker: a collective every worker calls, so all answer alike."""
        flag = torch.tensor([int(here)], device=self.device)
        dist.all_reduce(flag)  # SUM: every process-group backend has it
        return bool(flag.item())

    def should_continue_training(self) -> bool:
        if self.resumed_from is None:  # the first call: train() has loaded the newest checkpoint, if any
            self.resumed_from = self.step
        if not super().should_continue_training():
            return False  # the last step: the loop has saved it as configured
        if not self.drain.agreed(self.anyone):
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

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.exits.close()


@functools.cache
def draining_class(trainer: type[Trainer]) -> type[Trainer]:
    """``trainer`` with ``DrainingMixin``, and a ``Config`` that builds it (Configurable's rule: a nested
    ``@dataclass(kw_only=True, slots=True)`` class, configurable.py:161-180)."""

    class Draining(DrainingMixin, trainer):
        @dataclasses.dataclass(kw_only=True, slots=True)
        class Config(trainer.Config):
            pass

    Draining.__name__ = Draining.__qualname__ = f"Draining{trainer.__name__}"
    return Draining


def draining(config: Trainer.Config) -> Trainer.Config:
    """``config``, every value kept, as the configuration of its trainer with ``DrainingMixin``."""
    drained = draining_class(type(config)._owner).Config
    return drained(**{field.name: getattr(config, field.name) for field in dataclasses.fields(config) if field.init})
