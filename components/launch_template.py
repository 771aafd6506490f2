"""The hardened EC2 launch template every managed node group of the platform starts from.

IMDSv2 only, hop limit 1: only the node and its host-network pods (aws-node, kube-proxy) reach the instance
metadata service, so no other pod can take the node role's credentials. The pods that read instance data
without host networking, the EBS and FSx CSI node plugins, read it from the Kubernetes API when IMDS is out of
reach (both drivers' metadata code), and the controllers on service-account roles get their region from the
EKS pod identity webhook's AWS_REGION. Also an encrypted gp3 root volume, tags on instances, volumes and
interfaces. No AMI and no user data: the node group's AMI type (AL2023 standard or AL2023 Neuron) lets EKS
supply the image and the nodeadm bootstrap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from trainium_eks import layout
from trainium_eks.catalog import NetworkInterfaceSlot
from trainium_eks.config import CapacityReservation

ROOT_DEVICE = "/dev/xvda"  # root device of the EKS-optimised AL2023 AMIs
IMDS_HOP_LIMIT = 1  # see the module docstring


@dataclass(frozen=True)
class LaunchTemplateArgs:
    description: str
    root_volume_gib: int
    tags: Mapping[str, str]
    # The instance type's EFA layout from the catalog (empty: the instance's default interface only).
    interfaces: Sequence[NetworkInterfaceSlot] = ()
    security_group_ids: Sequence[pulumi.Input[str]] = ()  # only with interfaces (each carries the groups)
    placement_group_name: pulumi.Input[str] | None = None
    capacity_reservation: CapacityReservation | None = None
    instance_tags: Mapping[str, str] = field(default_factory=dict)


def _network_interface(slot: NetworkInterfaceSlot, security_group_ids: Sequence[pulumi.Input[str]]) -> dict:
    interface = {
        "network_card_index": slot.network_card_index,
        "device_index": slot.device_index,
        "interface_type": slot.interface_type,
        "delete_on_termination": "true",
        "security_groups": list(security_group_ids),
    }
    if slot.has_ip_address:  # EFA-only interfaces take no addresses at all, public or private
        interface["associate_public_ip_address"] = "false"
    return interface


def node_launch_template(name: str, args: LaunchTemplateArgs, parent: pulumi.Resource) -> aws.ec2.LaunchTemplate:
    reservation = args.capacity_reservation
    tags = dict(args.tags)
    if reservation:
        tags[layout.CAPACITY_RESERVATION_AZ_TAG] = reservation.az_id
    propagated = {**dict(args.tags), **args.instance_tags}
    return aws.ec2.LaunchTemplate(
        name,
        description=args.description,
        update_default_version=True,
        metadata_options={
            "http_endpoint": "enabled",
            "http_tokens": "required",
            "http_put_response_hop_limit": IMDS_HOP_LIMIT,
            "instance_metadata_tags": "disabled",
        },
        block_device_mappings=[
            {
                "device_name": ROOT_DEVICE,
                "ebs": {
                    "volume_size": args.root_volume_gib,
                    "volume_type": "gp3",
                    "encrypted": "true",
                    "delete_on_termination": "true",
                },
            }
        ],
        network_interfaces=[_network_interface(slot, args.security_group_ids) for slot in args.interfaces] or None,
        placement={"group_name": args.placement_group_name} if args.placement_group_name else None,
        capacity_reservation_specification=(
            {"capacity_reservation_target": {"capacity_reservation_id": reservation.reservation_id}} if reservation else None
        ),
        instance_market_options=(
            {"market_type": "capacity-block"} if reservation and reservation.kind == "capacity-block" else None
        ),
        tag_specifications=[{"resource_type": kind, "tags": propagated} for kind in ("instance", "volume", "network-interface")],
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )
