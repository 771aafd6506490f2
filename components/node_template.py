"""What a node of the platform boots with, whichever way it is provisioned: one description, two renderings.

Managed node groups start from an EC2 launch template (``launch_template``); elastic Trainium pools from a Karpenter
EC2NodeClass (``ec2_node_class_spec``). Both are rendered from the same ``NodeTemplate`` and the constants below, so
the two kinds cannot drift apart on what matters: the network interfaces (the catalog's EFA layout), the security
groups, the cluster placement group, IMDS, the root volume, a capacity reservation and the tags.

IMDSv2 only, hop limit 1: only the node and its host-network pods (aws-node, kube-proxy) reach the instance
metadata service, so no other pod can take the node role's credentials. The pods that read instance data
without host networking, the EBS and FSx CSI node plugins, read it from the Kubernetes API when IMDS is out of
reach (both drivers' metadata code), and the controllers on service-account roles get their region from the
EKS pod identity webhook's AWS_REGION. An encrypted gp3 root volume; tags on instances, volumes and interfaces.

No AMI in the launch template: the managed node group's AMI type and release version let EKS supply the image,
Karpenter resolves its pinned alias. What the nodes' nodeadm adds to its bootstrap is one NodeConfig document
(``node_config``) in a MIME part of the user data, which EKS and Karpenter each merge with their own NodeConfig (the
cluster's details): the instance store as one RAID0 array under containerd's and the kubelet's directories
(``localStorage``), and image layers pulled and unpacked in parallel (``FastImagePull``). Karpenter is also told of
the RAID0 array (``instanceStorePolicy``), so that it counts the instance store as the node's ephemeral storage.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from trainium_eks import layout, nodeadm
from trainium_eks.config import CapacityReservation
from trainium_eks.hardware import NetworkInterfaceSlot

ROOT_DEVICE = "/dev/xvda"  # root device of the EKS-optimised AL2023 AMIs
IMDS_HOP_LIMIT = 1  # see the module docstring
# Instance metadata options in EC2's terms; both renderings spell them from here.
IMDS_ENDPOINT = "enabled"
IMDS_TOKENS = "required"
IMDS_PROTOCOL_IPV6 = "disabled"  # EC2's default, which the launch template leaves unset; Karpenter's CRD spells it
ROOT_VOLUME_TYPE = "gp3"


@dataclass(frozen=True)
class NodeTemplate:
    description: str
    root_volume_gib: int
    tags: Mapping[str, str]
    # The instance type's EFA layout from the catalog (empty: the instance's default interface only).
    interfaces: Sequence[NetworkInterfaceSlot] = ()
    # The node's security groups. A launch template puts them on its interfaces, so a template without interfaces
    # leaves them to EKS (which attaches the cluster security group); an EC2NodeClass selects them itself.
    security_group_ids: Sequence[pulumi.Input[str]] = ()
    placement_group_name: pulumi.Input[str] | None = None
    capacity_reservation: CapacityReservation | None = None
    # The group's layout.CAPACITY_BLOCK_GROUP_TAG value: an EC2NodeClass also selects the Capacity Blocks tagged with it.
    capacity_block_tag_value: str | None = None
    instance_tags: Mapping[str, str] = field(default_factory=dict)
    local_storage_raid0: bool = False  # the type has NVMe instance store: containerd and the kubelet go on it
    fast_image_pull: bool = False  # the pinned node image's nodeadm has the FastImagePull gate

    @property
    def propagated_tags(self) -> dict[str, str]:
        """The tags of every instance, volume and interface the template launches."""
        return {**dict(self.tags), **self.instance_tags}

    @property
    def capacity_block(self) -> bool:
        return self.capacity_reservation is not None and self.capacity_reservation.kind == "capacity-block"


def user_data(template: NodeTemplate) -> str | None:
    """The nodeadm settings of ``template``'s nodes as user data (``trainium_eks.nodeadm``); None: nothing to add."""
    config = nodeadm.node_config(local_storage_raid0=template.local_storage_raid0, fast_image_pull=template.fast_image_pull)
    return nodeadm.user_data(config) if config else None


def reservation_facts(reservation: CapacityReservation | None) -> dict[str, str]:
    """The reservation's AZ ID, instances and Capacity Block price, as the graph carries them (``layout``)."""
    if reservation is None:
        return {}
    facts = {
        layout.CAPACITY_RESERVATION_AZ_TAG: reservation.az_id,
        layout.CAPACITY_RESERVATION_INSTANCES_TAG: str(reservation.instance_count),
    }
    if reservation.hourly_usd is not None:
        facts[layout.CAPACITY_BLOCK_HOURLY_USD_TAG] = f"{reservation.hourly_usd:g}"
    return facts


def _launch_template_interface(slot: NetworkInterfaceSlot, security_group_ids: Sequence[pulumi.Input[str]]) -> dict:
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


def launch_template(name: str, template: NodeTemplate, parent: pulumi.Resource) -> aws.ec2.LaunchTemplate:
    """The EC2 launch template of a managed node group."""
    reservation = template.capacity_reservation
    tags = {**dict(template.tags), **reservation_facts(reservation)}
    interfaces = [_launch_template_interface(slot, template.security_group_ids) for slot in template.interfaces]
    bootstrap = user_data(template)
    return aws.ec2.LaunchTemplate(
        name,
        description=template.description,
        update_default_version=True,
        user_data=base64.b64encode(bootstrap.encode()).decode() if bootstrap else None,  # EC2 takes it base64-encoded
        metadata_options={
            "http_endpoint": IMDS_ENDPOINT,
            "http_tokens": IMDS_TOKENS,
            "http_put_response_hop_limit": IMDS_HOP_LIMIT,
            "instance_metadata_tags": "disabled",
        },
        block_device_mappings=[
            {
                "device_name": ROOT_DEVICE,
                "ebs": {
                    "volume_size": template.root_volume_gib,
                    "volume_type": ROOT_VOLUME_TYPE,
                    "encrypted": "true",
                    "delete_on_termination": "true",
                },
            }
        ],
        network_interfaces=interfaces or None,
        placement={"group_name": template.placement_group_name} if template.placement_group_name else None,
        capacity_reservation_specification=(
            {"capacity_reservation_target": {"capacity_reservation_id": reservation.reservation_id}} if reservation else None
        ),
        instance_market_options={"market_type": "capacity-block"} if template.capacity_block else None,
        tag_specifications=[
            {"resource_type": kind, "tags": template.propagated_tags} for kind in ("instance", "volume", "network-interface")
        ],
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def ec2_node_class_spec(template: NodeTemplate, *, role: pulumi.Input[str], subnet_id: pulumi.Input[str], ami_alias: str) -> dict:
    """The ``spec`` of a Karpenter EC2NodeClass (karpenter.k8s.aws/v1, CRD v1.14.1) for ``template``.

    Karpenter attaches the interfaces as listed (``interface`` or ``efa-only``) and gives every one of them the
    selected security groups; it launches into the selected subnet and placement group only.
    """
    spec: dict = {
        "role": role,  # Karpenter makes the instance profile for it
        "amiSelectorTerms": [{"alias": ami_alias}],
        "subnetSelectorTerms": [{"id": subnet_id}],
        "securityGroupSelectorTerms": [{"id": group_id} for group_id in template.security_group_ids],
        "associatePublicIPAddress": False,
        "metadataOptions": {
            "httpEndpoint": IMDS_ENDPOINT,
            "httpTokens": IMDS_TOKENS,
            "httpPutResponseHopLimit": IMDS_HOP_LIMIT,
            "httpProtocolIPv6": IMDS_PROTOCOL_IPV6,
        },
        "blockDeviceMappings": [
            {
                "deviceName": ROOT_DEVICE,
                "rootVolume": True,
                "ebs": {
                    "volumeSize": f"{template.root_volume_gib}Gi",
                    "volumeType": ROOT_VOLUME_TYPE,
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
        ],
        # Karpenter names each instance after its node (its default Name tag), which says more than the group's name.
        "tags": {key: value for key, value in template.propagated_tags.items() if key != "Name"},
    }
    if template.interfaces:
        spec["networkInterfaces"] = [
            {"networkCardIndex": s.network_card_index, "deviceIndex": s.device_index, "interfaceType": s.interface_type}
            for s in template.interfaces
        ]
    if template.placement_group_name:
        spec["placementGroupSelector"] = {"name": template.placement_group_name}
    if template.local_storage_raid0:
        spec["instanceStorePolicy"] = nodeadm.RAID0
    bootstrap = user_data(template)
    if bootstrap:
        spec["userData"] = bootstrap  # Karpenter takes it as text
    if template.capacity_reservation:
        spec["capacityReservationSelectorTerms"] = capacity_reservation_terms(template)
    return spec


def capacity_reservation_terms(template: NodeTemplate) -> list[dict]:
    """The EC2NodeClass's reservation selector: a Capacity Block group's tag term, so that a block bought and tagged
    later is used with no stack edit, and the ID the stack names. Karpenter ORs the terms, and the CRD (v1.14.1) allows
    no other field beside an ``id`` in one term."""
    reservation = template.capacity_reservation
    terms = []
    if template.capacity_block and template.capacity_block_tag_value:
        terms.append({"tags": {layout.CAPACITY_BLOCK_GROUP_TAG: template.capacity_block_tag_value}})
    if reservation is not None and reservation.reservation_id:
        terms.append({"id": reservation.reservation_id})
    return terms
