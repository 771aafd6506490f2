"""A TorchTitan job's options, parsed where they are given: by the installed TorchTitan's own parser
(``torchtitan.config.ConfigManager``: ``--module``/``--config``, then tyro over that configuration,
torchtitan/config/manager.py:34-45), without training; and the compile cache of what the parsed configuration
compiles.

TorchTitan Neuron's recipe module (``torchtitan_neuron.models.qwen3``) is on the training image, not where the
launcher runs: there upstream's module of the same form stands in for it (``training.titan_configs.STAND_INS``), so
the options are checked against the configuration classes the fork's recipe is made of.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

from jobs.errors import LaunchError
from jobs.workloads.compile_cache import CompileCache

# The configuration's fields that shape the compiled graphs (``jobs.workloads.compile_cache``'s reasons): the sequence and
# batch, the dtypes, the parallel degrees and SPMD backend, activation checkpointing (the backward graph) and
# torch.compile. Steps, intervals, paths, logging and the seed do not.
GRAPH_SHAPING = (
    "training.seq_len",
    "training.local_batch_size",
    "training.global_batch_size",
    "training.dtype",
    "training.mixed_precision_param",
    "training.mixed_precision_reduce",
    "parallelism",
    "activation_checkpoint",
    "compile",
)


def parse_titan_options(options: list[str]):
    """``options`` (``--module``, ``--config`` and TorchTitan's ``--section.key`` options) as TorchTitan parses them;
    an unknown or malformed option is a ``LaunchError`` of one line."""
    try:
        from torchtitan.config import ConfigManager

        from training.titan_configs import stand_in_for_missing_recipes
    except ModuleNotFoundError as missing:
        raise LaunchError(
            f"--workload torchtitan: its options are checked with TorchTitan's own parser, and {missing.name} is not "
            "installed here; pip install -r requirements-dev.txt"
        ) from None
    said = io.StringIO()
    try:
        with stand_in_for_missing_recipes(), redirect_stdout(said), redirect_stderr(said):
            return ConfigManager().parse_args(options)
    except SystemExit:
        problem = tyro_problem(said.getvalue())
    except (ValueError, TypeError, ImportError, AttributeError) as error:
        problem = str(error).splitlines()[0]
    raise LaunchError(f"TorchTitan options: {problem}; see python -m training.titan_train --module ... --config ... --help")


def tyro_problem(printed: str) -> str:
    """tyro's boxed error as one line: its first section, and the option it suggests."""
    lines = [line.strip() for line in printed.splitlines()]
    rules = [index for index, line in enumerate(lines) if line and set(line) == {"-"}]
    first = lines[rules[0] + 1 : rules[1]] if len(rules) > 1 else [line for line in lines if line][-1:]
    problem = " ".join(line for line in first if line)
    if "Perhaps you meant:" in lines:
        problem += f" (did you mean {lines[lines.index('Perhaps you meant:') + 1].split()[0]}?)"
    return problem


def field_value(config: Any, path: str) -> Any:
    value = config
    for name in path.split("."):
        value = getattr(value, name)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value


def graph_changes(recipe_options: list[str], given: list[str]) -> dict[str, Any]:
    """The graph-shaping fields whose value ``given`` changes from the recipe's (both parsed by TorchTitan)."""
    recipe, chosen = parse_titan_options(recipe_options), parse_titan_options([*recipe_options, *given])
    changes = {path: field_value(chosen, path) for path in GRAPH_SHAPING}
    return {path: value for path, value in changes.items() if value != field_value(recipe, path)}


def titan_compile_cache(
    recipe_name: str, recipe_options: list[str], given: list[str], world_size: int, instance_type: str, stack: str, image: str
) -> CompileCache:
    """The NEFF cache of a configuration: the recipe (its module, configuration and sizes), the graph-shaping values
    the options given change, the world size, instance type, training stack and image tag; jobs of any name, step
    count, checkpoint interval or directories share it."""
    inputs = {
        "recipe": " ".join(recipe_options),
        "changes": graph_changes(recipe_options, given),
        "worldSize": world_size,
        "instanceType": instance_type,
        "trainingStack": stack,
        "image": image.rpartition(":")[2],
    }
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return CompileCache(f"titan-{recipe_name}-{digest}", inputs)
