"""Whether the nodes fit the subnets' addresses, counted as the VPC CNI takes them.

The platform runs the VPC CNI with its defaults (no prefix delegation, ``WARM_ENI_TARGET`` 1): a node's default
network card holds the interface its pods' addresses come from and one more, warm, each with all its addresses, as
long as it runs fewer pods than one interface holds (a Trainium node runs one training pod and a few DaemonSets); a
node crowded with pods holds every interface of the card (``hardware.InstanceType.node_addresses``). Interfaces the
CNI does not manage add their own address (an EFA-only interface has none). A stack is refused when its nodes at
maxSize, each taking what a running node takes, do not fit; ``preflight plan`` prints that figure and the crowded one.
"""

from __future__ import annotations

import ipaddress

from trainium_eks import catalog, layout
from trainium_eks.config import platform as p
from trainium_eks.config.checks import Key, check

# VPC User Guide, "Subnet CIDR blocks": AWS reserves the first four addresses and the last one of every subnet, and a
# subnet is a /16 at the largest.
RESERVED_PER_SUBNET = 5
LARGEST_SUBNET_PREFIX = 16


def usable_addresses(prefix: int) -> int:
    return 2 ** (32 - prefix) - RESERVED_PER_SUBNET


def node_addresses(instance_type: str, interface_addresses: int, *, crowded: bool = False) -> int:
    """The addresses one node takes: ``interface_addresses`` are its launch template's (the primary interface's
    among them, which the CNI's first interface is)."""
    return catalog.INSTANCE_TYPES[instance_type].node_addresses(interface_addresses - 1, crowded=crowded)


def nodes_fit(
    network: p.NetworkConfig, groups: tuple[p.TrainiumNodeGroupConfig, ...], cluster: p.ClusterConfig, key: Key
) -> None:
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
        per_node = node_addresses(group.instance_type, group.private_ips_per_node)
        taken += group.scaling.max_size * per_node
        check(
            taken <= available,
            f"{key('trainiumNodeGroups')}[{index}].maxSize",
            f"{group.scaling.max_size} {group.instance_type} nodes take {group.scaling.max_size * per_node} addresses "
            f"({per_node} each: the VPC CNI's interface for its pods and its warm one, with all their addresses)"
            f"{' with the groups before it' if index else ''}, but {where} has {available}",
            fix,
        )
    # The system nodes spread over every private subnet, the Trainium subnet among them.
    system = cluster.system_scaling.max_size * node_addresses(cluster.system_instance_type, 1)
    check(
        taken + system <= available * network.az_count,
        key("systemNodeMaxSize"),
        f"{cluster.system_scaling.max_size} {cluster.system_instance_type} system nodes take {system} addresses, which "
        f"with the Trainium nodes' is more than the {network.az_count} private subnets hold ({available * network.az_count})",
        "lower systemNodeMaxSize",
    )
