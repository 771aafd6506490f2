"""Managed Trainium node groups: EFA layout per instance type, placement, single AZ, taints, pinned AMI, launch
template hardening, repair. Elastic pools, and what both kinds share, are in test_elastic_capacity.py."""

from __future__ import annotations

import base64

import pytest
from support import STACKS, by_urn, evaluate, node_group_config, offering, one, platform, settings, sold_as, with_groups

from trainium_eks import catalog, hardware, layout, versions

pytestmark = pytest.mark.stacks

LT = "aws:ec2/launchTemplate:LaunchTemplate"
NG = "aws:eks/nodeGroup:NodeGroup"
PG = "aws:ec2/placementGroup:PlacementGroup"
SG = "aws:ec2/securityGroup:SecurityGroup"
SUBNET = "aws:ec2/subnet:Subnet"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
RELEASE = "kubernetes:helm.sh/v3:Release"


FIXTURE_STACK = "staging"


def plan_with(instance_type: str, **extra):
    return with_groups(instance_type, node_group_config("trn", instance_type, **{**sold_as(instance_type), **extra}))


def trainium_parts(plan):
    lt = one([r for r in plan.find(LT) if "-trn-" in r.name])
    ng = one([r for r in plan.find(NG) if r.name.endswith("-trn-ng")])
    return lt, ng


EFA_TYPES = [t for t in catalog.TRAINIUM_TYPES if catalog.INSTANCE_TYPES[t].supports_efa]


@pytest.mark.parametrize("instance_type", EFA_TYPES)
def test_launch_template_attaches_one_efa_per_network_card_in_the_catalog_layout(instance_type):
    plan = plan_with(instance_type)
    lt, _ = trainium_parts(plan)
    interfaces = lt.inputs["networkInterfaces"]
    spec = catalog.INSTANCE_TYPES[instance_type]

    efa_cards = sorted(int(i["networkCardIndex"]) for i in interfaces if i["interfaceType"] in hardware.EFA_INTERFACE_TYPES)
    assert efa_cards == list(range(spec.network_cards))
    found = {(int(i["networkCardIndex"]), int(i["deviceIndex"]), i["interfaceType"]) for i in interfaces}
    assert found == {(s.network_card_index, s.device_index, s.interface_type) for s in spec.efa_layout()}
    primary = one([i for i in interfaces if (i["networkCardIndex"], i["deviceIndex"]) == (0, 0)])
    assert primary["interfaceType"] != hardware.EFA_ONLY_INTERFACE  # EC2 refuses an EFA-only primary interface
    assert primary["associatePublicIpAddress"] == "false"
    # EFA-only interfaces take no address, so none of them asks for one.
    assert not any("associatePublicIpAddress" in i for i in interfaces if i["interfaceType"] == hardware.EFA_ONLY_INTERFACE)


@pytest.mark.parametrize("instance_type", [t for t in EFA_TYPES if catalog.INSTANCE_TYPES[t].efa_only_interfaces])
def test_efa_only_layout_takes_one_private_ip_per_node_whatever_the_card_count(instance_type):
    plan = plan_with(instance_type)
    lt, _ = trainium_parts(plan)
    with_address = [i for i in lt.inputs["networkInterfaces"] if i["interfaceType"] != hardware.EFA_ONLY_INTERFACE]
    assert len(with_address) == 1  # only the primary ENA interface; the cards' EFA devices are EFA-only
    (entry,) = plan.outputs["trainiumNodeGroups"]
    assert plan.outputs["trainiumPrivateIpsPerNode"] == {entry["name"]: len(with_address)}
    assert entry["efaInterfacesPerNode"] == catalog.INSTANCE_TYPES[instance_type].network_cards


@pytest.mark.parametrize("instance_type", EFA_TYPES)
def test_efa_nodes_share_a_cluster_placement_group_and_a_self_referencing_security_group(instance_type):
    plan = plan_with(instance_type)
    lt, _ = trainium_parts(plan)
    resources = by_urn(plan)
    placement = one([r for r in plan.find(PG) if r.urn in lt.dependencies])
    assert placement.inputs["strategy"] == "cluster"
    assert lt.property_dependencies["placement"] == (placement.urn,)

    efa_group = one([r for r in plan.find(SG) if r.name.endswith("-trn-efa")])
    assert {"self": True, "protocol": "-1"}.items() <= efa_group.inputs["ingress"][0].items()
    assert any(rule.get("self") and rule["protocol"] == "-1" for rule in efa_group.inputs["egress"])
    # Every EFA interface carries the EFA group and the cluster security group (EKS adds neither to custom NICs).
    groups_of_interfaces = {tuple(i["securityGroups"]) for i in lt.inputs["networkInterfaces"]}
    assert len(groups_of_interfaces) == 1
    assert efa_group.urn in lt.property_dependencies["networkInterfaces"]
    assert any(resources[u].type == "eks:index:Cluster" for u in lt.property_dependencies["networkInterfaces"])


def test_instance_type_without_efa_gets_no_interfaces_and_no_placement_group():
    plan = plan_with("trn1.2xlarge")
    lt, ng = trainium_parts(plan)
    assert "networkInterfaces" not in lt.inputs
    assert "placement" not in lt.inputs
    assert not [r for r in plan.find(PG)]
    assert layout.EFA_PRESENT_LABEL not in ng.inputs["labels"]


@pytest.mark.parametrize("stack", STACKS)
def test_node_group_lives_in_the_single_trainium_subnet(stack):
    plan = evaluate(stack)
    trainium_subnet = one([r for r in plan.find(SUBNET) if r.name.endswith("private-trainium")])
    assert trainium_subnet.inputs["availabilityZoneId"] == settings(stack).config["trainium-eks:trainiumAzId"]
    trainium = [ng for ng in plan.find(NG) if ng.inputs["amiType"] == "AL2023_x86_64_NEURON"]
    assert len(trainium) == sum(not group.elastic for group in platform(stack).trainium_node_groups)
    for ng in trainium:
        assert len(ng.inputs["subnetIds"]) == 1
        assert ng.property_dependencies["subnetIds"] == (trainium_subnet.urn,)


def release_version(release: versions.NodeImageRelease) -> str:
    """A managed group's releaseVersion for ``release`` at the stack's Kubernetes version: EKS's AL2023 release versions
    are <kubelet>-<release date> (EKS User Guide, "Amazon EKS optimized Amazon Linux AMI versions")."""
    kubernetes = settings(FIXTURE_STACK).config["trainium-eks:kubernetesVersion"]
    return f"{release.kubelet_versions[kubernetes]}-{release.tag.removeprefix('v')}"


# One EFA type of each generation.
ONE_PER_GENERATION = list({catalog.INSTANCE_TYPES[t].generation: t for t in EFA_TYPES}.values())


@pytest.mark.parametrize("instance_type", ONE_PER_GENERATION)
def test_node_group_runs_its_generations_pinned_neuron_ami_with_the_neuron_taint_and_platform_labels(instance_type):
    plan = plan_with(instance_type)
    _, ng = trainium_parts(plan)
    assert ng.inputs["amiType"] == "AL2023_x86_64_NEURON"
    stack = versions.training_stack_of(catalog.INSTANCE_TYPES[instance_type].generation)
    assert ng.inputs["releaseVersion"] == release_version(versions.NODE_IMAGE_RELEASES[stack.default_node_image_release])
    assert ng.inputs["taints"] == [{"key": layout.NEURON_TAINT_KEY, "value": layout.NEURON_TAINT_VALUE, "effect": "NO_SCHEDULE"}]
    assert ng.inputs["labels"][layout.NODE_ROLE_LABEL] == layout.TRAINIUM_NODE_ROLE
    assert ng.inputs["labels"][layout.NODE_GROUP_LABEL] == "trn"
    assert ng.inputs["labels"][layout.TRAINING_STACK_LABEL] == stack.name
    assert ng.inputs["instanceTypes"] == [instance_type]


def test_scaling_comes_from_the_stack_config():
    plan = with_groups(
        "trn1.32xlarge", {**node_group_config("trn", "trn1.32xlarge"), "minSize": 1, "desiredSize": 3, "maxSize": 5}
    )
    _, ng = trainium_parts(plan)
    assert ng.inputs["scalingConfig"] == {"minSize": 1, "desiredSize": 3, "maxSize": 5}


def test_every_launch_template_requires_imdsv2_and_encrypts_a_gp3_root(stack_plan):
    templates = stack_plan.find(LT)
    assert templates  # the system nodes' at least
    for lt in templates:
        metadata = lt.inputs["metadataOptions"]
        assert metadata["httpTokens"] == "required"
        assert metadata["httpPutResponseHopLimit"] == 1  # no pod but host-network ones reaches IMDS
        (root,) = lt.inputs["blockDeviceMappings"]
        assert root["ebs"]["encrypted"] == "true"
        assert root["ebs"]["volumeType"] == "gp3"
        assert "imageId" not in lt.inputs  # EKS supplies the AMI; the user data adds a NodeConfig to its bootstrap
        if "userData" in lt.inputs:
            assert base64.b64decode(lt.inputs["userData"]).decode().startswith("Content-Type: multipart/mixed")


def test_launch_template_is_the_version_the_node_group_uses():
    plan = plan_with("trn1.32xlarge")
    lt, ng = trainium_parts(plan)
    assert ng.property_dependencies["launchTemplate"] == (lt.urn,)


def odcr(instance_type: str, **extra) -> dict:
    az_id = offering(instance_type)["trainiumAzId"]
    return {"type": "odcr", "id": "cr-0123456789abcdef0", "azId": az_id, "instanceCount": 2, **extra}


def test_on_demand_capacity_reservation_targets_the_reservation():
    reservation = odcr("trn1.32xlarge")
    plan = plan_with("trn1.32xlarge", capacityReservation=reservation)
    lt, ng = trainium_parts(plan)
    target = lt.inputs["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target["capacityReservationId"] == reservation["id"]
    assert "instanceMarketOptions" not in lt.inputs
    assert ng.inputs["capacityType"] == "ON_DEMAND"


def test_capacity_block_uses_the_capacity_block_market():
    reservation = odcr("trn1.32xlarge", type="capacity-block", hourlyUsd=15.0)
    plan = plan_with("trn1.32xlarge", capacityReservation=reservation)
    lt, ng = trainium_parts(plan)
    assert lt.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert ng.inputs["capacityType"] == "CAPACITY_BLOCK"


def karpenter_repairs(plan) -> bool:
    (release,) = [r for r in plan.find(RELEASE) if r.inputs["chart"] == versions.KARPENTER_CHART.chart]
    return release.inputs["values"]["settings"]["featureGates"]["nodeRepair"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_trainium_group_repairs_failed_nodes_within_the_stacks_limits(stack):
    """A managed group by EKS node auto repair within the stack's limits; an elastic pool by Karpenter's node repair."""
    plan = evaluate(stack)
    config = settings(stack).config  # the stack file with Pulumi.yaml's defaults applied, as the CLI hands it over

    def setting(key: str) -> int:
        return int(config[f"trainium-eks:{key}"])

    managed = [n for n in plan.find(NG) if n.inputs["amiType"] == "AL2023_x86_64_NEURON"]
    assert managed or plan.find(NODE_POOL)
    for group in managed:
        assert group.inputs["nodeRepairConfig"] == {
            "enabled": True,
            "maxParallelNodesRepairedCount": setting("nodeRepairMaxParallel"),
            "maxUnhealthyNodeThresholdCount": setting("nodeRepairMaxUnhealthy"),
        }
    if plan.find(NODE_POOL):
        assert karpenter_repairs(plan) is True


@pytest.mark.parametrize("provisioning", ["managed", "karpenter"])
def test_repair_off_is_explicit(provisioning):
    sizes = {"minSize": 0, "desiredSize": 0} if provisioning == "managed" else {}
    group = {"name": "trn", "instanceType": "trn1.32xlarge", "provisioning": provisioning, "maxSize": 2, **sizes}
    plan = with_groups("trn1.32xlarge", group, nodeRepair=False)
    if provisioning == "managed":
        _, ng = trainium_parts(plan)
        assert ng.inputs["nodeRepairConfig"] == {"enabled": False}
    else:
        assert karpenter_repairs(plan) is False
