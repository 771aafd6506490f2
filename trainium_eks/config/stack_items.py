"""The stack input's building blocks: the strict base model, ``key`` (how a project key states what Pulumi.yaml and
docs/configuration.md need), and the objects in the stack's lists: Trainium node groups (with their capacity
reservations), Volcano queues and teams. Each field states its type, bound and pattern and what it is (``make docs``
generates the guide's tables of the lists' fields from these models); unknown fields are refused.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr
from pydantic_core import PydanticUndefined

from trainium_eks import catalog, hardware, layout, versions
from trainium_eks.config import fields as f

DEFAULT_ROOT_VOLUME_GIB = 500  # the tutorial's NodeVolumeSize: room for images and the local compile cache


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False)


def key(name: str, description: str, *, section: str, default: Any = PydanticUndefined, details: str = "") -> Any:
    """A project key: its name in the stack file; its ``description`` (Pulumi.yaml's, and the start of its row in
    docs/configuration.md, which adds ``details``); the guide's table (``section``) that lists it; and the default
    Pulumi.yaml declares, which the CLI applies, not the model: a config map without the key is missing it."""
    extra: dict[str, Any] = {"section": section}
    if default is not PydanticUndefined:
        extra["default"] = default
    if details:
        extra["details"] = details
    return Field(alias=name, description=description, json_schema_extra=extra)


# Node counts have no upper bound here: EKS's limits on them are service quotas, which an account can raise.
NodeCount = f.Integer  # the order of min, desired and max is a rule across fields


class CapacityReservationInput(Strict):
    type: f.one_of(("odcr", "capacity-block"), "use odcr or capacity-block") = Field(
        description="An On-Demand Capacity Reservation (odcr) or a Capacity Block."
    )
    # An elastic group also selects the Capacity Blocks tagged for it (README "Capacity Blocks for trn2"), so it may
    # name none; node_groups.py requires the ID where only it can select (an ODCR, a managed group's launch template).
    id: f.matching(f.RESERVATION_ID, "'{value}' is not a capacity reservation ID", "use the cr-... ID") | None = Field(
        None,
        description="The reservation's ID, cr-...; optional for a Capacity Block of a karpenter group, which also uses "
        f"every block tagged {layout.CAPACITY_BLOCK_GROUP_TAG}=<clusterName>/<group name>.",
    )
    az_id: StrictStr = Field(alias="azId", description="The reservation's AZ ID; it must equal trainiumAzId.")
    # A reservation is billed for its instances whether they run or not (an ODCR at the on-demand rate; a Capacity
    # Block up front at its own price: EC2 User Guide, "Capacity Blocks pricing and billing"), so the cost estimate
    # needs both; AWS publishes no fixed Capacity Block price (it follows supply and demand).
    instance_count: f.between(1, 10_000, "use the reservation's instance count") = Field(
        alias="instanceCount",
        description="The instances it holds, billed busy or idle; the group's maxSize may not exceed it. With several "
        "tagged Capacity Blocks: the instances of the blocks the group runs in at once (blocks bought one after another "
        "each hold that many).",
    )
    hourly_usd: (
        Annotated[
            f.Number,
            f.rule(
                lambda v: 0 < v <= layout.MAX_BLOCK_USD_PER_INSTANCE_HOUR,
                "{value} is not a price per instance-hour",
                f"use the block's USD per instance-hour (upfront fee / instances / hours), at most "
                f"{layout.MAX_BLOCK_USD_PER_INSTANCE_HOUR}",
            ),
        ]
        | None
    ) = Field(
        None,
        alias="hourlyUsd",
        description="Capacity Blocks only: the price you paid per instance-hour (AWS sets it by supply and demand).",
    )


# How a Trainium node group is provisioned: an EKS managed node group of a fixed size, or a Karpenter NodePool that
# brings nodes when jobs wait and removes them when idle.
PROVISIONING = ("managed", "karpenter")
# Karpenter removes an empty elastic node after this many minutes (NodePool consolidateAfter): long enough for the
# next job of a queue to find the node, its pulled image and its warm local compile cache, short enough that an idle
# trn1.32xlarge (about 21.50 USD/hour) is not kept for long.
DEFAULT_IDLE_MINUTES = 30
MAX_IDLE_MINUTES = 24 * 60
_NO_EFA = [name for name in catalog.TRAINIUM_TYPES if not catalog.INSTANCE_TYPES[name].supports_efa]
WITHOUT_EFA = f"{', '.join(_NO_EFA)} {'has' if len(_NO_EFA) == 1 else 'have'} none" if _NO_EFA else "every type has EFA"


# Which releases a group may pin depends on its training stack, which this field does not know: the rule is
# node_groups._release_check's, whose fix lists the releases that group's stack runs on.
NodeImageReleaseTag = Annotated[StrictStr, f.Shown({"enum": list(versions.sourced_releases())})]


class NodeGroupInput(Strict):
    name: f.dns_label(32) = Field(
        description="A DNS label, unique among the groups: the EKS node group (or Karpenter pool) is named after it."
    )
    instance_type: f.one_of(tuple(catalog.TRAINIUM_TYPES), what="a Trainium type in the catalog") = Field(
        alias="instanceType", description="A Trainium type of the hardware catalog (trainium_eks/catalog.py)."
    )
    provisioning: f.one_of(PROVISIONING, "use managed (a fixed-size EKS managed node group) or karpenter (elastic)") = Field(
        "managed",
        description="managed: an EKS managed node group of a fixed size; karpenter: elastic, nodes come when a job "
        "waits and go when idle.",
    )
    # A managed group needs all three sizes; an elastic group only maxSize (rules.py checks each kind).
    min_size: NodeCount | None = Field(
        None, alias="minSize", description="Managed groups only (required there): 0 <= minSize <= desiredSize <= maxSize."
    )
    desired_size: NodeCount | None = Field(
        None, alias="desiredSize", description="Managed groups only (required there): the nodes that run."
    )
    max_size: NodeCount = Field(
        alias="maxSize",
        description="At least 1: a managed group's largest size, an elastic pool's limit (its limits.cpu is maxSize "
        "nodes' vCPUs).",
    )
    idle_minutes: f.between(1, MAX_IDLE_MINUTES, "use whole minutes from 1 to 1440") | None = Field(
        None,
        alias="idleMinutes",
        description=f"Karpenter groups only: minutes an empty node is kept for the next job; {DEFAULT_IDLE_MINUTES} when unset.",
    )
    efa: f.JsonBoolean | None = Field(
        None, description=f"Unset: what the type supports. EFA-capable types must keep it on; {WITHOUT_EFA}."
    )
    root_volume_gib: f.between(100, 16384, "use at least 100 GiB") = Field(
        DEFAULT_ROOT_VOLUME_GIB,
        alias="rootVolumeGiB",
        description="Encrypted gp3 root volume: room for images and the local compile cache (the tutorial's size).",
    )
    labels: dict[f.LabelKey, f.LabelValue] = Field(
        {}, max_length=64, description="Extra node labels, not under the platform's trainium-eks/ prefix."
    )
    capacity_reservation: CapacityReservationInput | None = Field(
        None,
        alias="capacityReservation",
        description="An On-Demand Capacity Reservation or a Capacity Block the group's nodes launch into.",
    )
    training_stack: f.one_of(tuple(versions.TRAINING_STACKS), what="a training stack of trainium_eks/versions.py") | None = Field(
        None,
        alias="trainingStack",
        description="The training image jobs run on the group, its Neuron runtime and the release its nodes boot by "
        "default; it must train the type's generation. Unset: the generation's ("
        + ", ".join(f"{generation}: {versions.training_stack_of(generation).name}" for generation in hardware.GENERATIONS)
        + ").",
    )
    node_image_release: NodeImageReleaseTag | None = Field(
        None,
        alias="nodeImageRelease",
        description="The EKS-optimised AMI release (an awslabs/amazon-eks-ami tag) the group's nodes boot, pinned, never "
        "latest; its Neuron driver must be one the training stack's runtime initialises on. Unset: the training stack's ("
        + ", ".join(f"{stack.name}: {stack.default_node_image_release}" for stack in versions.TRAINING_STACKS.values())
        + ").",
    )


PrincipalArn = f.matching(f.PRINCIPAL_ARN, "'{value}' is not an IAM role or user ARN", "use arn:aws:iam::<account>:role/<name>")
Share = Annotated[
    f.Number,
    f.rule(lambda v: 0 < v <= 1, "{value} is outside (0, 1]", "use a fraction such as 0.5"),
    f.Shown({"exclusiveMinimum": 0, "maximum": 1}),
]


class QueueInput(Strict):
    name: Annotated[
        f.dns_label(),
        f.rule(lambda v: v != "default", "'{value}' is taken", "use a unique name other than Volcano's built-in 'default'"),
    ] = Field(description="A DNS label, unique, not Volcano's built-in default.")
    weight: f.between(1, 65535, "use a positive weight") = Field(
        1, description="The queue's share of the cluster under contention."
    )
    neuron_share: Share = Field(
        1.0,
        alias="neuronShare",
        description="The queue's cap: this fraction of each Trainium group's maxSize, rounded down to whole nodes, at "
        "their Neuron devices, NeuronCores and EFA interfaces; at least one node of every group.",
    )


class TeamInput(Strict):
    # The namespace and queue are team-<name>; 20 characters leave room for the volume's and groups' names.
    name: f.dns_label(20, "use up to 20 lowercase letters, digits and '-', e.g. nlp") = Field(
        description="A DNS label, unique: the team's namespace and queue are team-<name>."
    )
    neuron_share: Share = Field(
        alias="neuronShare",
        description="The team's quota and queue cap: this fraction of each Trainium group's maxSize, rounded down to "
        "whole nodes, at their Neuron devices, NeuronCores and EFA interfaces; at least one node of every group, and "
        "the teams' shares add up to 1 or less.",
    )
    weight: f.between(1, 65535, "use a positive weight") = Field(1, description="The team queue's share under contention.")
    principal_arns: Annotated[list[PrincipalArn], f.Structured] = Field(
        [],
        alias="principalArns",
        description="The members' IAM roles or users: an access entry each, bound to the team's namespace only.",
    )
