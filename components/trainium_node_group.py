"""Trainium node group: placement group, EFA security group, launch template and EKS managed node group.

Built from ``pulumi_aws`` primitives rather than ``eks.ManagedNodeGroup`` so every part is a resource that
tests and policies can read: the launch template attaches one EFA per network card of the instance type in the
EC2-recommended layout from the hardware catalog (an ENA primary interface and EFA-only interfaces, so a node
takes one private IP however many cards it has), the nodes sit in one subnet of one AZ inside a cluster placement
group, and they carry the Neuron taint so that only Neuron workloads land on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.launch_template import LaunchTemplateArgs, node_launch_template
from trainium_eks import layout
from trainium_eks.config import NodeRepair, TrainiumNodeGroupConfig

NEURON_AMI_TYPE = "AL2023_x86_64_NEURON"  # EKS-optimised AL2023 with the Neuron and EFA drivers


@dataclass(frozen=True)
class TrainiumNodeGroupArgs:
    config: TrainiumNodeGroupConfig
    cluster_name: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    cluster_security_group_id: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    tags: Mapping[str, str]
    repair: NodeRepair | None  # EKS node auto repair; None: off
    depends_on: Sequence[pulumi.Resource] = ()


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
    }
    if group.efa_interfaces:
        labels[layout.EFA_PRESENT_LABEL] = "true"
    return labels


class TrainiumNodeGroup(pulumi.ComponentResource):
    """One EKS managed node group of Trainium instances in a single AZ."""

    config: TrainiumNodeGroupConfig
    node_group: aws.eks.NodeGroup
    launch_template: aws.ec2.LaunchTemplate
    placement_group: aws.ec2.PlacementGroup | None
    efa_security_group: aws.ec2.SecurityGroup | None

    def __init__(self, name: str, args: TrainiumNodeGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:compute:TrainiumNodeGroup", name, None, opts)
        group = args.config
        tags = dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)
        self.config = group

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

        self.launch_template = node_launch_template(
            f"{name}-lt",
            LaunchTemplateArgs(
                description=f"{group.instance_type} nodes of {group.name} with {group.efa_interfaces} EFA interfaces",
                root_volume_gib=group.root_volume_gib,
                tags=tags,
                interfaces=group.network_interfaces,
                security_group_ids=(
                    [args.cluster_security_group_id, self.efa_security_group.id] if self.efa_security_group else []
                ),
                placement_group_name=self.placement_group.name if self.placement_group else None,
                capacity_reservation=group.capacity_reservation,
                instance_tags={"Name": f"{group.name}"},
            ),
            parent=self,
        )

        reservation = group.capacity_reservation
        self.node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args.cluster_name,
            node_group_name=pulumi.Output.concat(args.cluster_name, "-", group.name),
            node_role_arn=args.node_role_arn,
            subnet_ids=[args.subnet_id],  # one subnet, one AZ: the placement group and FSx live there
            instance_types=[group.instance_type],
            ami_type=NEURON_AMI_TYPE,
            capacity_type="CAPACITY_BLOCK" if reservation and reservation.kind == "capacity-block" else "ON_DEMAND",
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
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)),
        )
        self.register_outputs({"nodeGroupName": self.node_group.node_group_name})

    def contract_entry(self) -> dict:
        """What a consumer of the platform needs to know about this node group (plain values)."""
        group = self.config
        return {
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
