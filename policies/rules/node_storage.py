"""Trainium nodes keep containerd and the kubelet on their NVMe instance store, not on the gp3 root volume.

A Trainium node pulls a training image of many GB before its first step; on the root volume that pull is held to
the volume's throughput (gp3: 125 MiB/s baseline, EC2 User Guide "General Purpose SSD volumes"), while trn1 and trn1n
carry 474 to 7600 GB of local NVMe that sits unused. A managed group's launch template sets nodeadm's
``localStorage`` strategy in the NodeConfig of its user data; an elastic pool's EC2NodeClass sets
``instanceStorePolicy: RAID0``, from which Karpenter writes the same NodeConfig and counts the array as the node's
ephemeral storage (karpenter-provider-aws v1.14.1, EC2NodeClass ``spec.instanceStorePolicy``).
"""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph.graph import Graph, dig, is_unknown
from plan_graph.trainium_groups import TrainiumGroup, trainium_groups
from policies.rules import Violation, describe
from trainium_eks import nodeadm


def instance_store_raid0(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        if group.template is None or not group.spec.instance_store_gb:
            continue
        setting, found = _instance_store_setting(group)
        if found is None or found in nodeadm.LOCAL_STORAGE_ON_INSTANCE_STORE:
            continue
        yield Violation(
            group.template.urn,
            f"{describe(group.template)} leaves the {group.spec.instance_store_gb} GB NVMe instance store of "
            f"{group.spec.name} unused ({setting}: {found or 'unset'}), so images land on the root volume; set "
            f"{setting} to {nodeadm.RAID0}",
        )


def _instance_store_setting(group: TrainiumGroup) -> tuple[str, str | None]:
    """Where the group states its instance-store strategy, and the strategy ("" when unset; None while unknown)."""
    if group.elastic:
        policy = dig(group.template.props, "spec", "instanceStorePolicy")
        return "instanceStorePolicy", None if is_unknown(policy) else (policy or "")
    data = group.template.props.get("userData")
    if is_unknown(data):
        return "the user data's NodeConfig spec.instance.localStorage.strategy", None
    configs = nodeadm.node_configs(data, base64_encoded=True) if isinstance(data, str) else []
    return "the user data's NodeConfig spec.instance.localStorage.strategy", nodeadm.local_storage_strategy(configs) or ""
