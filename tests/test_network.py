"""Network: Trainium subnet placed by AZ ID, two or more AZs, NAT layout, EKS tags, deploy-time checks."""

from __future__ import annotations

import ipaddress
import re

import pytest
from support import EXISTING, STACKS, evaluate, one, platform, settings

from components.network import DeployTimeCheckError, subnet_cidrs
from preflight.mocks import PlatformMocks

pytestmark = pytest.mark.stacks

SUBNET = "aws:ec2/subnet:Subnet"
NAT = "aws:ec2/natGateway:NatGateway"
ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
ROUTE_TABLE = "aws:ec2/routeTable:RouteTable"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def private_subnets(plan):
    return [s for s in plan.find(SUBNET) if "-private-" in s.name]


@pytest.mark.parametrize("stack", STACKS)
def test_private_subnets_span_distinct_azs_with_the_trainium_subnet_in_the_configured_az_id(stack):
    plan = evaluate(stack)
    cfg = settings(stack).config
    subnets = private_subnets(plan)
    assert len(subnets) == int(cfg["trainium-eks:availabilityZoneCount"]) >= 2
    assert len({s.inputs["availabilityZoneId"] for s in subnets}) == len(subnets)
    trainium = one([s for s in subnets if s.name.endswith("private-trainium")])
    assert trainium.inputs["availabilityZoneId"] == cfg["trainium-eks:trainiumAzId"]
    assert plan.outputs["trainiumAzId"] == cfg["trainium-eks:trainiumAzId"]
    assert plan.outputs["trainiumSubnetId"] in plan.outputs["privateSubnetIds"]


def test_subnets_carry_the_load_balancer_and_cluster_tags(stack_plan):
    cluster = stack_plan.outputs["clusterName"]
    subnets = stack_plan.find(SUBNET)
    assert bool(subnets) == (platform(stack_plan.stack).network.existing is None)  # an adopted VPC's are its owner's
    for subnet in subnets:
        role = "kubernetes.io/role/internal-elb" if "-private-" in subnet.name else "kubernetes.io/role/elb"
        assert subnet.inputs["tags"][role] == "1"
        assert subnet.inputs["tags"][f"kubernetes.io/cluster/{cluster}"] == "shared"
        assert not subnet.inputs.get("mapPublicIpOnLaunch")


@pytest.mark.parametrize(("layout", "expected"), [("single", 1), ("perAz", 3)])
def test_nat_gateway_layout(layout, expected):
    plan = evaluate("prod", natGateways=layout)
    assert len(plan.find(NAT)) == expected
    routes = [r for r in plan.find("aws:ec2/routeTable:RouteTable") if "-private-" in r.name]
    assert len({r.inputs["routes"][0]["natGatewayId"] for r in routes}) == expected


@pytest.mark.parametrize("cidr", ["10.0.0.0/16", "172.20.0.0/18", "192.168.0.0/20"])
@pytest.mark.parametrize("az_count", [2, 3, 4])
def test_subnet_cidrs_fit_the_vpc_and_do_not_overlap(cidr, az_count):
    private, public = subnet_cidrs(cidr, az_count)
    blocks = [ipaddress.IPv4Network(c) for c in private + public]
    assert len(private) == len(public) == az_count
    assert all(b.subnet_of(ipaddress.IPv4Network(cidr)) for b in blocks)
    assert not any(a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1 :])
    size = lambda block: ipaddress.IPv4Network(block).num_addresses
    assert all(size(p) > size(q) for p, q in zip(private, public, strict=True))


class NothingOffered(PlatformMocks):
    def _offerings(self, args):
        return {"id": self.region, "instanceTypes": [], "locations": [], "locationTypes": []}


def test_deploy_time_offering_check_fails_with_a_clear_message():
    config = platform("staging")
    types = sorted({group.instance_type for group in config.trainium_node_groups})
    offered = f"{', '.join(types)} in {config.network.trainium_az_id}"
    with pytest.raises(DeployTimeCheckError, match=re.escape(f"trainiumAzId: EC2 reports no offering of {offered}")):
        evaluate("staging", mocks_factory=NothingOffered)


def one_group_of(stack: str, **group) -> dict:
    """Overrides that give ``stack`` one group of its own Trainium type, and no teams."""
    instance_type = platform(stack).trainium_node_groups[0].instance_type
    return {"trainiumNodeGroups": [{"name": "trn", "instanceType": instance_type, **group}], "teams": []}


def test_existing_vpc_is_adopted_not_created():
    plan = evaluate("staging", **EXISTING, **one_group_of("staging", provisioning="karpenter", maxSize=2))
    assert not plan.find("aws:ec2/vpc:Vpc") and not plan.find(SUBNET) and not plan.find(NAT)
    assert not plan.find(ENDPOINT), "an adopted VPC's endpoints are its owner's: private DNS names cannot be taken twice"
    assert plan.outputs["vpcId"] == EXISTING["existingVpcId"]
    assert plan.outputs["trainiumSubnetId"] == EXISTING["existingTrainiumSubnetId"]
    node_class = one(plan.find("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"))
    assert node_class.inputs["spec"]["subnetSelectorTerms"] == [{"id": EXISTING["existingTrainiumSubnetId"]}]
    managed = evaluate("prod", **EXISTING, **one_group_of("prod", minSize=2, desiredSize=2, maxSize=4))
    ng = one([r for r in managed.find("aws:eks/nodeGroup:NodeGroup") if r.inputs["amiType"] == "AL2023_x86_64_NEURON"])
    assert ng.inputs["subnetIds"] == [EXISTING["existingTrainiumSubnetId"]]


class SubnetElsewhere(PlatformMocks):
    def _get_subnet(self, args):
        return {"id": args["id"], "availabilityZoneId": "use1-az1"}


def test_existing_trainium_subnet_in_another_az_fails_at_deploy_time():
    with pytest.raises(DeployTimeCheckError, match=r"existingTrainiumSubnetId: subnet-0123456789abcdef0 lies in use1-az1"):
        evaluate("staging", mocks_factory=SubnetElsewhere, **EXISTING)


@pytest.mark.parametrize("stack", STACKS)
def test_image_pulls_and_aws_calls_reach_their_services_inside_the_vpc(stack):
    plan = evaluate(stack)
    region = settings(stack).config["aws:region"]
    endpoints = {e.inputs["serviceName"].removeprefix(f"com.amazonaws.{region}."): e for e in plan.find(ENDPOINT)}
    # S3 (ECR's layers, datasets) through the free gateway endpoint, on every route table that leads to NAT.
    s3 = endpoints.pop("s3")
    nat_tables = [t for t in plan.find(ROUTE_TABLE) if any("natGatewayId" in r for r in t.inputs["routes"])]
    assert s3.inputs["vpcEndpointType"] == "Gateway" and nat_tables
    assert sorted(s3.property_dependencies["routeTableIds"]) == sorted(t.urn for t in nat_tables)
    # The registry, IRSA and the node's own calls, and Karpenter's where a pool is elastic, through interface
    # endpoints in the Trainium subnet, answering on the services' usual names.
    elastic = bool(plan.find("kubernetes:karpenter.sh/v1:NodePool"))
    assert {"ecr.api", "ecr.dkr", "sts", "ec2"} <= set(endpoints)
    assert {"ssm", "sqs", "eks"} <= set(endpoints) if elastic else not {"ssm", "sqs", "eks"} & set(endpoints)
    trainium_subnet = one([s for s in private_subnets(plan) if s.name.endswith("private-trainium")])
    for endpoint in endpoints.values():
        assert endpoint.inputs["vpcEndpointType"] == "Interface" and endpoint.inputs["privateDnsEnabled"] is True
        assert endpoint.property_dependencies["subnetIds"] == (trainium_subnet.urn,)
    # Their security group admits HTTPS from the VPC alone.
    (group_urn,) = {urn for e in endpoints.values() for urn in e.property_dependencies["securityGroupIds"]}
    (rule,) = [r for r in plan.find(INGRESS) if group_urn in r.property_dependencies["securityGroupId"]]
    assert (rule.inputs["fromPort"], rule.inputs["toPort"], rule.inputs["ipProtocol"]) == (443, 443, "tcp")
    assert rule.inputs["cidrIpv4"] == settings(stack).config["trainium-eks:vpcCidr"]
