"""Stack configuration, parsed once at the edge.

Input is the flat config map the Pulumi CLI hands a program (``"<namespace>:<key>" -> string``; structured
values JSON-encoded, Pulumi.yaml's defaults applied). ``parse`` validates the project's keys with the frozen
``StackInput`` model (types, bounds, patterns; unknown keys refused), then the rules across fields, and
returns the ``PlatformConfig`` the components take. Every error is one line: the full key, the problem, the fix.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainium_eks import catalog
from trainium_eks.config import rules
from trainium_eks.config.errors import ConfigError, from_validation, key_path
from trainium_eks.config.platform import (
    CapacityReservation,
    ClusterConfig,
    DeployRunnerConfig,
    ExistingVpc,
    MonitoringConfig,
    NetworkConfig,
    NodeHealthConfig,
    NodeImage,
    NodeRepair,
    PlatformConfig,
    QueueConfig,
    RegistryConfig,
    Scaling,
    SchedulingConfig,
    StorageConfig,
    TeamConfig,
    TrainiumNodeGroupConfig,
)
from trainium_eks.config.stack import RETIRED_KEYS, StackInput

PROJECT_FILE = Path(__file__).resolve().parents[2] / "Pulumi.yaml"

__all__ = [
    "CapacityReservation",
    "ClusterConfig",
    "ConfigError",
    "DeployRunnerConfig",
    "ExistingVpc",
    "MonitoringConfig",
    "NetworkConfig",
    "NodeHealthConfig",
    "NodeImage",
    "NodeRepair",
    "PlatformConfig",
    "QueueConfig",
    "RegistryConfig",
    "Scaling",
    "SchedulingConfig",
    "StorageConfig",
    "TeamConfig",
    "TrainiumNodeGroupConfig",
    "BOOTSTRAP_VARIABLE",
    "bootstrap_step",
    "declarations",
    "from_pulumi",
    "parse",
]


@functools.cache
def declarations(project_file: Path = PROJECT_FILE) -> tuple[str, Mapping[str, dict]]:
    """The project's name and its config declarations (type, default, description) as Pulumi.yaml writes them."""
    document = yaml.safe_load(project_file.read_text())
    return document["name"], document.get("config") or {}


def parse(raw_config: Mapping[str, Any], *, stack: str, project_file: Path = PROJECT_FILE) -> PlatformConfig:
    """Parse the CLI's flat config map for ``stack`` into a validated ``PlatformConfig``."""
    project, declared = declarations(project_file)
    prefix = f"{project}:"
    ours = {k[len(prefix) :]: v for k, v in raw_config.items() if k.startswith(prefix)}

    def missing_fix(loc: tuple) -> str:
        name = loc[-1]
        if len(loc) > 1:
            return f"add {name} to {key_path(prefix, loc[:-1])}"
        spec = declared[name]  # every key of the model is declared (tests/test_config_schema.py)
        how = "add it to the stack file as a list" if spec.get("type") == "array" else f"run `pulumi config set {name} <value>`"
        return f"{how} ({spec.get('description', '')})"

    retired = sorted(RETIRED_KEYS.keys() & ours.keys())
    if retired:
        raise ConfigError(prefix + retired[0], *RETIRED_KEYS[retired[0]])
    try:
        stack_input = StackInput.model_validate(ours)
    except ValidationError as error:
        raise from_validation(error, StackInput, prefix, missing_fix) from None

    region = raw_config.get("aws:region")
    rules.check(isinstance(region, str) and bool(region), "aws:region", "missing", "run `pulumi config set aws:region us-west-2`")
    rules.check(
        region in catalog.REGIONS,
        "aws:region",
        f"{region} has no Trainium offerings in the hardware catalog",
        f"use one of {', '.join(catalog.REGIONS)} or add the region to trainium_eks/catalog.py",
    )
    return rules.platform(stack_input, project=project, stack=stack, region=region, key=lambda name: prefix + name)


# A new private stack's first step (README, "Deploying from CI"): only the network and the deploy runner.
BOOTSTRAP_VARIABLE = "TRAINIUM_EKS_BOOTSTRAP"
DEPLOY_RUNNER_STEP = "deploy-runner"


class _BootstrapEnvironment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    step: Literal["", "deploy-runner"] = Field("", alias=BOOTSTRAP_VARIABLE)


def bootstrap_step(environ: Mapping[str, str], config: PlatformConfig) -> bool:
    """True when ``TRAINIUM_EKS_BOOTSTRAP=deploy-runner`` asks for the deploy runner's step alone."""
    try:
        step = _BootstrapEnvironment.model_validate(dict(environ)).step
    except ValidationError:
        value = environ.get(BOOTSTRAP_VARIABLE, "")
        problem, fix = f"'{value}' is not a bootstrap step", f"set it to {DEPLOY_RUNNER_STEP} or unset it"
        raise ConfigError(BOOTSTRAP_VARIABLE, problem, fix) from None
    if step and config.deploy_runner is None:
        raise ConfigError(
            BOOTSTRAP_VARIABLE,
            "set, but the stack has no deploy runner",
            "set ciRunnerRepository and ciRunnerConnectionArn in the stack file first",
        )
    return bool(step)


def from_pulumi() -> PlatformConfig:
    """Parse the running program's config: the map the CLI passed plus anything set in-process (tests)."""
    import pulumi

    from trainium_eks import sdk_internals

    return parse(sdk_internals.config_map(), stack=pulumi.get_stack())
