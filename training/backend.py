"""Where the training script computes: what differs between PyTorch/XLA, TorchNeuron and CPUs in torch, chosen once
(``--device``). What each backend is (its device type, process group, compiler, bf16) is its record in
``trainium_eks/backends.py``; this module adds the torch calls.

- ``xla``: PyTorch/XLA on the trn1 image (``training/Dockerfile``). The "xla" process group; gradients all-reduced by
  ``xm.optimizer_step``, the step's graph cut and run by ``torch_xla.sync()``; bf16 through ``XLA_DOWNCAST_BF16``,
  which the launcher sets.
- ``neuron``: TorchNeuron on the native image (``training/Dockerfile.native``). It registers the ``neuron`` device
  through PyTorch's PrivateUse1 mechanism and a ``neuron`` process-group backend for DDP; ``torch.compile(backend=
  "neuron")`` compiles the model, keeping each graph in TORCH_NEURONX_NEFF_CACHE_DIR, which the launcher points at
  the shared volume; ``torch.autocast(device_type="neuron")`` for bf16; "code that uses torch.accelerator needs no
  change" and "no import torch_neuronx is needed" (Neuron docs, ``torch/about-pytorch-neuron.html``, SDK 2.33).
- ``cpu``: gloo and DDP, anywhere (tests, `jobs.rehearsal`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, fields

import torch
import torch.distributed as dist
from torch.optim import Optimizer

from trainium_eks import backends as records

try:  # present in the trn1 training image, absent elsewhere
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.xla_backend  # noqa: F401  registers the "xla" process-group backend
except ImportError:
    torch_xla = xm = None


def _xla_present() -> bool:
    return xm is not None


def _xla_device() -> torch.device:
    return torch_xla.device()  # torch-xla 2.8+ (xm.xla_device() is deprecated)


def _xla_optimizer_step(optimizer: Optimizer) -> None:
    xm.optimizer_step(optimizer)  # all-reduces gradients across workers, then steps
    torch_xla.sync()  # cut and run the step's graph (the loader here is not an MpDeviceLoader)


def _optimizer_step(optimizer: Optimizer) -> None:
    optimizer.step()  # DDP all-reduced the gradients in backward


def _xla_barrier() -> None:
    xm.rendezvous("barrier")


@dataclass(frozen=True)
class Backend(records.Backend):
    """One way to compute (``--device``): its record's data, and the torch calls that differ on it. By default it is
    present where torch's accelerator is its device type (TorchNeuron registers itself when torch is imported; "code
    that uses torch.accelerator needs no change"), always on CPUs; its device is torch.device of its type; DDP
    all-reduced the gradients the optimizer steps with; torch.distributed's barrier."""

    detect: Callable[[], bool] | None = None  # whether the image provides it; None: the default above
    make_device: Callable[[], torch.device] | None = None
    optimizer_step: Callable[[Optimizer], None] = _optimizer_step
    barrier: Callable[[], None] = dist.barrier

    def present(self) -> bool:
        if self.detect is not None:
            return self.detect()
        if self.device_type == "cpu":
            return True
        accelerator = torch.accelerator.current_accelerator()
        return accelerator is not None and accelerator.type == self.device_type

    def device(self) -> torch.device:
        return self.make_device() if self.make_device else torch.device(self.device_type)

    def compile(self, module: torch.nn.Module) -> torch.nn.Module:
        return torch.compile(module, backend=self.compiler) if self.compiler else module

    def autocast_context(self, bf16: bool):
        return torch.autocast(self.device_type, dtype=torch.bfloat16) if bf16 and self.autocast else nullcontext()

    def agree(self, flag: bool, distributed: bool) -> bool:
        """Whether any worker raised ``flag``: every worker gets the same answer at the same step."""
        if not distributed:
            return flag
        raised = torch.tensor([int(flag)], device=self.device())
        dist.all_reduce(raised)  # SUM: every backend's process group has it
        return bool(raised.item())


# PyTorch/XLA's own calls, keyed by its record's name: the other backends take the defaults.
XLA_CALLS = {
    "xla": {"detect": _xla_present, "make_device": _xla_device, "optimizer_step": _xla_optimizer_step, "barrier": _xla_barrier}
}
# In the order --device auto tries them (the records').
BACKENDS: dict[str, Backend] = {
    name: Backend(**{field.name: getattr(record, field.name) for field in fields(record)}, **XLA_CALLS.get(name, {}))
    for name, record in records.BACKENDS.items()
}


def device_choices(check: str) -> tuple[str, ...]:
    """An acceptance check's --device choices: auto, and the backends that run ``check`` (``trainium_eks/backends.py``)."""
    return ("auto", *records.running(check))


class MissingBackend(ValueError):
    """A --device the image does not provide (the message is one line naming the option and the fix)."""


def select(choice: str) -> Backend:
    """The backend for ``--device choice``: ``auto`` takes the first the image provides; a named one that the image
    lacks raises ``MissingBackend``."""
    if choice == "auto":
        return next(backend for backend in BACKENDS.values() if backend.present())
    backend = BACKENDS[choice]
    if not backend.present():
        raise MissingBackend(f"--device {choice} needs {backend.provided_by}, which this image lacks; use --device cpu elsewhere")
    return backend
