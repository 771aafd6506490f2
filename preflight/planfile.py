"""The plan file: one set of frozen models, which `preflight plan --json` writes and `preflight check --graph FILE`
reads back.

The models state every field's type and its camelCase name on the wire: the engine's plan (``engine.Plan.to_json``)
with the ``capacityBlockDrains``, ``cost``, ``deployment``, ``firstStep``, ``systemFit``, ``teamJobs`` and
``trainiumNodes`` annotations. ``preflight.analysis.annotate`` builds a ``PlanFile`` and writes its ``to_json``;
``node_facts``, ``drain_windows`` and ``team_jobs`` build their parts as these models (``record``). A file is read
with ``read``, which may find the annotations left out and refuses anything else with one line
``<file>: <json path>: <problem>; <fix>``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, StringConstraints, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from preflight.stackfile import STACK_NAME, StackFileError, read_text

# The shipped stacks' plans are about 150 KiB; a plan a hundred times larger is still far below the bound.
MAX_PLAN_FILE_BYTES = 64 * 2**20
FIX = "regenerate the file with `python -m preflight plan STACK --json`"


class PlanFileError(Exception):
    """A plan file that cannot be checked; the message is one line naming the file, the place and the fix."""


def _not_a_float(value: JsonValue, path: str = "") -> str | None:
    """Where ``value`` holds a number no finite float carries (the engine carries every number as one), if anywhere:
    an integer beyond a float's range, or (as this JSON reader takes them) Infinity or NaN."""
    if isinstance(value, dict):
        return next(filter(None, (_not_a_float(item, f"{path}.{key}") for key, item in value.items())), None)
    if isinstance(value, list):
        return next(filter(None, (_not_a_float(item, f"{path}[{i}]") for i, item in enumerate(value))), None)
    if isinstance(value, float) and not math.isfinite(value):
        return path
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_FLOAT_INTEGER:
        return path
    return None


def _finite_floats(values: dict[str, JsonValue]) -> dict[str, JsonValue]:
    where = _not_a_float(values)
    if where is not None:
        problem = "{where}: a number no float carries (beyond its range, or not finite)"
        raise PydanticCustomError("float_range", problem, {"where": where.lstrip(".")})
    return values


# Inputs and outputs as the engine sends them: protobuf Struct values, whose numbers are floats.
WireValues = Annotated[dict[str, JsonValue], AfterValidator(_finite_floats)]
MAX_FLOAT_INTEGER = int(sys.float_info.max)


class _Record(BaseModel):
    # strict: JSON `1` is not a boolean nor `"1"` a number, as the engine never writes them that way.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    @classmethod
    def record(cls, **fields: Any) -> Self:
        """A record as a writer builds it, by field name (a file is read by the wire names alone)."""
        return cls.model_validate(fields, by_alias=False, by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The record as the plan file carries it."""
        return self.model_dump(mode="json", by_alias=True)


# A figure as the analysis computed it: JSON writes 2 and 2.0 apart, so an integer stays one when written back.
Number = int | float


class PlannedResource(_Record):
    """One registration as the engine sees it: the record the offline engine keeps (``engine.Plan.resources``), the plan
    file carries and ``plan_graph.graph.Graph.from_records`` links into nodes."""

    urn: str
    type: str
    name: str
    custom: bool
    parent: str | None
    provider: str | None
    protect: bool
    retain_on_delete: bool = Field(alias="retainOnDelete")
    dependencies: tuple[str, ...]
    property_dependencies: dict[str, tuple[str, ...]] = Field(alias="propertyDependencies")
    inputs: WireValues
    ignore_changes: tuple[str, ...] = Field(default=(), alias="ignoreChanges")


class CostLine(_Record):
    urn: str
    description: str
    hourly_usd: Number = Field(alias="hourlyUsd")
    idle_hourly_usd: Number = Field(alias="idleHourlyUsd")
    priced: bool = True


class PrepaidBlock(_Record):
    urn: str
    description: str
    reservation: str | None
    instances: int
    instance_type: str = Field(alias="instanceType")
    instance_hourly_usd: Number = Field(alias="instanceHourlyUsd")
    hourly_usd: Number = Field(alias="hourlyUsd")


class CostEstimate(_Record):
    """``plan_graph.cost.CostEstimate.to_json``."""

    hourly_usd: Number = Field(alias="hourlyUsd")
    monthly_usd: Number = Field(alias="monthlyUsd")
    idle_hourly_usd: Number = Field(alias="idleHourlyUsd")
    idle_monthly_usd: Number = Field(alias="idleMonthlyUsd")
    price_source: str = Field(alias="priceSource")
    lines: tuple[CostLine, ...]
    prepaid: tuple[PrepaidBlock, ...] = ()


class DeploymentStep(_Record):
    urn: str
    type: str
    start_minute: Number = Field(alias="startMinute")
    finish_minute: Number = Field(alias="finishMinute")
    minutes: Number
    source: str


class OrderingWait(_Record):
    urn: str
    waits_for: str = Field(alias="waitsFor")


class DeploymentSchedule(_Record):
    """``plan_graph.deployment.Schedule.to_json``."""

    critical_path_minutes: Number = Field(alias="criticalPathMinutes")
    critical_path: tuple[str, ...] = Field(alias="criticalPath")
    steps: tuple[DeploymentStep, ...]
    ordering_only_waits: tuple[OrderingWait, ...] = Field(alias="orderingOnlyWaits")


class FirstStepTerm(_Record):
    what: str
    minutes: Number | None
    source: str
    cold_only: bool = Field(alias="coldOnly")


class FirstStep(_Record):
    """``plan_graph.first_step.FirstStep.to_json``."""

    group: str
    nodes: int
    cold_minutes: Number = Field(alias="coldMinutes")
    warm_minutes: Number = Field(alias="warmMinutes")
    terms: tuple[FirstStepTerm, ...]
    not_counted: str = Field(alias="notCounted")


class NodeRequests(_Record):
    millicpu: Number
    memory_mib: Number = Field(alias="memoryMiB")


class SystemFit(_Record):
    """``plan_graph.system_fit.SystemFit.to_json``."""

    instance_type: str = Field(alias="instanceType")
    nodes: int
    allocatable_millicpu: Number = Field(alias="allocatableMillicpu")
    allocatable_memory_mib: Number = Field(alias="allocatableMemoryMiB")
    requested_per_node: tuple[NodeRequests, ...] = Field(alias="requestedPerNode")
    unplaced: tuple[str, ...]
    unreadable: tuple[str, ...] = ()
    fits: bool
    not_counted: str = Field(alias="notCounted")


class NodeImage(_Record):
    image: str | None
    release: str | None
    neuron_driver: str | None = Field(alias="neuronDriver")
    training_runtime_runs_on_it: bool | None = Field(alias="trainingRuntimeRunsOnIt")


class NodeAddresses(_Record):
    interface_addresses: int = Field(alias="interfaceAddresses")
    efa_interfaces: int = Field(alias="efaInterfaces")
    per_running_node: int = Field(alias="perRunningNode")
    per_crowded_node: int = Field(alias="perCrowdedNode")
    max_size: int = Field(alias="maxSize")
    at_max_size: int = Field(alias="atMaxSize")
    crowded_at_max_size: int = Field(alias="crowdedAtMaxSize")
    subnet_cidr: str | None = Field(alias="subnetCidr")
    subnet_usable: int | None = Field(alias="subnetUsable")


class TrainingStack(_Record):
    name: str
    generations: tuple[str, ...]
    backend: str
    image_tag: str = Field(alias="imageTag")
    neuron_sdk: str = Field(alias="neuronSdk")
    neuron_runtime: str = Field(alias="neuronRuntime")
    drivers: str


class TrainiumNodeGroup(_Record):
    group: str | None
    resource: str
    instance_type: str = Field(alias="instanceType")
    generation: str
    training_stack: TrainingStack | None = Field(alias="trainingStack")
    node_image: NodeImage = Field(alias="nodeImage")
    addresses: NodeAddresses | None


class TrainiumNodes(_Record):
    """``preflight.node_facts.trainium_nodes``."""

    groups: tuple[TrainiumNodeGroup, ...]


class CapacityBlockDrain(_Record):
    workload: str
    recipe: str
    checkpoint_bytes: int = Field(alias="checkpointBytes")
    throughput_mb_s: Number = Field(alias="throughputMBps")
    step_seconds: Number | None = Field(alias="stepSeconds")
    grace_seconds: int = Field(alias="graceSeconds")
    fits: bool
    throughput_to_fit_mb_s: int | None = Field(alias="throughputToFitMBps")
    step_to_fit_seconds: int | None = Field(alias="stepToFitSeconds")


class CapacityBlockGroup(_Record):
    group: str
    instance_type: str = Field(alias="instanceType")
    launcher_checks: bool = Field(alias="launcherChecks")
    drains: tuple[CapacityBlockDrain, ...]


class CapacityBlockDrains(_Record):
    """``preflight.drain_windows.capacity_block_drains``."""

    window_seconds: int = Field(alias="windowSeconds")
    groups: tuple[CapacityBlockGroup, ...]
    not_known: str | None = Field(alias="notKnown")


class TeamGroupJob(_Record):
    group: str
    instance_type: str = Field(alias="instanceType")
    nodes: int
    workers: int
    limited_by: str | None = Field(alias="limitedBy")
    resource: str | None
    per_node: Number | None = Field(alias="perNode")
    admitted: Number | None


class TeamJobs(_Record):
    team: str
    groups: tuple[TeamGroupJob, ...]


class LargestTeamJobs(_Record):
    """``preflight.team_jobs.largest_team_jobs``."""

    teams: tuple[TeamJobs, ...]
    not_known: str | None = Field(alias="notKnown")


class PlanFile(_Record):
    project: str
    # The stack names the policy config file to read, so it must not name a path.
    stack: Annotated[str, StringConstraints(pattern=f"^{STACK_NAME.pattern}$")]
    resources: tuple[PlannedResource, ...]
    outputs: WireValues
    # Annotations `plan --json` adds; `check` computes them afresh from the resources.
    capacity_block_drains: CapacityBlockDrains | None = Field(default=None, alias="capacityBlockDrains")
    cost: CostEstimate | None = None
    deployment: DeploymentSchedule | None = None
    first_step: tuple[FirstStep, ...] | None = Field(default=None, alias="firstStep")
    system_fit: SystemFit | None = Field(default=None, alias="systemFit")
    trainium_nodes: TrainiumNodes | None = Field(default=None, alias="trainiumNodes")
    team_jobs: LargestTeamJobs | None = Field(default=None, alias="teamJobs")

    @field_validator("resources")
    @classmethod
    def _urns_are_unique(cls, resources: tuple[PlannedResource, ...]) -> tuple[PlannedResource, ...]:
        seen: set[str] = set()
        for resource in resources:
            if resource.urn in seen:  # one of the two would silently go unchecked
                raise PydanticCustomError("duplicate_urn", "two resources have the urn {urn}", {"urn": resource.urn})
            seen.add(resource.urn)
        return resources

    @classmethod
    def written(cls, plan: dict[str, Any]) -> Self:
        """The plan as the engine and the analyses give it, checked against the model before it is written; lax only
        in taking their lists where the model keeps tuples."""
        return cls.model_validate(plan, strict=False)

    def to_plan(self) -> dict[str, Any]:
        """The plan as the engine's ``Plan.to_json`` gives it, which the policy check and the analysis read."""
        return self.model_dump(
            mode="json",
            by_alias=True,
            exclude={"capacity_block_drains", "cost", "deployment", "first_step", "system_fit", "trainium_nodes", "team_jobs"},
        )


def json_path(loc: tuple[int | str, ...]) -> str:
    """``$.resources[3].urn`` from pydantic's error location."""
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


# pydantic error type -> the problem, where pydantic's own words would not say it.
PROBLEMS = {"missing": "missing", "extra_forbidden": "unknown key"}


def read(path: Path) -> PlanFile:
    try:
        text = read_text(path, MAX_PLAN_FILE_BYTES, FIX)
    except StackFileError as error:
        raise PlanFileError(str(error)) from None
    try:
        return PlanFile.model_validate_json(text)
    except ValidationError as error:
        detail = error.errors(include_url=False)[0]
        message = detail["msg"]
        problem = PROBLEMS.get(detail["type"], message[:1].lower() + message[1:])
        raise PlanFileError(f"{path}: {json_path(detail['loc'])}: {problem}; {FIX}") from None
