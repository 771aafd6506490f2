"""LLM pre-training with TorchTitan, as the platform runs it: ``torchrun ... -m training.titan_train --module
training.titan_configs --config NAME <TorchTitan options>``.

TorchTitan 0.3's own entry point, ``torchtitan.train.main`` (it parses ``--module``/``--config`` and the options,
then ``trainer = config.build()``, train.py:17-71), unchanged; the platform's trainer comes in through the
configuration (``training.titan_configs``, ``training.titan_trainer``).

Where it computes. On the native training image TorchNeuron registers the ``neuron`` device (PyTorch's PrivateUse1
backend), which TorchTitan's own detection returns (``torch._utils._get_available_device_type``, called by
torchtitan/tools/utils.py:54-59), with the ``neuron`` process group: nothing here changes. Without an accelerator
TorchTitan cannot start: it falls back to "cuda" (tools/utils.py:55, ``... or "cuda"``) and calls
``device_module.set_device`` (trainer.py:297-301), and it has no option for the device. The CPU shim, applied only
where no accelerator is present, does the least that makes TorchTitan 0.3.0 train on CPUs with gloo:

1. TorchTitan's device is ``cpu``: its device detection answers "cpu" while ``torchtitan.tools.utils`` is imported
   (tools/utils.py:54-59 fix the device once, at import; torch's own detection is restored right after). Its process
   group backend follows from the device: gloo (torch's default map for cpu, distributed/utils.py:513-517).
2. Its device module is ``torch.cpu`` with the CUDA calls TorchTitan makes of it answered for a CPU
   (``CpuDeviceModule``): the memory monitor's (components/metrics.py:39-50, 62, 92: ``get_device_name``,
   ``get_device_properties``, ``memory_stats``, ``reset_peak_memory_stats``, ``empty_cache``, none of which
   torch 2.14.1's ``torch.cpu`` has) and an integer ``current_device``, which distributed/utils.py:586 passes to
   ``barrier(device_ids=...)``: torch 2.14.1's ``torch.cpu.current_device`` returns "cpu" (torch/cpu/__init__.py:
   239-244), and its barrier makes ``torch.device(device.type, device_ids[0])`` of it (torch/distributed/
   distributed_c10d.py:6343-6346). Both modules bind ``device_module`` when imported (metrics.py:21,
   distributed/utils.py:30), after the shim has replaced it.

The launcher passes the group's backend as ``--device`` (the other training scripts' option), which TorchTitan does not
know: ``main`` takes it off the command line and refuses, in one line, a backend that is not the device TorchTitan
found here (``neuron`` on the native image, ``cpu`` on the rehearsal's CPUs).

The third CPU difference, gloo's lack of ``PREMUL_SUM``, is the draining trainer's (``training.titan_trainer``).

Torch itself needs nothing more: the rehearsal runs torch 2.14.1, the patch release of the native image's 2.14.0
(requirements-dev.txt), and TorchTitan 0.3.0 trains on it as it stands (its ``torch.distributed.set_timeout``,
distributed/utils.py:595, is torch/distributed/distributed_c10d.py:2231; FSDP2 takes the default
``--parallelism.spmd_backend spmd_types`` parameters on gloo). The one other difference is the rehearsal model's
attention (``training.titan_configs`` says why).
"""

from __future__ import annotations

import os
import platform
import sys
from types import SimpleNamespace

import torch


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

# TorchTitan fixes its device when first imported: this comes after the choice above.
from torchtitan.tools.logging import logger  # noqa: E402
from torchtitan.train import main as titan_main  # noqa: E402

from training import backend as backends  # noqa: E402
from training.run_record import ResumeRefused  # noqa: E402
from trainium_eks.cli import OneLineParser, UsageError, one_line  # noqa: E402

# The backends TorchTitan runs on here, as its workload declares them (jobs/workloads/torchtitan.py, which the image
# does not ship; tests/test_workload_registry.py checks they agree).
DEVICES = ("neuron", "cpu")


def without_device(argv: list[str]) -> list[str]:
    """``argv`` without its ``--device NAME``, which TorchTitan would not parse; ``UsageError`` or ``MissingBackend``
    for a backend the image cannot run TorchTitan on."""
    parser = OneLineParser(prog="python -m training.titan_train", add_help=False, allow_abbrev=False)
    parser.add_argument("--device", choices=("auto", *DEVICES), default="auto")
    chosen, titan_argv = parser.parse_known_args(argv)
    backend = backends.select(chosen.device)
    found = "cpu" if ON_CPU else torch.accelerator.current_accelerator().type
    if backend.device_type != found:
        raise UsageError(f"--device {chosen.device}: TorchTitan computes on this image's {found} device; pass --device {found}")
    return titan_argv


def main() -> None:
    try:
        sys.argv[1:] = without_device(sys.argv[1:])
    except (UsageError, backends.MissingBackend) as error:
        print(f"error: {one_line(str(error))}", file=sys.stderr)
        sys.exit(2)
    if ON_CPU:
        logger.info("no accelerator: TorchTitan computes on the CPU with gloo (the CPU shim of training/titan_train.py)")
    try:
        titan_main()
    except ResumeRefused as refused:  # one line, not a traceback: the run's dump folder is another run's
        logger.error(str(refused))
        sys.exit(2)


if __name__ == "__main__":
    main()
