"""Trainium node group: its cluster placement group and EFA security group, then the nodes in one of two kinds.

- ``managed``: an EC2 launch template and an EKS managed node group of a fixed size.
- ``karpenter`` (elastic): a Karpenter EC2NodeClass and NodePool; no node runs until a job's pods wait for one, and
  an empty node goes after the group's idle time.

Both kinds are built from pulumi_aws and Kubernetes primitives, not ``eks.ManagedNodeGroup``, so every part is a
resource that tests and policies can read, and both render one ``NodeTemplate`` (``components/node_template.py``):
one EFA per network card of the instance type in the EC2-recommended layout from the hardware catalog (an ENA
primary interface and EFA-only interfaces, so a node takes one private IP however many cards it has), one subnet of
one AZ inside the group's cluster placement group, the same security groups, IMDS settings, root volume, labels and
Neuron taint, and one pinned EKS Neuron AMI release (``nodeImageRelease``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import ClusterHandle
from components.node_template import NodeTemplate, ec2_node_class_spec, launch_template, reservation_facts
from trainium_eks import layout, versions
from trainium_eks.config import NodeRepair, TrainiumNodeGroupConfig
from trainium_eks.karpenter_termination import pool_termination_grace_seconds

NEURON_AMI_TYPE = "AL2023_x86_64_NEURON"  # EKS-optimised AL2023 with the Neuron and EFA drivers
# Karpenter's API groups and well-known labels (NodePool and EC2NodeClass CRDs v1.14.1; Karpenter docs,
# "Well-Known Labels").
KARPENTER_NODE_CLASS_API = "karpenter.k8s.aws/v1"
KARPENTER_NODE_POOL_API = "karpenter.sh/v1"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
# Which kind of reservation a reserved node runs in: "default" (an ODCR) or "capacity-block" (karpenter-provider-aws
# v1.14.1 designs/capacity-block-support.md, "API Updates"; the NodePool CRD's CEL rules allow it in requirements).
CAPACITY_RESERVATION_TYPE_LABEL = "karpenter.k8s.aws/capacity-reservation-type"
CAPACITY_BLOCK_RESERVATION_TYPE = "capacity-block"


@dataclass(frozen=True)
class ElasticCapacity:
    """What an elastic (Karpenter) group needs beside the cluster: Karpenter's node role, and Karpenter itself, whose
    release brings the NodePool and EC2NodeClass CRDs and must exist before the pools."""

    node_role_name: pulumi.Input[str]
    controller: pulumi.Resource


@dataclass(frozen=True)
class TrainiumNodeGroupArgs:
    config: TrainiumNodeGroupConfig
    cluster: ClusterHandle
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    az_id: str  # the Trainium subnet's AZ ID
    repair: NodeRepair | None  # EKS node auto repair; None: off
    routing: Sequence[pulumi.Resource] = ()  # nodes join the cluster through NAT: created after it
    elastic: ElasticCapacity | None = None  # required by a karpenter group


def node_repair_config(repair: NodeRepair | None) -> dict:
    """EKS node auto repair: a node whose health condition fails (AcceleratedHardwareReady for Neuron faults, from the
    node monitoring agent) is cordoned, then rebooted or replaced; at most ``max_parallel`` at once, and none while
    more than ``max_unhealthy`` nodes of the group are unhealthy (a fault that broad is not one node's)."""
    if repair is None:
        return {"enabled": False}
    return {
        "enabled": True,
        "max_parallel_nodes_repaired_count": repair.max_parallel,
        "max_unhealthy_node_threshold_count": repair.max_unhealthy,
    }


def node_labels(group: TrainiumNodeGroupConfig) -> dict[str, str]:
    labels = {
        **group.labels,
        layout.NODE_ROLE_LABEL: layout.TRAINIUM_NODE_ROLE,
        layout.NODE_GROUP_LABEL: group.name,
        layout.TRAINING_STACK_LABEL: group.training_stack,
    }
    if group.efa_interfaces:
        labels[layout.EFA_PRESENT_LABEL] = "true"
    return labels


def capacity_requirements(group: TrainiumNodeGroupConfig, region: str) -> list[dict]:
    """Reserved capacity for a group in a reservation, on-demand otherwise; and, for a type the region sells in
    Capacity Blocks only, a node in a block whatever else the node class might select."""
    reserved = group.capacity_reservation is not None
    requirements = [{"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": ["reserved" if reserved else "on-demand"]}]
    if group.spec.block_only(region):
        requirements.append(
            {"key": CAPACITY_RESERVATION_TYPE_LABEL, "operator": "In", "values": [CAPACITY_BLOCK_RESERVATION_TYPE]}
        )
    return requirements


def node_pool_spec(group: TrainiumNodeGroupConfig, node_class: str, az_id: str, region: str) -> dict:
    """The Karpenter NodePool of an elastic group: its nodes, its ceiling, and when a node goes.

    ``limits.cpu`` is maxSize nodes' vCPUs: Karpenter launches no node that would pass a limit (Karpenter docs,
    NodePools "spec.limits"), and a pool of one instance type reaches it at exactly maxSize nodes. How nodes go
    (``trainium_eks.karpenter_termination`` models each way, with the Karpenter lines it follows):
    - nothing voluntary takes a node from a job: ``WhenEmpty`` consolidates a node only once no workload pod runs on
      it, after the idle time (``consolidateAfter``); the launcher's ``karpenter.sh/do-not-disrupt`` pods keep it
      from consolidation; a budget of 0 nodes for ``Drifted`` keeps drift off, which a terminationGracePeriod would
      otherwise let past do-not-disrupt (a drifted node is replaced once idle, by consolidation); ``expireAfter:
      Never``, as expiry is forceful;
    - what Karpenter must take (a Capacity Block's end, an interruption, a scheduled change, the pool's deletion)
      drains each training pod in full: do-not-disrupt pods are never evicted, and without a
      ``terminationGracePeriod`` never deleted, so the instance would go with the pods still training; with one,
      Karpenter deletes each pod its own grace period before the node's termination time
      (``karpenter_termination.pool_termination_grace_seconds``).
    """
    capacity_block = group.capacity_reservation is not None and group.capacity_reservation.kind == "capacity-block"
    return {
        "template": {
            "metadata": {"labels": node_labels(group)},
            "spec": {
                "nodeClassRef": {"group": KARPENTER_NODE_CLASS_API.split("/")[0], "kind": "EC2NodeClass", "name": node_class},
                "requirements": [
                    {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [group.instance_type]},
                    {"key": ZONE_ID_LABEL, "operator": "In", "values": [az_id]},
                    *capacity_requirements(group, region),
                ],
                "taints": [
                    {"key": layout.NEURON_TAINT_KEY, "value": layout.NEURON_TAINT_VALUE, "effect": layout.NEURON_TAINT_EFFECT_K8S}
                ],
                "expireAfter": "Never",
                "terminationGracePeriod": f"{pool_termination_grace_seconds(capacity_block)}s",
            },
        },
        "limits": {"cpu": str(group.scaling.max_size * group.spec.vcpus)},
        "disruption": {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": f"{group.idle_minutes}m",
            "budgets": [{"nodes": "0", "reasons": ["Drifted"]}],
        },
    }


class TrainiumNodeGroup(pulumi.ComponentResource):
    """One group of Trainium nodes in a single AZ: an EKS managed node group, or an elastic Karpenter pool."""

    config: TrainiumNodeGroupConfig
    template: NodeTemplate
    placement_group: aws.ec2.PlacementGroup | None
    efa_security_group: aws.ec2.SecurityGroup | None
    node_group: aws.eks.NodeGroup | None  # managed
    launch_template: aws.ec2.LaunchTemplate | None  # managed
    node_pool: k8s.apiextensions.CustomResource | None  # elastic
    node_class: k8s.apiextensions.CustomResource | None  # elastic

    def __init__(self, name: str, args: TrainiumNodeGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:compute:TrainiumNodeGroup", name, None, opts)
        group = args.config
        tags = dict(args.cluster.tags)
        child = pulumi.ResourceOptions(parent=self)
        self.config = group
        self.node_group = self.launch_template = self.node_pool = self.node_class = None

        self.placement_group = None
        self.efa_security_group = None
        if group.uses_placement_group:
            self.placement_group = aws.ec2.PlacementGroup(
                f"{name}-cluster",
                strategy="cluster",  # lowest-latency, highest-bandwidth placement for collectives over EFA
                tags=tags,
                opts=child,
            )
            # EFA's OS-bypass traffic needs every protocol allowed between the members, both ways.
            self.efa_security_group = aws.ec2.SecurityGroup(
                f"{name}-efa",
                description=f"EFA traffic between {group.name} nodes",
                vpc_id=args.vpc_id,
                ingress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True, "description": "EFA from members"}],
                egress=[
                    {"protocol": "-1", "from_port": 0, "to_port": 0, "self": True, "description": "EFA to members"},
                    {"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"], "description": "Outbound"},
                ],
                tags={**tags, "Name": f"{group.name}-efa"},
                opts=child,
            )

        self.template = NodeTemplate(
            description=f"{group.instance_type} nodes of {group.name} with {group.efa_interfaces} EFA interfaces",
            root_volume_gib=group.root_volume_gib,
            tags=tags,
            interfaces=group.network_interfaces,
            security_group_ids=[
                args.cluster.security_group_id,
                *([self.efa_security_group.id] if self.efa_security_group else []),
            ],
            placement_group_name=self.placement_group.name if self.placement_group else None,
            capacity_reservation=group.capacity_reservation,
            capacity_block_tag_value=layout.capacity_block_tag_value(args.cluster.config_name, group.name)
            if group.elastic
            else None,
            instance_tags={"Name": f"{group.name}"},
            local_storage_raid0=group.spec.instance_store_gb > 0,
            fast_image_pull=versions.NODE_IMAGE_RELEASES[group.node_image.release].fast_image_pull,
        )
        if group.elastic:
            if args.elastic is None:
                raise ValueError(f"node group {group.name} is elastic but the platform installed no Karpenter")
            self._elastic_pool(name, args, args.elastic)
        else:
            self._managed_node_group(name, args)
        self.register_outputs({"name": group.name})

    def _managed_node_group(self, name: str, args: TrainiumNodeGroupArgs) -> None:
        group = args.config
        self.launch_template = launch_template(f"{name}-lt", self.template, parent=self)
        self.node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args.cluster.name,
            node_group_name=pulumi.Output.concat(args.cluster.name, "-", group.name),
            node_role_arn=args.cluster.node_role_arn,
            subnet_ids=[args.subnet_id],  # one subnet, one AZ: the placement group and FSx live there
            instance_types=[group.instance_type],
            ami_type=NEURON_AMI_TYPE,
            version=group.node_image.kubernetes_version,  # stated: an upgrade moves the nodes in a step of their own
            release_version=group.node_image.release_version,  # the stack's pinned node image, never the day's latest
            capacity_type="CAPACITY_BLOCK" if self.template.capacity_block else "ON_DEMAND",
            scaling_config={
                "min_size": group.scaling.min_size,
                "desired_size": group.scaling.desired_size,
                "max_size": group.scaling.max_size,
            },
            update_config={"max_unavailable": 1},
            node_repair_config=node_repair_config(args.repair),
            launch_template={"id": self.launch_template.id, "version": self.launch_template.latest_version.apply(str)},
            labels=node_labels(group),
            taints=[
                {"key": layout.NEURON_TAINT_KEY, "value": layout.NEURON_TAINT_VALUE, "effect": layout.NEURON_TAINT_EFFECT_EKS}
            ],
            tags=dict(args.cluster.tags),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.cluster.node_role_dependencies, *args.routing]),
        )

    def _elastic_pool(self, name: str, args: TrainiumNodeGroupArgs, elastic: ElasticCapacity) -> None:
        group = args.config
        in_cluster = pulumi.ResourceOptions(
            parent=self,
            provider=args.cluster.provider,
            depends_on=[elastic.controller, *args.cluster.node_role_dependencies, *args.routing],
        )
        metadata = {"name": group.name, "labels": {"app.kubernetes.io/part-of": "trainium-eks"}}
        if group.capacity_reservation:  # what the launch template carries as tags, for the policies and the estimate
            metadata["annotations"] = reservation_facts(group.capacity_reservation)
        self.node_class = k8s.apiextensions.CustomResource(
            f"{name}-nodeclass",
            api_version=KARPENTER_NODE_CLASS_API,
            kind="EC2NodeClass",
            metadata=metadata,
            spec=ec2_node_class_spec(
                self.template,
                role=elastic.node_role_name,
                subnet_id=args.subnet_id,
                ami_alias=group.node_image.karpenter_alias,
            ),
            opts=in_cluster,
        )
        self.node_pool = k8s.apiextensions.CustomResource(
            f"{name}-nodepool",
            api_version=KARPENTER_NODE_POOL_API,
            kind="NodePool",
            metadata={"name": group.name, "labels": {"app.kubernetes.io/part-of": "trainium-eks"}},
            spec=node_pool_spec(group, group.name, args.az_id, args.cluster.region),
            opts=pulumi.ResourceOptions(parent=self, provider=args.cluster.provider, depends_on=[self.node_class]),
        )

    def scaling_entry(self) -> dict:
        """How the group scales, for the contract's ``trainiumNodeGroupScaling``."""
        group = self.config
        if group.elastic:
            return {"provisioning": group.provisioning, "idleMinutes": group.idle_minutes}
        return {"provisioning": group.provisioning}

    def contract_entry(self) -> dict:
        """What a consumer of the platform needs to know about this node group (plain values)."""
        group = self.config
        entry = {
            "name": group.name,
            "instanceType": group.instance_type,
            "minSize": group.scaling.min_size,
            "desiredSize": group.scaling.desired_size,
            "maxSize": group.scaling.max_size,
            "neuronDevicesPerNode": group.spec.neuron_devices,
            "neuronCoresPerNode": group.spec.neuron_cores,
            "efaInterfacesPerNode": group.efa_interfaces,
            "vcpusPerNode": group.spec.vcpus,
            "memoryGiBPerNode": group.spec.memory_gib,
            "nodeSelector": {layout.NODE_GROUP_LABEL: group.name},
        }
        if self.template.capacity_block and self.template.capacity_block_tag_value:
            entry["capacityBlockTag"] = {"key": layout.CAPACITY_BLOCK_GROUP_TAG, "value": self.template.capacity_block_tag_value}
        if self.template.capacity_block and group.capacity_reservation.reservation_id:
            entry["capacityBlockId"] = group.capacity_reservation.reservation_id
        return entry
