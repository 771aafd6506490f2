"""The platform's TorchTitan configurations: ``--module training.titan_configs --config NAME``.

TorchTitan 0.3 takes its model and configuration as ``--module``/``--config``: the module's (or its
``config_registry``'s) function ``NAME`` returns the ``Trainer.Config`` that ``--section.key`` options then override
and that ``config.build()`` turns into the trainer (torchtitan/config/manager.py:34-45 and 47-153;
torchtitan/train.py:28, 50). Each configuration here is a recipe's own, named after it, returned by
``training.titan_trainer.draining`` so that it builds the platform's draining trainer; nothing else of the recipe
changes, except in the CPU rehearsal's (below).

- ``qwen3_8b_tp4_fsdp16_sac``: TorchTitan Neuron's Qwen3-8B recipe, ``torchtitan_neuron.models.qwen3``'s function of
  that name (Neuron docs, "Tutorial: Run a basic TorchTitan training on Neuron": "Module:
  torchtitan_neuron.models.qwen3", "Config: qwen3_8b_tp4_fsdp16_sac"); the native training image holds the fork.
- ``llama3_debugmodel_sdpa``: the CPU rehearsal's, TorchTitan's ``llama3_debugmodel`` (torchtitan/models/llama3/
  config_registry.py:35-73) with one change: its attention computes with ``ScaledDotProductAttention``
  (models/common/attention.py:385-446), causal over each packed sequence, where the recipe's ``FlexAttention`` is
  block-causal, per document. No language model of 0.3.0 trains on a CPU otherwise: their attention is flex, which
  torch 2.14.1 does not differentiate on a CPU (torch/nn/attention/flex_attention.py:2208-2213), or varlen, a CUDA
  flash kernel, and ``get_attention_config`` refuses "sdpa" by name (models/common/config_utils.py:97-101) because
  the data loaders give per-document positions that ``is_causal`` cannot express (70-82). The difference: a token
  also attends to the earlier documents packed into its sequence (RoPE still restarts at each document); the
  parameters, the optimizer, FSDP2, the checkpoints and the trainer are the recipe's. TorchTitan's own graph tests
  make the same swap (experiments/graph_trainer/common_utils.py:43-71).

Where the fork is not installed (the launcher's machine, the tests), ``stand_in_for_missing_recipes`` lets the
configurations be parsed with upstream's module in its place (``STAND_INS``), to check a command line's options.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from torchtitan.models.common.attention import ScaledDotProductAttention
from torchtitan.trainer import Trainer

from training.titan_trainer import draining


@dataclass(frozen=True)
class RecipeSource:
    module: str  # a TorchTitan ``--module``: its config_registry holds the function
    config: str

    def load(self) -> Trainer.Config:
        for candidate in (f"{self.module}.config_registry", self.module):  # as ConfigManager looks (manager.py:125)
            try:
                return getattr(importlib.import_module(candidate), self.config)()
            except ModuleNotFoundError as missing:
                if not f"{candidate}.".startswith(f"{missing.name}."):
                    raise  # the module is there; something it imports is not
        raise ModuleNotFoundError(f"{self.module} is not installed", name=self.module)


NEURON_QWEN3_8B = RecipeSource("torchtitan_neuron.models.qwen3", "qwen3_8b_tp4_fsdp16_sac")
UPSTREAM_LLAMA3_DEBUG = RecipeSource("torchtitan.models.llama3", "llama3_debugmodel")
# Upstream's recipes of the same form (a Trainer.Config, the c4 loader, selective activation checkpointing):
# they accept the options the fork's would, for checking a command line where the fork cannot be installed.
STAND_INS = {NEURON_QWEN3_8B.module: RecipeSource("torchtitan.models.qwen3", "qwen3_0_6b")}
_standing_in: ContextVar[bool] = ContextVar("standing_in", default=False)


@contextmanager
def stand_in_for_missing_recipes() -> Iterator[None]:
    """Within: a recipe whose module is not installed is loaded from its stand-in (``STAND_INS``)."""
    token = _standing_in.set(True)
    try:
        yield
    finally:
        _standing_in.reset(token)


def recipe(source: RecipeSource) -> Trainer.Config:
    try:
        return source.load()
    except ModuleNotFoundError:
        if not (_standing_in.get() and source.module in STAND_INS):
            raise
        return STAND_INS[source.module].load()


def qwen3_8b_tp4_fsdp16_sac() -> Trainer.Config:
    """TorchTitan Neuron's Qwen3-8B recipe (tensor parallel 4, FSDP over the rest, selective activation
    checkpointing), with the draining trainer."""
    return draining(recipe(NEURON_QWEN3_8B))


def llama3_debugmodel_sdpa() -> Trainer.Config:
    """TorchTitan's llama3 debug model, with the draining trainer and causal SDPA attention (the module's
    docstring: what differs, and why)."""
    config = draining(recipe(UPSTREAM_LLAMA3_DEBUG))
    for layer in config.model_spec.model.layers:  # as experiments/graph_trainer/common_utils.py:69-70 swaps it
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    return config
