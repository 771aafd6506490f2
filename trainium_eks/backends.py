"""What a training backend is: one record per PyTorch backend the platform trains on, read by the launcher (a job's
environment, command and checks), the training stacks (``versions.TrainingStack.backend``) and the training scripts
(their ``--device`` choices; ``training/backend.py`` adds the torch calls). Which generations train on a backend is
the training stacks' to say (``versions.backend_generations``): a generation's row names its stacks.

Standard library only: the training images copy this file (training/Dockerfile, training/Dockerfile.native).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

# The acceptance checks that run a torch program (``jobs.acceptance``; its others run the image's tools, whatever its
# backend). Which backends a training program runs on is its workload's declaration (``jobs.workloads.registry``).
EFA_ALLREDUCE, TRAIN_STEP, COLLECTIVE_BANDWIDTH = "efa-allreduce", "train-step", "collective-bandwidth"


@dataclass(frozen=True)
class Backend:
    """One PyTorch backend: what the training script computes on (``--device name``), and what a job's environment
    and command depend on."""

    name: str  # the training scripts' --device value
    device_type: str  # torch.device type of its tensors (and of torch.autocast)
    process_group: str  # torch.distributed backend
    ddp: bool  # DistributedDataParallel all-reduces the gradients (on XLA, xm.optimizer_step does)
    autocast: bool  # bf16 through torch.autocast on the device (on XLA: bf16_environment, from the launcher)
    compiler: str | None  # torch.compile backend; None: the model runs as it is
    cache_variable: str | None  # the variable that points its compiled-graph cache at the shared volume; None: none
    cache_value: str  # the variable's value, ``{}`` standing for the cache directory
    environment: Mapping[str, str]  # a job's own variables on it
    bf16_environment: Mapping[str, str]  # and those that make it compute in bf16
    precompiler: str | None  # the tool that compiles a job's graphs ahead of it; None: the job compiles at its first steps
    # torch.distributed collectives run when called, so all_reduce can be timed call by call (collective-bandwidth)
    eager_collectives: bool
    provided_by: str  # what provides it in an image, for the line that refuses it where it is missing

    def __hash__(self) -> int:  # its mappings have no hash; its name identifies it
        return hash(self.name)

    @property
    def checks(self) -> tuple[str, ...]:
        """The acceptance checks it runs: the all-reduce and training step checks (any backend), and the timing of
        collectives where they run when called."""
        return (EFA_ALLREDUCE, TRAIN_STEP, *((COLLECTIVE_BANDWIDTH,) if self.eager_collectives else ()))


# In the order the training scripts' --device auto tries them.
BACKENDS: Mapping[str, Backend] = MappingProxyType(
    {
        backend.name: backend
        for backend in (
            # PyTorch/XLA on the trn1 image: the "xla" process group, gradients all-reduced by xm.optimizer_step, bf16
            # through XLA_DOWNCAST_BF16. The compiler's persistent cache is its --cache_dir flag (Neuron docs, "Neuron
            # Persistent Cache"), and neuron_parallel_compile traces a few steps to compile every graph ahead of the
            # job. Its collectives run when the step's graph is cut, not when all_reduce returns. torch-neuronx, "the
            # XLA-based PyTorch integration supporting NeuronCores v2 architecture (Trn1, Trn2, Inf2, Trn1n)", trains
            # Trn1 and Trn2 (Neuron docs, frameworks/torch/index.html, v2.32.0; v2.26.1: "PyTorch NeuronX for training
            # on Trn1 and Trn2").
            Backend(
                name="xla",
                device_type="xla",
                process_group="xla",
                ddp=False,
                autocast=False,
                compiler=None,
                cache_variable="NEURON_CC_FLAGS",
                cache_value="--cache_dir={}",
                environment=MappingProxyType({"XLA_TRANSFER_SEED_ASYNC": "1"}),
                bf16_environment=MappingProxyType({"XLA_DOWNCAST_BF16": "1"}),
                precompiler="neuron_parallel_compile",
                eager_collectives=False,
                provided_by="torch-xla (the PyTorch/XLA training image, training/Dockerfile)",
            ),
            # TorchNeuron on the native image: the neuron device (PyTorch's PrivateUse1) and process group, DDP,
            # torch.compile(backend="neuron"), bf16 through torch.autocast. Eager mode and torch.compile store each
            # compiled graph (NEFF) in the persistent NEFF cache, TORCH_NEURONX_NEFF_CACHE_DIR (Neuron docs, "What are
            # Neuron Compiler artifacts?", 2026-11-16); nothing compiles ahead of a job, whose first steps compile and
            # fill it. bf16 is the training script's --bf16. "TorchNeuron supports the Trn2 and Trn3 instance families"
            # (Neuron docs, "Quickstart: Install and verify torch-neuronx"); TorchTitan Neuron runs on it.
            Backend(
                name="neuron",
                device_type="neuron",
                process_group="neuron",
                ddp=True,
                autocast=True,
                compiler="neuron",
                cache_variable="TORCH_NEURONX_NEFF_CACHE_DIR",
                cache_value="{}",
                environment=MappingProxyType({}),
                bf16_environment=MappingProxyType({}),
                precompiler=None,
                eager_collectives=True,
                provided_by="TorchNeuron, torch-neuronx 2.13 or later (the native training image, training/Dockerfile.native)",
            ),
            # CPUs with gloo, anywhere: the tests and `jobs.rehearsal`, which run every workload on it.
            Backend(
                name="cpu",
                device_type="cpu",
                process_group="gloo",
                ddp=True,
                autocast=True,
                compiler=None,
                cache_variable=None,
                cache_value="{}",
                environment=MappingProxyType({}),
                bf16_environment=MappingProxyType({}),
                precompiler=None,
                eager_collectives=True,
                provided_by="PyTorch",
            ),
        )
    }
)


def running(check: str) -> tuple[str, ...]:
    """The names of the backends that run the acceptance check ``check``: its script's --device choices."""
    return tuple(name for name, backend in BACKENDS.items() if check in backend.checks)
