"""The rules of ``trainiumNodeGroups``: sizes per kind (managed or elastic), EFA, the AZ offering, a capacity
reservation, EKS's name limits, and the one pinned node image every group boots."""

from __future__ import annotations

from types import MappingProxyType

from trainium_eks import catalog, versions
from trainium_eks.config import platform as p
from trainium_eks.config.checks import NODE_GROUP_NAME_MAX, Key, check, scaling
from trainium_eks.config.stack import StackInput
from trainium_eks.config.stack_items import DEFAULT_IDLE_MINUTES, NodeGroupInput


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


def _node_image(s: StackInput, key: Key) -> p.NodeImage:
    """The pinned release at the Trainium groups' version; it must also have a build for the control plane's, which
    elastic pools follow."""
    version = node_kubernetes_version(s, key, "trainiumNodeKubernetesVersion", s.trainium_node_kubernetes_version)
    release = versions.NODE_IMAGE_RELEASES[s.node_image_release]
    for needed in dict.fromkeys((s.kubernetes_version, version)):
        check(
            needed in release.kubelet_versions,
            key("nodeImageRelease"),
            f"{release.tag} has no Kubernetes {needed} build",
            "pin a release built for it: "
            + ", ".join(r.tag for r in versions.NODE_IMAGE_RELEASES.values() if needed in r.kubelet_versions),
        )
    return p.NodeImage(release.tag, version, release.kubelet_versions[version])


def node_groups(s: StackInput, cluster_name: str, region: str, key: Key) -> tuple[p.TrainiumNodeGroupConfig, ...]:
    image = _node_image(s, key)
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
        groups.append(_node_group(group, s.trainium_az_id, region, image, at))
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


def _node_group(group: NodeGroupInput, az_id: str, region: str, node_image: p.NodeImage, at: Key) -> p.TrainiumNodeGroupConfig:
    spec = catalog.INSTANCE_TYPES[group.instance_type]
    offered = catalog.az_ids_offering(group.instance_type, region)
    check(
        spec.offered_in(region, az_id),
        at("instanceType"),
        f"{group.instance_type} is not offered in {az_id} ({region})",
        f"set trainiumAzId to one of {', '.join(offered)}" if offered else "pick a region that offers it",
    )
    group_scaling = _group_scaling(group, at)
    efa = spec.supports_efa if group.efa is None else group.efa
    check(
        not efa or spec.supports_efa,
        at("efa"),
        f"{group.instance_type} has no EFA support",
        "remove efa (or set it to false), or use an EFA-capable type such as trn1.32xlarge",
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
            f"{group_scaling.max_size} is above the reservation's {r.instance_count} instances",
            "lower maxSize to the reservation's instance count (a targeted reservation launches no more)",
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
        group.name,
        group.instance_type,
        group_scaling,
        efa,
        group.root_volume_gib,
        MappingProxyType(dict(group.labels)),
        reservation,
        node_image,
        group.provisioning,
        (group.idle_minutes or DEFAULT_IDLE_MINUTES) if group.provisioning == p.KARPENTER else None,
    )
