"""Whether the nodes fit the subnets' addresses: refused where the arithmetic leaves no doubt.

Every Trainium node takes an address for each of its interfaces that has one (the launch template's layout,
``TrainiumNodeGroupConfig.private_ips_per_node``) and one more for its training pod at the least: the VPC CNI gives
each pod that is not on the host network an address of the node's subnet. A node running many pods, or the CNI's
warm pool, takes more (up to ``catalog.InstanceType.most_addresses``; ``preflight plan`` prints both), so a stack
that passes here can still run out on a crowded node; one that fails here could never reach its maxSize.
"""

from __future__ import annotations

import ipaddress

from trainium_eks import layout
from trainium_eks.config import platform as p
from trainium_eks.config.checks import Key, check

# VPC User Guide, "Subnet CIDR blocks": AWS reserves the first four addresses and the last one of every subnet, and a
# subnet is a /16 at the largest.
RESERVED_PER_SUBNET = 5
LARGEST_SUBNET_PREFIX = 16
TRAINING_POD_ADDRESSES = 1


def usable_addresses(prefix: int) -> int:
    return 2 ** (32 - prefix) - RESERVED_PER_SUBNET


def least_addresses(group: p.TrainiumNodeGroupConfig) -> int:
    """The addresses one node of ``group`` takes at the least: its interfaces' and its training pod's."""
    return group.private_ips_per_node + TRAINING_POD_ADDRESSES


def nodes_fit(network: p.NetworkConfig, groups: tuple[p.TrainiumNodeGroupConfig, ...], system_max: int, key: Key) -> None:
    if network.existing is None:
        vpc_prefix = ipaddress.IPv4Network(network.vpc_cidr).prefixlen
        prefix = vpc_prefix + layout.PRIVATE_SUBNET_SPLIT_BITS
        where = f"the Trainium subnet (a /{prefix} of vpcCidr {network.vpc_cidr})"
        fix = "lower maxSize, or widen vpcCidr" if vpc_prefix > LARGEST_SUBNET_PREFIX else "lower maxSize"
    else:
        prefix = LARGEST_SUBNET_PREFIX  # the existing subnet's size is known at deploy time only: the largest there is
        where = "any subnet (a /16 at the largest)"
        fix = "lower maxSize"
    available, taken = usable_addresses(prefix), 0
    for index, group in enumerate(groups):
        per_node = least_addresses(group)
        taken += group.scaling.max_size * per_node
        check(
            taken <= available,
            f"{key('trainiumNodeGroups')}[{index}].maxSize",
            f"{group.scaling.max_size} {group.instance_type} nodes take at least {group.scaling.max_size * per_node} "
            f"addresses ({per_node} each: {group.private_ips_per_node} for its interfaces, {TRAINING_POD_ADDRESSES} for "
            f"its training pod){' with the groups before it' if index else ''}, but {where} has {available}",
            fix,
        )
    # The system nodes spread over every private subnet, the Trainium subnet among them; each takes its own address.
    check(
        taken + system_max <= available * network.az_count,
        key("systemNodeMaxSize"),
        f"{system_max} system nodes and the Trainium nodes take more addresses than the {network.az_count} private "
        f"subnets hold ({available * network.az_count})",
        "lower systemNodeMaxSize",
    )
