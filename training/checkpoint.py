"""Checkpoints on the shared volume: ``checkpoint-<step>/`` holds the model as a ``save_pretrained`` directory
(``config.json`` and ``model.safetensors``) and ``training_state.pt`` (optimizer, learning-rate schedule, step).

A checkpoint is written under a temporary name and renamed into place, so a worker killed mid-write leaves no
half checkpoint for the restarted job to resume from.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from transformers import BertForPreTraining

TRAINING_STATE = "training_state.pt"
PREFIX = "checkpoint-"


def _to_cpu(value):
    """A copy of a (nested) state dict on the CPU: XLA tensors are copied off the device before saving."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    return value


def save(directory: Path, step: int, model: BertForPreTraining, optimizer, schedule) -> Path:
    final = directory / f"{PREFIX}{step}"
    partial = directory / f".{PREFIX}{step}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial, state_dict=_to_cpu(model.state_dict()))
    state = {"optimizer": _to_cpu(optimizer.state_dict()), "schedule": schedule.state_dict(), "step": step}
    torch.save(state, partial / TRAINING_STATE)
    shutil.rmtree(final, ignore_errors=True)  # the same step written again after a restart
    partial.rename(final)
    return final


def latest(directory: Path) -> Path | None:
    """The newest complete checkpoint under ``directory``."""
    complete = [p for p in directory.glob(f"{PREFIX}*") if (p / TRAINING_STATE).is_file()]
    return max(complete, key=lambda p: int(p.name.removeprefix(PREFIX)), default=None)


def load(checkpoint: Path) -> tuple[BertForPreTraining, dict]:
    """The model (as ``from_pretrained`` loads it) and the training state to resume from."""
    model = BertForPreTraining.from_pretrained(checkpoint)
    return model, torch.load(checkpoint / TRAINING_STATE, map_location="cpu", weights_only=True)
