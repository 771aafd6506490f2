"""The share model: what a ``neuronShare`` (of a team, or of a platform Volcano queue) entitles its holder to on a
fleet of unlike Trainium nodes.

A share is a share of EACH Trainium node group, in whole nodes: ``floor(share x maxSize)`` nodes of every group. The
queue's capability and the team's ResourceQuota are the sum over the groups of those nodes times what one node of the
group advertises (Neuron devices, NeuronCores, EFA interfaces). A share of the fleet's sum would not do: on 2 trn1 (8 EFA
interfaces each) and 2 trn2 (16 each), a quarter of the sum is 12 interfaces, less than one trn2 node. Per group, every
whole node the holder is entitled to fits every quota'd resource, and the shares of teams adding up to 1 or less give
quotas adding up to the fleet or less (each floor is at most its fraction). docs/teams.md, "Capacity: a share of each
group, in whole nodes".

The functions are pure, over ``GroupNodes``: the stack's node groups (``fleet``), and the policy rules build them from
the plan's groups.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING

from trainium_eks import layout

if TYPE_CHECKING:
    from trainium_eks.config.platform import TrainiumNodeGroupConfig

# Shares are fractions written in a stack file: a product such as 0.29 x 100 (28.999999999999996) is rounded to this
# many digits before it is floored, and sums of shares are compared after the same rounding (0.7 + 0.2 + 0.1 fits).
SHARE_DIGITS = 9


@dataclass(frozen=True)
class GroupNodes:
    """One Trainium node group as a share sees it: how many nodes it runs at most, and what one node advertises."""

    name: str
    instance_type: str
    max_size: int
    per_node: Mapping[str, int]  # extended resource -> the amount one node advertises (zero amounts left out)


# The extended resources a quota and a capability hold: what a Trainium node advertises through its device plugins.
QUOTAED_RESOURCES = (layout.NEURON_DEVICE_RESOURCE, layout.NEURON_CORE_RESOURCE, layout.EFA_RESOURCE)


def node_resources(neuron_devices: int, neuron_cores: int, efa_interfaces: int) -> dict[str, int]:
    """What one node advertises of ``QUOTAED_RESOURCES``: Neuron devices and cores, EFA interfaces (zero left out)."""
    amounts = dict(zip(QUOTAED_RESOURCES, (neuron_devices, neuron_cores, efa_interfaces), strict=True))
    return {resource: amount for resource, amount in amounts.items() if amount}


def fleet(node_groups: Iterable[TrainiumNodeGroupConfig]) -> tuple[GroupNodes, ...]:
    """The stack's Trainium node groups, with the catalog's facts of their instance types."""
    return tuple(
        GroupNodes(
            g.name,
            g.instance_type,
            g.scaling.max_size,
            node_resources(g.spec.neuron_devices, g.spec.neuron_cores, g.efa_interfaces),
        )
        for g in node_groups
    )


def entitled_nodes(share: float, max_size: int) -> int:
    """The whole nodes of a group of ``max_size`` nodes that ``share`` entitles its holder to."""
    return math.floor(round(share * max_size, SHARE_DIGITS))


def _entitled_amounts(share: float, groups: Sequence[GroupNodes]) -> dict[str, int]:
    """Every quota'd resource, zero included: the entitled nodes of every group times what one node advertises."""
    totals = dict.fromkeys(QUOTAED_RESOURCES, 0)
    for group in groups:
        nodes = entitled_nodes(share, group.max_size)
        for resource, amount in group.per_node.items():
            totals[resource] += nodes * amount
    return totals


def share_capability(share: float, groups: Sequence[GroupNodes]) -> dict[str, int]:
    """A queue's capability and a team's quota: the entitled nodes of every group times what one node advertises.
    A resource no node advertises is left out (no group has EFA, say), as a capability or quota without it."""
    return {resource: amount for resource, amount in _entitled_amounts(share, groups).items() if amount}


def fleet_capacity(groups: Sequence[GroupNodes]) -> dict[str, int]:
    """Each quota'd resource the groups advertise at their maximum sizes, zero included: the whole fleet."""
    return _entitled_amounts(1, groups)


def groups_short_of_a_node(share: float, groups: Sequence[GroupNodes]) -> list[GroupNodes]:
    """The groups of which ``share`` entitles its holder to no whole node."""
    return [group for group in groups if entitled_nodes(share, group.max_size) == 0]


def smallest_share_for_a_node(max_size: int) -> float:
    """The smallest share, in hundredths, that entitles its holder to one node of a group of ``max_size`` nodes."""
    return math.ceil(round(100 / max_size, SHARE_DIGITS)) / 100


def smallest_max_size_for_a_node(share: float) -> int:
    """The smallest maxSize of which ``share`` entitles its holder to one node."""
    return math.ceil(round(1 / share, SHARE_DIGITS))


def nodes_held(limits: Mapping[str, Real], group: GroupNodes) -> float:
    """How many whole nodes of ``group`` fit ``limits`` (a quota's or a capability's amounts by resource) on every
    resource one node advertises; a resource ``limits`` leaves out is not limited (a ResourceQuota holds only what its
    ``hard`` names; Volcano takes a scalar missing from a capability as unbounded: release-1.15
    pkg/scheduler/api/resource_info.go L972-978, MinDimensionResource with Infinity). ``math.inf``: nothing limits it."""
    held = [math.floor(limits[resource] / amount) for resource, amount in group.per_node.items() if resource in limits]
    return min(held, default=math.inf)
