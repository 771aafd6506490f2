"""How long a job can run in its node group's Capacity Blocks, and whether it reaches its first checkpoint in time.

A group's blocks are the active Capacity Blocks of its instance type that carry its tag (the contract's
``capacityBlockTag``: ``trainium-eks/capacity-block-group=<clusterName>/<group>``), or that the stack names by id
(``capacityBlockId``): the blocks its EC2NodeClass selects, buying and tagging another needs no stack edit. They come
from EC2, as Karpenter asks for them (``state`` active, ``tag:<key>`` or the id: karpenter-provider-aws
pkg/providers/capacityreservation/types.go, ``DescribeCapacityReservationsInput``), through the AWS CLI::

    aws ec2 describe-capacity-reservations --region R --filters Name=tag:<key>,Values=<value> Name=state,Values=active

or, offline, from that command's JSON output saved to a file (``--capacity-blocks FILE``). Each reservation is read
as the EC2 API returns it (EC2 API Reference, ``CapacityReservation``: ``ReservationType`` ``capacity-block``,
``EndDate`` a timestamp, ``State`` ``active`` when "the capacity is available for use").

A job runs until the latest end among them, less the 30 minutes before it at which EC2 "begin[s] to terminate any
instances that are still running in the Capacity Block" (EC2 User Guide, "Work with Capacity Blocks") and
Karpenter's drain before that, 40 minutes before the end (``trainium_eks.karpenter_termination``). A job that cannot write
its first checkpoint before then would lose all its work: the launcher refuses it.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, NonNegativeInt, StrictStr, ValidationError

from jobs.errors import LaunchError
from plan_graph.first_step import KARPENTER_NODE_READY_MINUTES
from trainium_eks import catalog, files, karpenter_termination
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup

EC2_TERMINATES_BEFORE_END_SECONDS = karpenter_termination.EC2_TERMINATES_BLOCK_BEFORE_END_SECONDS["instance"]
# How long before a block's end a job's node is drained: Karpenter deletes the block's NodeClaims 40 minutes before
# its end (``trainium_eks.karpenter_termination``); the pods then train on until their grace period before EC2's.
RUNS_UNTIL_BEFORE_END = timedelta(seconds=karpenter_termination.KARPENTER_EXPIRES_BLOCK_BEFORE_END_SECONDS)
CAPACITY_BLOCK_TYPE = "capacity-block"
MAX_BLOCKS_FILE_BYTES = 4 * 1024 * 1024  # a reservation is about a kilobyte of JSON
OFFLINE = "pass --capacity-blocks FILE, the saved JSON output of `aws ec2 describe-capacity-reservations`"


class Tag(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    key: StrictStr = Field(alias="Key")
    value: StrictStr = Field(alias="Value")


class CapacityReservation(BaseModel):
    """One reservation as DescribeCapacityReservations returns it; keys it does not use are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    reservation_id: StrictStr = Field(alias="CapacityReservationId")
    instance_type: StrictStr = Field(alias="InstanceType")
    availability_zone_id: StrictStr = Field(alias="AvailabilityZoneId")
    state: StrictStr = Field(alias="State")
    reservation_type: StrictStr = Field("default", alias="ReservationType")  # absent on an older API's ODCR
    start_date: AwareDatetime | None = Field(None, alias="StartDate")
    end_date: AwareDatetime | None = Field(None, alias="EndDate")  # None: an ODCR with no end
    total_instance_count: NonNegativeInt = Field(alias="TotalInstanceCount")
    tags: tuple[Tag, ...] = Field((), alias="Tags")

    def serves(self, group: NodeGroup) -> bool:
        """Whether ``group``'s nodes run in this reservation: an active Capacity Block of the group's type, tagged
        for the group or named by the stack."""
        tag = group.capacity_block_tag
        chosen = self.reservation_id == group.capacity_block_id or (
            tag is not None and Tag(Key=tag.key, Value=tag.value) in self.tags
        )
        usable = self.state == "active" and self.reservation_type == CAPACITY_BLOCK_TYPE and self.end_date is not None
        return chosen and usable and self.instance_type == group.instance_type


class DescribedReservations(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    capacity_reservations: tuple[CapacityReservation, ...] = Field(alias="CapacityReservations")


def parsed(text: str, source: str) -> tuple[CapacityReservation, ...]:
    """The reservations of one `describe-capacity-reservations` JSON output; bad input named in one line."""
    try:
        return DescribedReservations.model_validate_json(text).capacity_reservations
    except ValidationError as error:
        detail = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in detail["loc"]) or "the top level"
        problem = detail["msg"][0].lower() + detail["msg"][1:]
        raise LaunchError(
            f"{source}: {where}: {problem}; give `aws ec2 describe-capacity-reservations` JSON (dates with a zone)"
        ) from None


def read_blocks_file(path: Path) -> tuple[CapacityReservation, ...]:
    try:
        text = files.read_text(path, MAX_BLOCKS_FILE_BYTES, OFFLINE)
    except files.UnreadableFile as error:
        raise LaunchError(f"--capacity-blocks {path}: not a readable file ({error.problem})") from None
    return parsed(text, f"--capacity-blocks {path}")


def describe_from_ec2(region: str, group: NodeGroup) -> tuple[CapacityReservation, ...]:
    """The active reservations tagged for ``group``, and the one the stack names, as the AWS CLI reads them."""
    active = ["--filters", "Name=state,Values=active"]
    queries = []
    if group.capacity_block_tag is not None:
        tag = group.capacity_block_tag
        queries.append([*active, f"Name=tag:{tag.key},Values={tag.value}"])
    if group.capacity_block_id is not None:
        queries.append([*active, "--capacity-reservation-ids", group.capacity_block_id])
    found: list[CapacityReservation] = []
    for query in queries:
        command = ["aws", "ec2", "describe-capacity-reservations", "--region", region, "--output", "json", *query]
        try:
            result = subprocess.run(command, capture_output=True, text=True)
        except FileNotFoundError:
            raise LaunchError(f"Capacity Blocks of {group.name}: no AWS CLI on PATH to read them; or {OFFLINE}") from None
        if result.returncode != 0:
            last_line = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise LaunchError(f"Capacity Blocks of {group.name}: the AWS CLI failed ({last_line}); or {OFFLINE}")
        found += parsed(result.stdout, "`aws ec2 describe-capacity-reservations`")
    return tuple(found)


def in_capacity_block(contract: PlatformContract, group: NodeGroup) -> bool:
    """Whether ``group``'s nodes run in a Capacity Block, as far as the contract tells: one it selects by tag or id
    (``capacityBlockTag``, ``capacityBlockId``, contract entries a platform older than them leaves out), or a type
    its region sells in Capacity Blocks only (``catalog``: trn2.48xlarge in us-east-2), since the stack refuses it
    any other way (``trainium_eks/config/node_groups.py``)."""
    if group.capacity_block_tag is not None or group.capacity_block_id is not None:
        return True
    spec = catalog.INSTANCE_TYPES.get(group.instance_type)
    return spec is not None and spec.block_only(contract.region)


@dataclass(frozen=True)
class FirstCheckpoint:
    """The least time from submission to a job's first checkpoint: its start (``plan_graph.first_step``'s terms for
    a platform that is up: Karpenter's node launch on an elastic group; the image pull and a cold compile, which it
    cannot size here, not counted), the checkpoint interval's steps and the checkpoint's write."""

    start_seconds: float
    interval_steps: int
    step_seconds: float | None  # None: no source gives the step, and --step-seconds was not given
    write_seconds: float | None  # None: the platform publishes no file system throughput
    options: tuple[str, str]  # the training options, after --, of the checkpoint interval and of the run's steps

    @classmethod
    def of(
        cls,
        elastic: bool,
        interval_steps: int,
        step_seconds: float | None,
        write_seconds: float | None,
        options: tuple[str, str],
    ) -> FirstCheckpoint:
        start = KARPENTER_NODE_READY_MINUTES * 60 if elastic else 0.0
        return cls(start, interval_steps, step_seconds, write_seconds, options)

    @property
    def seconds(self) -> float:
        return self.start_seconds + self.interval_steps * (self.step_seconds or 0.0) + (self.write_seconds or 0.0)

    def describe(self) -> str:
        steps = (
            f"{self.interval_steps} steps uncounted: give --step-seconds"
            if self.step_seconds is None
            else f"{self.interval_steps} steps x {self.step_seconds:g} s"
        )
        write = "write uncounted" if self.write_seconds is None else f"{self.write_seconds:.0f} s write"
        return f"{duration(self.seconds)} ({self.start_seconds:.0f} s start, {steps}, {write})"


def time_in_blocks(blocks: tuple[CapacityReservation, ...], group: NodeGroup, first: FirstCheckpoint, now: datetime) -> str:
    """How long a job on ``group`` can run in its blocks, in words (the job's annotation), where it reaches its first
    checkpoint in time; refused in one line otherwise, or where no block serves the group."""
    serving = [block for block in blocks if block.serves(group)]
    if not serving:
        raise LaunchError(f"--node-group {group.name}: {no_block(group)}")
    last = max(serving, key=lambda block: block.end_date)
    runs_until = last.end_date - RUNS_UNTIL_BEFORE_END
    left = (runs_until - now).total_seconds()
    ends = f"Capacity Block {last.reservation_id} ends {moment(last.end_date)}"
    if left < first.seconds:
        interval, steps = first.options
        raise LaunchError(
            f"--node-group {group.name}: {ends}, a job has {duration(left)}; its first checkpoint needs "
            f"{first.describe()}; tag a later block, or pass fewer -- {steps} or a shorter -- {interval}"
        )
    return (
        f"{ends}; a job can run {duration(left)}, until {moment(runs_until)} (EC2 terminates instances "
        f"{EC2_TERMINATES_BEFORE_END_SECONDS // 60} min before the end, Karpenter drains "
        f"{RUNS_UNTIL_BEFORE_END.total_seconds() // 60:.0f} min before it); the first checkpoint takes at least "
        f"{first.describe()}"
    )


def no_block(group: NodeGroup) -> str:
    """Why no block serves ``group`` (which names a tag or an id), with the fix."""
    tag, named = group.capacity_block_tag, group.capacity_block_id
    which = " or ".join(([f"tagged {tag.key}={tag.value}"] if tag else []) + ([named] if named else []))
    tag_it = "and tag it" if tag else "and name it in the stack (capacityReservation.id)"
    return f"no active Capacity Block of {group.instance_type} {which}; buy one {tag_it}, or wait for one bought to start"


def moment(when: datetime) -> str:
    """``when`` in UTC, to the minute."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")


def duration(seconds: float) -> str:
    """``seconds`` as hours and minutes (rounded down: the time a job can count on)."""
    minutes = max(0, int(seconds // 60))
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"
