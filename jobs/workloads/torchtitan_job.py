"""The Volcano Job of an LLM pre-training run with TorchTitan (``training.titan_train``) on a node group whose backend
trains it.

Built from the platform's contract as BERT's is (``jobs.workloads.workload.training_job``: torchrun with the etcd
rendezvous, whole nodes with every Neuron device and EFA interface, the shared volume, the queue, the Trainium taint,
the group's node selector), with TorchTitan's options:

- the model and its configuration: the recipe the Neuron tutorials give the group's instance type, which its catalog
  row names (``jobs.workloads.titan_recipes.recipe_for``);
- the tokenizer (``--hf_assets_path``) and dataset (``--dataloader.dataset_path``) on the shared volume, under the
  platform's datasetsPath;
- DCP checkpoints, TorchTitan's ``step-N`` directories, under ``<run directory>/checkpoint``: its ``--dump_folder`` is
  the run's own directory, ``jobs.job_building.paths.run_directory`` (``<checkpointsPath>/<job name>/<node group>``), where the
  restarted job resumes from the newest and ``run.json`` records the run (``training.titan_trainer``); TensorBoard
  events under ``<tensorboardLogPath>/<job name>``; a fixed ``--debug.seed``, so a run's first loss is the same run to
  run;
- one rank per NeuronCore the group's nodes advertise, on the group's native training image (its TorchNeuron stack).

``titan_options`` builds the command line of the cluster job and of the CPU rehearsal alike (TorchTitan 0.3's
``--module``/``--config`` form, ``training.titan_configs``); they differ only in the recipe (``model_options``: the
configuration and its sizes) and in the device, which ``training.titan_train`` finds (TorchNeuron's, or the CPU).
TorchTitan options given after ``--`` come after the launcher's: TorchTitan takes the last value of an option given
twice (tyro, as argparse), so each replaces the launcher's of the same name. The whole command line is parsed by the
installed TorchTitan before the job is built (``jobs.workloads.titan_config``): an unknown or malformed option is refused.
Which backends run TorchTitan is its declaration's (``jobs.workloads.torchtitan``), the generations they train their
records' (``trainium_eks/backends.py``, with the Neuron docs' word on TorchNeuron's instance families).
"""

from __future__ import annotations

from functools import partial

from jobs.errors import LaunchError
from jobs.job_building.capacity import choose_node_group
from jobs.job_building.grace_period import MAX_GRACE_SECONDS, MB, GracePeriod
from jobs.job_building.paths import on_shared_volume, run_directory
from jobs.job_building.platform_job import JobRequest, placement
from jobs.workloads.titan_config import field_value, parse_titan_options, titan_compile_cache
from jobs.workloads.titan_recipes import TitanRecipe, recipe_for, types_with_recipes
from jobs.workloads.torchtitan import WORKLOAD
from jobs.workloads.workload import TrainingRun
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup

MODULE = "training.titan_train"
SEED = 0  # --debug.seed: TorchTitan seeds nothing unless given one (config/configs.py:353)
PARALLELISM_ANNOTATION = "trainium-eks/parallelism"
RECIPE_ANNOTATION = "trainium-eks/titan-recipe"


def recipe_of(group: NodeGroup) -> TitanRecipe:
    recipe = recipe_for(group.instance_type)
    if recipe is None:
        cited = ", ".join(types_with_recipes())
        raise LaunchError(
            f"--node-group {group.name}: no cited TorchTitan Neuron configuration for a {group.instance_type} "
            f"(the Neuron tutorials' are for {cited}); choose a group of those"
        )
    return recipe


# TorchTitan's parser takes any int for these (it refuses a checkpoint interval below 1 itself), and a run of -5
# steps would enter the job and the first-checkpoint estimate: counts of 1 or more, as BERT's options are
# (``training.options.whole_number``).
COUNTS = ("training.steps", "training.local_batch_size", "training.seq_len", "metrics.log_freq")


def titan_options(contract: PlatformContract, request: JobRequest, recipe: TitanRecipe, group: NodeGroup):
    """TorchTitan's command line, for the cluster and the rehearsal alike: the platform's directories and seed, the
    recipe, then the options the request adds; parsed by TorchTitan (one line if it refuses one), its directories
    on the shared volume. Returned with TorchTitan's configuration of it."""
    options = [
        *("--dump_folder", run_directory(contract, request.name, group)),
        "--checkpoint.enable",
        *("--hf_assets_path", f"{contract.datasets_path}/{recipe.tokenizer_dir}"),
        *("--dataloader.dataset", recipe.dataset),
        *("--dataloader.dataset_path", f"{contract.datasets_path}/{recipe.dataset_dir}"),
        "--metrics.enable_tensorboard",
        # an absolute folder: TorchTitan joins it to the dump folder (os.path.join keeps the absolute one)
        *("--metrics.save_tb_folder", f"{contract.tensorboard_log_path}/{request.name}"),
        *("--debug.seed", str(SEED)),
        *recipe.model_options,
        *given_options(request),
    ]
    config = parse_titan_options(options)
    for path in COUNTS:
        value = field_value(config, path)
        if value < 1:
            raise LaunchError(f"-- --{path} {value}: give a whole number of 1 or more, as TorchTitan counts it")
    for flag, value in (
        ("--dump_folder", config.dump_folder),
        ("--hf_assets_path", config.hf_assets_path),
        ("--dataloader.dataset_path", config.dataloader.dataset_path),
        ("--metrics.save_tb_folder", config.metrics.save_tb_folder),
    ):
        on_shared_volume(contract, flag, value)
    return options, config


def given_options(request: JobRequest) -> tuple[str, ...]:
    """The options the request adds to the recipe's: float32 with ``--no-bf16`` (TorchTitan's FSDP computes in
    bfloat16 by default, ``--training.mixed_precision_param``, 0.3.0 config/configs.py:85), then those given after
    ``--``."""
    precision = () if request.bf16 else ("--training.mixed_precision_param", "float32")
    return (*precision, *request.training_args)


def last_value(options: list[str], flag: str) -> str:
    """The value TorchTitan takes for ``flag``: its last, given as ``--flag value`` or ``--flag=value``."""
    value = ""
    for position, option in enumerate(options):
        if option == flag and position + 1 < len(options):
            value = options[position + 1]
        elif option.startswith(f"{flag}="):
            value = option.split("=", 1)[1]
    return value


def titan_run(contract: PlatformContract, request: JobRequest, recipe: TitanRecipe | None = None) -> TrainingRun:
    """``request``'s TorchTitan run on its node group, with ``recipe`` (default: the group's tutorial recipe), its
    options worked out once."""
    group = choose_node_group(contract, request.node_group)
    recipe = recipe or recipe_of(group)
    placed = placement(contract, request)
    if placed.world_size % recipe.tensor_parallel:
        raise LaunchError(
            f"--nodes {placed.nodes}: {placed.world_size} ranks do not split into tensor-parallel groups of "
            f"{recipe.tensor_parallel} ({recipe.source}); use a multiple of {recipe.tensor_parallel} ranks"
        )
    options, config = titan_options(contract, request, recipe, group)
    cache = titan_compile_cache(
        recipe.name,
        list(recipe.model_options),
        list(given_options(request)),
        placed.world_size,
        group.instance_type,
        placed.software.training_stack,
        placed.image,
    )
    return TrainingRun(
        request=request,
        placed=placed,
        module=MODULE,
        options=tuple(options),
        cache=cache,
        # its interval, or its last step if that comes first (TorchTitan 0.3.0 components/checkpointer/dcp.py:
        # ``last_step`` "forces a save")
        first_checkpoint_steps=min(config.checkpoint.interval, config.training.steps),
        grace_period=partial(titan_grace_period, recipe, request),
        bf16_flag=False,  # the component's --bf16 is BERT's option; TorchTitan's precision is among its options above
        annotations={
            PARALLELISM_ANNOTATION: recipe.parallelism(placed.world_size),
            RECIPE_ANNOTATION: " ".join(recipe.model_options),
        },
    )


def titan_job(contract: PlatformContract, request: JobRequest, recipe: TitanRecipe | None = None) -> dict:
    """The Volcano Job of ``request`` on its node group, with ``recipe`` (default: the group's tutorial recipe)."""
    return WORKLOAD.job(contract, request, partial(titan_run, recipe=recipe))


def titan_grace_period(recipe: TitanRecipe, request: JobRequest, throughput_mb_s: float) -> GracePeriod:
    """The pods' grace period of ``request``'s TorchTitan job of ``recipe`` (``jobs.job_building.grace_period``): its checkpoint
    from ``--checkpoint-gib`` or the recipe's sourced model, its step from ``--step-seconds`` (no source gives one:
    left out without it)."""
    if request.checkpoint_gib is not None:
        gib = request.checkpoint_gib
        if gib * 1024**3 / (throughput_mb_s * MB) > MAX_GRACE_SECONDS:  # a float: 1e308 GiB is inf, not an OverflowError
            raise LaunchError(
                f"--checkpoint-gib {gib:g}: writing it at fsxThroughputMBps {throughput_mb_s:g} takes over "
                f"{MAX_GRACE_SECONDS} s (a day), the longest grace period a pod may have; give one checkpoint's size "
                "in GiB (`du -s` of a step-N folder)"
            )
        checkpoint = round(gib * 1024**3)
    elif recipe.checkpoint_bytes is not None:
        checkpoint = recipe.checkpoint_bytes
    else:
        raise LaunchError(
            f"--checkpoint-gib: no sourced model size for {recipe.name}; give one checkpoint's size in GiB "
            "(`du -s` of a step-N folder) to size the pods' termination grace period"
        )
    return GracePeriod(checkpoint, throughput_mb_s, request.step_seconds)
