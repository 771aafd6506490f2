"""Which nodes a job takes: the node group it names, how many of its nodes (what a managed group runs, or up to an
elastic group's maxSize, which Karpenter brings), and each pod's share of a whole node."""

from __future__ import annotations

from trainium_eks import layout
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup
from trainium_eks.wording import counted

RESERVED_VCPUS = 4  # kubelet, the VPC CNI and the device-plugin DaemonSets
MEMORY_FRACTION = 0.9


class LaunchError(Exception):
    """Bad input to the launcher; the message is one line naming the option and the fix."""


def choose_node_group(contract: PlatformContract, name: str | None) -> NodeGroup:
    if name is None:
        return contract.node_groups[0]
    for group in contract.node_groups:
        if group.name == name:
            return group
    raise LaunchError(f"--node-group {name}: no such node group; the stack has {', '.join(g.name for g in contract.node_groups)}")


def queue_devices(contract: PlatformContract, queue: str | None = None) -> float | None:
    """The Neuron devices queue ``queue`` (default: the contract's first) admits, its capability; a team's queue is
    its quota. None when the queue sets no Neuron capability."""
    name = queue or contract.queues[0]
    (entry,) = [q for q in contract.volcano_queues if q.name == name]
    return entry.capability.get(layout.NEURON_DEVICE_RESOURCE)


def queue_nodes(contract: PlatformContract, group: NodeGroup, queue: str | None = None) -> int | None:
    """The whole nodes of ``group`` queue ``queue`` admits by its Neuron capability (None: no capability set)."""
    allowed = queue_devices(contract, queue)
    return None if allowed is None else int(allowed) // group.neuron_devices_per_node


def node_count(
    contract: PlatformContract,
    group: NodeGroup,
    requested: int | None,
    default: int = 2,
    queue: str | None = None,
    *,
    devices: bool = True,
) -> int:
    """The nodes a job takes: ``requested``, else ``default`` (at most what the group can hold and the queue admits).
    A managed group holds the nodes it runs (desiredSize); an elastic group up to maxSize, which Karpenter brings when
    the job waits. A job larger than its queue admits is refused: it would wait with nothing to bring it capacity.
    ``devices=False``: pods that ask for no Neuron device, which no queue's capability bounds."""
    ceiling = contract.node_ceiling(group)
    if ceiling == 0:
        raise LaunchError(
            f"--node-group {group.name}: the group runs no node (desiredSize 0), so a job there would wait forever; "
            "scale it up, or make it elastic (provisioning: karpenter)"
        )
    admitted = queue_nodes(contract, group, queue) if devices else None
    if admitted == 0:
        raise LaunchError(
            f"--node-group {group.name}: queue {queue or contract.queues[0]} admits "
            f"{queue_devices(contract, queue):g} Neuron devices, less than one {group.instance_type} "
            f"({group.neuron_devices_per_node}); raise the queue's (or the team's) neuronShare, or name a node group "
            "of a smaller type"
        )
    nodes = min(default, ceiling, ceiling if admitted is None else admitted) if requested is None else requested
    if nodes > ceiling:
        if contract.elastic(group):
            raise LaunchError(
                f"--nodes {nodes}: elastic node group {group.name} grows to {counted(ceiling, 'node')} at most (maxSize); "
                "raise its maxSize or lower --nodes"
            )
        raise LaunchError(
            f"--nodes {nodes}: node group {group.name} runs {counted(ceiling, 'node')} "
            f"({nodes * group.neuron_cores_per_node} cores asked, {ceiling * group.neuron_cores_per_node} "
            "provisioned); scale the node group (desiredSize), make it elastic, or lower --nodes"
        )
    if admitted is not None and nodes > admitted:
        raise LaunchError(
            f"--nodes {nodes}: {nodes * group.neuron_devices_per_node} Neuron devices ({nodes} x {group.instance_type}), "
            f"but queue {queue or contract.queues[0]} admits {admitted * group.neuron_devices_per_node}; lower --nodes, "
            "or raise the queue's (or the team's) neuronShare"
        )
    return nodes


def whole_node_share(group: NodeGroup) -> dict[str, int]:
    """The vCPUs and MB of memory a pod that takes a whole node of ``group`` asks for (the rest runs the node)."""
    return {
        "cpu": max(1, group.vcpus_per_node - RESERVED_VCPUS),
        "mem_mb": int(group.memory_gib_per_node * 1024 * MEMORY_FRACTION),
    }
