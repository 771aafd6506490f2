"""The Neuron compile cache a job uses: one directory per model and compiler configuration, named by what shapes
the compiled graphs, so that the precompile job and the training jobs of one configuration share it whatever
their names, and a change that needs new graphs gets a cache of its own.

The Neuron compiler caches each graph under a hash of the graph and the compiler's flags (Neuron docs,
"Neuron Persistent Cache"), so a shared directory is only reused when the graphs match; naming it by their inputs
keeps unrelated configurations apart and makes precompile and training meet. What shapes the graphs here: the
model's configuration, the micro-batch and gradient accumulation, the sequence length (the dataset's), bf16, the
world size (the collectives' replica groups), the instance type (the compiler's target), the training stack (its
PyTorch backend: PyTorch/XLA's compiler cache and TorchNeuron's NEFF cache are laid out differently) and the training
image, which carries the Neuron SDK and compiler.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from training import options


@dataclass(frozen=True)
class CompileCache:
    name: str  # the directory under the platform's neuronCompileCachePath
    inputs: dict  # what the name is derived from

    def describe(self) -> str:
        return ", ".join(f"{key} {value}" for key, value in self.inputs.items() if key != "modelConfig")


def compile_cache(
    training_options: Mapping[str, Any],
    *,
    bf16: bool,
    world_size: int,
    instance_type: str,
    training_stack: str,
    image_tag: str,
) -> CompileCache:
    """The cache of a run of ``training.pretrain_bert`` with ``training_options`` (by name; the script's defaults for
    the options not given)."""
    chosen = {**options.DEFAULTS, **training_options}
    inputs = {
        "model": chosen["model"],
        "modelConfig": options.CONFIGS[chosen["model"]],
        "batchSize": chosen["batch_size"],
        "gradAccumSteps": chosen["grad_accum_steps"],
        # the tokenized dataset fixes the sequence length (..._seqlen128)
        "dataset": PurePosixPath(str(chosen["data_dir"])).name,
        "bf16": bf16,
        "worldSize": world_size,
        "instanceType": instance_type,
        "trainingStack": training_stack,
        "image": image_tag,
    }
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]
    return CompileCache(f"bert-{chosen['model']}-{digest}", inputs)
