"""Where the training script computes: what differs between PyTorch/XLA, TorchNeuron and CPUs, chosen once.

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
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.optim import Optimizer

try:  # present in the trn1 training image, absent elsewhere
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.xla_backend  # noqa: F401  registers the "xla" process-group backend
except ImportError:
    torch_xla = xm = None


def _xla_present() -> bool:
    return xm is not None


def _neuron_present() -> bool:
    """TorchNeuron is the process's accelerator (it registers itself when torch is imported)."""
    accelerator = torch.accelerator.current_accelerator()
    return accelerator is not None and accelerator.type == "neuron"


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
class Backend:
    """One way to compute (``--device``): the device, the process group, and what the training loop does
    differently on it."""

    name: str  # the --device value
    process_group: str  # torch.distributed backend
    ddp: bool  # DistributedDataParallel all-reduces the gradients (on XLA, optimizer_step does)
    autocast: bool  # bf16 through torch.autocast on the device (on XLA: XLA_DOWNCAST_BF16 from the launcher)
    compiler: str | None  # torch.compile backend; None: the model runs as it is
    provided_by: str  # what provides it, for the line that refuses it where it is missing
    present: Callable[[], bool]
    make_device: Callable[[], torch.device]
    optimizer_step: Callable[[Optimizer], None] = _optimizer_step
    barrier: Callable[[], None] = dist.barrier

    def device(self) -> torch.device:
        return self.make_device()

    def compile(self, module: torch.nn.Module) -> torch.nn.Module:
        return torch.compile(module, backend=self.compiler) if self.compiler else module

    def autocast_context(self, bf16: bool):
        return torch.autocast(self.name, dtype=torch.bfloat16) if bf16 and self.autocast else nullcontext()

    def agree(self, flag: bool, distributed: bool) -> bool:
        """Whether any worker raised ``flag``: every worker gets the same answer at the same step."""
        if not distributed:
            return flag
        raised = torch.tensor([int(flag)], device=self.device())
        dist.all_reduce(raised)  # SUM: every backend's process group has it
        return bool(raised.item())


# In the order --device auto tries them.
BACKENDS: dict[str, Backend] = {
    "xla": Backend(
        name="xla",
        process_group="xla",
        ddp=False,
        autocast=False,
        compiler=None,
        provided_by="torch-xla (the PyTorch/XLA training image, training/Dockerfile)",
        present=_xla_present,
        make_device=_xla_device,
        optimizer_step=_xla_optimizer_step,
        barrier=_xla_barrier,
    ),
    "neuron": Backend(
        name="neuron",
        process_group="neuron",
        ddp=True,
        autocast=True,
        compiler="neuron",
        provided_by="TorchNeuron, torch-neuronx 2.13 or later (the native training image, training/Dockerfile.native)",
        present=_neuron_present,
        make_device=lambda: torch.device("neuron"),
    ),
    "cpu": Backend(
        name="cpu",
        process_group="gloo",
        ddp=True,
        autocast=True,
        compiler=None,
        provided_by="PyTorch",
        present=lambda: True,
        make_device=lambda: torch.device("cpu"),
    ),
}


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
