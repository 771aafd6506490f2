"""The TorchTitan recipes the platform trains, as data: the cited TorchTitan Neuron configurations (``RECIPES``, by
name; an instance type's catalog row names the one it trains, ``recipes["torchtitan"]``) and the CPU rehearsal's,
with the model size a checkpoint's bytes come from. Light on purpose: the plan (``preflight``) reads a recipe's
checkpoint size from here without TorchTitan, TorchX or the launcher (``jobs.workloads.torchtitan``' default job);
``jobs.workloads.torchtitan_job`` builds jobs from them."""

from __future__ import annotations

from dataclasses import dataclass

from jobs.job_building.grace_period import BYTES_PER_PARAMETER
from training import titan_assets
from trainium_eks import catalog

CONFIGS = "training.titan_configs"  # the platform's TorchTitan configurations, which build the draining trainer


@dataclass(frozen=True)
class TitanRecipe:
    """A TorchTitan model and configuration, and where its tokenizer and dataset sit under the datasets path."""

    name: str
    model_options: tuple[str, ...]  # the TorchTitan options that choose the model, its configuration and sizes
    tensor_parallel: int  # the data-parallel (FSDP) shard degree is what remains of the world: -1 in TorchTitan
    tokenizer_dir: str
    dataset: str  # TorchTitan's name of the dataset's loader
    dataset_dir: str
    source: str
    parameters: int | None = None  # the model's, where a source gives its configuration: its checkpoint's size

    @property
    def checkpoint_bytes(self) -> int | None:
        """A DCP checkpoint's tensor bytes: TorchTitan keeps fp32 parameters (FSDP2 casts them to
        ``--training.mixed_precision_param`` for compute only) and AdamW's two moments (``default_adamw``, the
        optimizer of TorchTitan 0.3.0's recipes, e.g. models/qwen3/config_registry.py), the layout
        ``jobs.job_building.grace_period.BYTES_PER_PARAMETER`` counts."""
        return None if self.parameters is None else self.parameters * BYTES_PER_PARAMETER

    def parallelism(self, world_size: int) -> str:
        return f"tensor parallel {self.tensor_parallel} x FSDP {world_size // self.tensor_parallel} ({self.source})"


def qwen3_parameter_count(config: dict[str, int]) -> int:
    """The parameters of a Qwen3 decoder of Hugging Face ``config`` (untied embeddings): the embedding and output
    matrices, and per layer the attention projections with their query and key norms, the gated MLP and two norms."""
    hidden, heads, kv_heads, head = (config[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim"))
    attention = 2 * hidden * heads * head + 2 * hidden * kv_heads * head + 2 * head
    layer = attention + 3 * hidden * config["intermediate_size"] + 2 * hidden
    return 2 * config["vocab_size"] * hidden + config["num_hidden_layers"] * layer + hidden


# Qwen/Qwen3-8B's config.json on Hugging Face ("tie_word_embeddings": false): some 8.19 billion parameters, the model
# card's "8.2B".
QWEN3_8B_CONFIG = {
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
}

# Neuron docs, "Tutorial: Run a basic TorchTitan training on Neuron" (training/torchtitan/tutorials/
# tutorial-basic-training, 2026-10-15): Qwen3-8B, "Module: torchtitan_neuron.models.qwen3", "Config:
# qwen3_8b_tp4_fsdp16_sac", "tensor-parallel degree 4, data-parallel shard degree -1", eager mode; "TP4 x FSDP16"
# (tutorial-simple-fsdp-training): 64 ranks, one per NeuronCore of a trn2.48xlarge at LNC 2. The tutorial's sequence
# length, batch, steps and torchrun line could not be read (the search returns the page's head only, and the
# aws-neuron/torchtitan-neuron repository cannot be fetched here): the configuration keeps its own, and the options
# are spelled after the tutorial's Module and Config fields: training.titan_configs' configuration of that name is
# the fork's, building the draining trainer. The Qwen3-8B tokenizer and the c4 text are staged under the datasets
# path by the user.
QWEN3_8B_TRN2 = TitanRecipe(
    name="qwen3-8b",
    model_options=("--module", CONFIGS, "--config", "qwen3_8b_tp4_fsdp16_sac"),
    tensor_parallel=4,
    tokenizer_dir="qwen3-8b/tokenizer",
    dataset="c4",
    dataset_dir="c4",
    source="Neuron tutorial qwen3_8b_tp4_fsdp16_sac",
    parameters=qwen3_parameter_count(QWEN3_8B_CONFIG),
)
RECIPES = {recipe.name: recipe for recipe in (QWEN3_8B_TRN2,)}
WORKLOAD_NAME = "torchtitan"  # the workload whose recipes these are: the key of a catalog row's recipes


def recipe_for(instance_type: str) -> TitanRecipe | None:
    """The recipe ``instance_type``'s catalog row names; None where it names none."""
    name = catalog.INSTANCE_TYPES[instance_type].recipes.get(WORKLOAD_NAME)
    return None if name is None else RECIPES[name]


def types_with_recipes() -> tuple[str, ...]:
    """The instance types whose rows name a recipe."""
    return tuple(name for name, spec in catalog.INSTANCE_TYPES.items() if WORKLOAD_NAME in spec.recipes)


# The CPU rehearsal's: TorchTitan 0.3.0's llama3 debug model with causal SDPA attention (training.titan_configs says
# why and what differs) on short sequences, with the generated assets of training/titan_assets.py; every step
# logged.
# fmt: off
DEBUG_MODEL_OPTIONS = (
    "--module", CONFIGS, "--config", "llama3_debugmodel_sdpa",
    "--training.seq_len", "128", "--training.local_batch_size", "2", "--metrics.log_freq", "1",
)
# fmt: on
CPU_REHEARSAL = TitanRecipe(
    name="llama3-debug",
    model_options=DEBUG_MODEL_OPTIONS,
    tensor_parallel=1,
    tokenizer_dir=f"{titan_assets.ASSETS}/{titan_assets.TOKENIZER_DIR}",
    dataset=titan_assets.DATASET,
    dataset_dir=f"{titan_assets.ASSETS}/{titan_assets.TEXT_DIR}",
    source="TorchTitan 0.3.0 llama3_debugmodel, SDPA attention",
)
