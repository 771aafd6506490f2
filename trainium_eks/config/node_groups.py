"""The rules of ``trainiumNodeGroups``: sizes per kind (managed or elastic), EFA, the AZ offering, a capacity
reservation, EKS's name limits, and each group's training stack and the pinned node image its nodes boot."""

from __future__ import annotations

from types import MappingProxyType

from trainium_eks import catalog, versions
from trainium_eks.config import platform as p
from trainium_eks.config.checks import NODE_GROUP_NAME_MAX, Key, check, scaling
from trainium_eks.config.stack import StackInput
from trainium_eks.config.stack_items import DEFAULT_IDLE_MINUTES, NodeGroupInput
from trainium_eks.wording import counted


def node_kubernetes_version(s: StackInput, key: Key, version_key: str, held_at: str) -> str:
    """A node kind's Kubernetes version (``version_key``; "" follows the cluster's). EKS refuses nodes newer than the
    control plane (EKS User Guide, "Update a managed node group for your cluster": "The version that you update to
    can't be greater than the control plane's version")."""
    version = held_at or s.kubernetes_version
    check(
        versions.minor_version(version) <= versions.minor_version(s.kubernetes_version),
        key(version_key),
        f"{version} is newer than kubernetesVersion {s.kubernetes_version}",
        f'upgrade the control plane first: set kubernetesVersion to {version}, or this key to "" or an older version',
    )
    return version


def _node_image(s: StackInput, tag: str, version: str, at: Key) -> p.NodeImage:
    """The group's pinned release at the Trainium groups' version; it must also have a build for the control plane's,
    which elastic pools follow."""
    release = versions.NODE_IMAGE_RELEASES[tag]
    for needed in dict.fromkeys((s.kubernetes_version, version)):
        check(
            needed in release.kubelet_versions,
            at("nodeImageRelease"),
            f"{release.tag} has no Kubernetes {needed} build",
            "pin a release built for it: "
            + ", ".join(r.tag for r in versions.NODE_IMAGE_RELEASES.values() if needed in r.kubelet_versions),
        )
    return p.NodeImage(release.tag, version, release.kubelet_versions[version])


def _training_stack(group: NodeGroupInput, at: Key) -> versions.TrainingStack:
    """The group's training stack: the one it names, which must train on its type's generation, or its generation's."""
    generation = catalog.INSTANCE_TYPES[group.instance_type].generation
    if group.training_stack is None:
        return versions.training_stack_of(generation)
    stack = versions.TRAINING_STACKS[group.training_stack]
    check(
        generation in stack.generations,
        at("trainingStack"),
        f"{stack.name} does not train on {group.instance_type} ({generation}; it trains on {', '.join(stack.generations)})",
        f"remove it: a {generation} group trains with {versions.training_stack_of(generation).name}",
    )
    return stack


def _release_problem(stack: versions.TrainingStack, tag: str) -> str | None:
    """Why a group of ``stack`` may not boot ``tag``; None when it may."""
    release = versions.NODE_IMAGE_RELEASES.get(tag)
    if tag.lower().endswith("latest"):
        return "'latest' floats: a new node would get whatever driver EKS published that day"
    if release is None:
        return f"'{tag}' is not a node image release of trainium_eks/versions.py"
    if release.neuron_driver is None:
        return f"no source states {tag}'s Neuron driver, so no training stack is known to run on it"
    if not stack.runtime.runs_on(release.neuron_driver):
        return (
            f"{tag} boots Neuron driver {release.neuron_driver}, on which {stack.name}'s runtime {stack.runtime.library} "
            f"does not initialise (it runs on drivers {stack.runtime.drivers})"
        )
    return None


def _release_check(stack: versions.TrainingStack, tag: str, at: Key) -> None:
    """A group's release: pinned, recorded, with a sourced driver its training stack's runtime initialises on. The fix
    names only the releases this group's stack runs on: another generation's stack may take others."""
    problem = _release_problem(stack, tag)
    fits = versions.releases_running(stack.runtime)
    fix = f"pin one of {', '.join(fits)}" if fits else f"record a release whose driver {stack.name}'s runtime runs on"
    check(problem is None, at("nodeImageRelease"), problem or "", f"{fix} (trainium_eks/versions.py NODE_IMAGE_RELEASES)")


def node_groups(s: StackInput, cluster_name: str, region: str, key: Key) -> tuple[p.TrainiumNodeGroupConfig, ...]:
    version = node_kubernetes_version(s, key, "trainiumNodeKubernetesVersion", s.trainium_node_kubernetes_version)
    groups, names = [], set()
    for index, group in enumerate(s.trainium_node_groups):

        def at(name: str, index=index) -> str:
            return f"{key('trainiumNodeGroups')}[{index}].{name}"

        check(group.name not in names, at("name"), f"'{group.name}' is used twice", "give each node group its own name")
        names.add(group.name)
        check(
            len(f"{cluster_name}-{group.name}") <= NODE_GROUP_NAME_MAX,
            at("name"),
            f"'{cluster_name}-{group.name}' is longer than EKS's {NODE_GROUP_NAME_MAX} characters",
            "use a shorter node group (or stack) name",
        )
        stack = _training_stack(group, at)
        tag = group.node_image_release or stack.default_node_image_release
        _release_check(stack, tag, at)
        groups.append(_node_group(group, s.trainium_az_id, region, _node_image(s, tag, version, at), stack, at))
    return tuple(groups)


def _group_scaling(group: NodeGroupInput, at: Key) -> p.Scaling:
    """A managed group's three sizes in order; an elastic group's maxSize alone (Karpenter starts it at zero)."""
    if group.provisioning == p.MANAGED:
        for size, value in (("minSize", group.min_size), ("desiredSize", group.desired_size)):
            check(value is not None, at(size), "missing", f"add {size} (a managed node group runs a fixed number of nodes)")
        check(
            group.idle_minutes is None,
            at("idleMinutes"),
            "set on a managed node group, whose nodes run until it is scaled",
            "remove it, or set provisioning: karpenter",
        )
        return scaling(at, group.min_size, group.desired_size, group.max_size)
    for size, value in (("minSize", group.min_size), ("desiredSize", group.desired_size)):
        check(
            not value,
            at(size),
            f"{value} on an elastic (karpenter) group, which holds no node while no job waits",
            f"remove {size}; maxSize caps the pool",
        )
    return scaling(at, 0, 0, group.max_size)


def _node_group(
    group: NodeGroupInput,
    az_id: str,
    region: str,
    node_image: p.NodeImage,
    stack: versions.TrainingStack,
    at: Key,
) -> p.TrainiumNodeGroupConfig:
    spec = catalog.INSTANCE_TYPES[group.instance_type]
    block = group.capacity_reservation is not None and group.capacity_reservation.type == "capacity-block"
    check(
        block or not spec.block_only(region),
        at("capacityReservation"),
        f"{group.instance_type} is sold in {region} in Capacity Blocks only",
        "buy one (aws ec2 describe-capacity-block-offerings) and set capacityReservation: type capacity-block, id, azId, "
        "instanceCount, hourlyUsd",
    )
    in_blocks = [
        f"{t.name} in {', '.join(t.capacity_block_regions)}" for t in catalog.INSTANCE_TYPES.values() if t.capacity_block_regions
    ]
    check(
        not block or region in spec.capacity_block_regions,
        at("capacityReservation.type"),
        f"EC2 sells no Capacity Blocks of {group.instance_type} in {region} (catalog.py: {'; '.join(in_blocks)})",
        "use type odcr without hourlyUsd, or a type sold in blocks here",
    )
    offered = catalog.az_ids_offering(group.instance_type, region)
    sold_in = [r for r in catalog.REGIONS if spec.az_ids.get(r) or r in spec.capacity_block_regions]
    check(
        spec.offered_in(region, az_id, capacity_block=block),
        at("instanceType"),
        f"{group.instance_type} is not offered in {az_id} ({region})",
        f"set trainiumAzId to one of {', '.join(offered)}" if offered else f"use a region that sells it: {', '.join(sold_in)}",
    )
    group_scaling = _group_scaling(group, at)
    efa = spec.supports_efa if group.efa is None else group.efa
    check(
        not efa or spec.supports_efa,
        at("efa"),
        f"{group.instance_type} has no EFA support",
        "remove efa (or set it to false), or use an EFA-capable type: "
        + ", ".join(name for name, it in catalog.INSTANCE_TYPES.items() if it.supports_efa),
    )
    check(
        efa or not spec.supports_efa,
        at("efa"),
        f"{group.instance_type} is EFA-capable and must run with EFA",
        "remove efa: false; multi-node training over Neuron collectives needs EFA",
    )
    reservation = None
    if group.capacity_reservation is not None:
        r = group.capacity_reservation
        check(
            r.az_id == az_id,
            at("capacityReservation.azId"),
            f"{r.az_id} differs from trainiumAzId {az_id}",
            "use a reservation in the Trainium AZ, or move trainiumAzId to the reservation's AZ",
        )
        block = r.type == "capacity-block"
        check(
            r.id is not None or (block and group.provisioning == p.KARPENTER),
            at("capacityReservation.id"),
            "missing: a managed group's launch template targets one reservation by its ID"
            if block
            else "missing: an On-Demand Capacity Reservation is selected by its ID",
            "add the reservation's cr-... ID (only a karpenter group's Capacity Blocks may be selected by their tag alone)",
        )
        check(
            (r.hourly_usd is not None) == block,
            at("capacityReservation.hourlyUsd"),
            "missing for a Capacity Block" if block else "set for an On-Demand Capacity Reservation",
            "give the block's price per instance-hour (its upfront fee / instances / hours, as "
            "describe-capacity-block-offerings quotes it)"
            if block
            else "remove it: an ODCR is billed at the on-demand rate",
        )
        check(
            group_scaling.max_size <= r.instance_count,
            at("maxSize"),
            f"{group_scaling.max_size} is above the reservation's {counted(r.instance_count, 'instance')}",
            "lower maxSize to the reservation's instance count (a targeted reservation launches no more; with "
            "several tagged blocks, instanceCount is what the blocks running at once hold)",
        )
        reservation = p.CapacityReservation(r.type, r.id, r.az_id, r.instance_count, r.hourly_usd)
    if group.provisioning == p.KARPENTER and efa:
        # Karpenter's EC2NodeClass takes interface types "interface" and "efa-only" only (CRD v1.14.1).
        check(
            spec.efa_only_interfaces,
            at("provisioning"),
            f"{group.instance_type}'s EFA layout needs EFA-with-ENA interfaces, which Karpenter cannot attach",
            "use provisioning: managed for this type",
        )
    return p.TrainiumNodeGroupConfig(
        name=group.name,
        instance_type=group.instance_type,
        scaling=group_scaling,
        efa=efa,
        root_volume_gib=group.root_volume_gib,
        labels=MappingProxyType(dict(group.labels)),
        capacity_reservation=reservation,
        node_image=node_image,
        training_stack=stack.name,
        provisioning=group.provisioning,
        idle_minutes=(group.idle_minutes or DEFAULT_IDLE_MINUTES) if group.provisioning == p.KARPENTER else None,
    )
