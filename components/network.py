"""Network: the VPC, private subnets in two or more AZs, and the Trainium subnet in the AZ chosen by AZ ID.

AZ names (us-west-2a) are shuffled per AWS account; AZ IDs (usw2-az4) are not, and Trainium capacity is
published per AZ ID. So the Trainium subnet is placed by ID, its name is resolved at deploy time, and the
instance-type offering is confirmed against EC2 before the subnet is created.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.endpoints import EndpointsArgs, EndpointService, VpcEndpoints
from trainium_eks import layout, tokens
from trainium_eks.config import NetworkConfig

# Private subnets take the first half of the VPC CIDR in four equal blocks (up to four AZs), public subnets
# the start of the second half: nodes with 8-16 EFA interfaces and VPC-CNI pod IPs need room, NAT does not.
PRIVATE_SPLIT_BITS = layout.PRIVATE_SUBNET_SPLIT_BITS
PUBLIC_SPLIT_BITS = 6


class DeployTimeCheckError(pulumi.RunError):
    """Raised when AWS, asked at deploy time, contradicts the configuration."""


@dataclass(frozen=True)
class NetworkArgs:
    config: NetworkConfig
    cluster_name: str
    trainium_instance_types: Sequence[str]
    tags: Mapping[str, str]
    region: str
    # The interface endpoints of the VPC the platform creates (components/endpoints.py); an adopted VPC keeps its own.
    endpoint_services: Sequence[EndpointService] = ()


def subnet_cidrs(vpc_cidr: str, az_count: int) -> tuple[list[str], list[str]]:
    """(private, public) CIDRs for ``az_count`` AZs carved from ``vpc_cidr``."""
    private_half, public_half = ipaddress.IPv4Network(vpc_cidr).subnets(prefixlen_diff=1)
    private = list(private_half.subnets(prefixlen_diff=PRIVATE_SPLIT_BITS - 1))[:az_count]
    public = list(public_half.subnets(prefixlen_diff=PUBLIC_SPLIT_BITS - 1))[:az_count]
    return [str(c) for c in private], [str(c) for c in public]


def _confirm_offering(az_id: str, wanted: Sequence[str], offered: Sequence[str]) -> str:
    missing = sorted(set(wanted) - set(offered or ()))
    if missing:
        raise DeployTimeCheckError(
            f"trainium-eks:trainiumAzId: EC2 reports no offering of {', '.join(missing)} in {az_id}; "
            "set trainiumAzId to an AZ ID that offers it (aws ec2 describe-instance-type-offerings "
            "--location-type availability-zone-id)"
        )
    return az_id


def _other_az_ids(trainium_az_id: str, count: int, zone_ids: Sequence[str]) -> list[str]:
    others = sorted(z for z in zone_ids if z != trainium_az_id)
    if len(others) < count:
        raise DeployTimeCheckError(
            f"trainium-eks:availabilityZoneCount: the region has only {len(others) + 1} available AZs; lower the count"
        )
    return others[:count]


class Network(pulumi.ComponentResource):
    """VPC, subnets, routing and NAT; or an existing VPC whose Trainium subnet is checked against the AZ ID."""

    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list]
    public_subnet_ids: pulumi.Output[list]
    trainium_subnet_id: pulumi.Output[str]
    trainium_az_id: pulumi.Output[str]
    trainium_availability_zone: pulumi.Output[str]
    # What nodes need before they boot: a route to the internet through NAT (empty for an adopted VPC).
    private_routing: list[pulumi.Resource]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(tokens.NETWORK_COMPONENT, name, None, opts)
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self)

        offerings = aws.ec2.get_instance_type_offerings_output(
            location_type="availability-zone-id",
            filters=[
                {"name": "location", "values": [cfg.trainium_az_id]},
                {"name": "instance-type", "values": sorted(set(args.trainium_instance_types))},
            ],
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        verified_az_id = offerings.instance_types.apply(
            lambda offered: _confirm_offering(cfg.trainium_az_id, args.trainium_instance_types, offered)
        )
        trainium_zone = aws.get_availability_zone_output(zone_id=verified_az_id, opts=pulumi.InvokeOutputOptions(parent=self))
        self.trainium_az_id = verified_az_id
        self.trainium_availability_zone = trainium_zone.name

        if cfg.existing:
            self._adopt(cfg, verified_az_id)
        else:
            self._create(name, cfg, args, verified_az_id, child)

        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "privateSubnetIds": self.private_subnet_ids,
                "trainiumSubnetId": self.trainium_subnet_id,
                "trainiumAvailabilityZone": self.trainium_availability_zone,
            }
        )

    def _adopt(self, cfg: NetworkConfig, verified_az_id: pulumi.Output[str]) -> None:
        existing = cfg.existing
        subnet = aws.ec2.get_subnet_output(id=existing.trainium_subnet_id, opts=pulumi.InvokeOutputOptions(parent=self))

        def same_az(pair: list) -> str:
            actual, wanted = pair
            if actual != wanted:
                raise DeployTimeCheckError(
                    f"trainium-eks:existingTrainiumSubnetId: {existing.trainium_subnet_id} lies in {actual}, not in "
                    f"trainiumAzId {wanted}; name a subnet in {wanted}"
                )
            return existing.trainium_subnet_id

        self.vpc_id = pulumi.Output.from_input(existing.vpc_id)
        self.private_subnet_ids = pulumi.Output.from_input(list(existing.private_subnet_ids))
        self.public_subnet_ids = pulumi.Output.from_input([])
        self.private_routing = []
        self.trainium_subnet_id = pulumi.Output.all(subnet.availability_zone_id, verified_az_id).apply(same_az)

    def _create(self, name: str, cfg: NetworkConfig, args: NetworkArgs, verified_az_id, child) -> None:
        tags = dict(args.tags)
        cluster_tag = {f"kubernetes.io/cluster/{args.cluster_name}": "shared"}
        zones = aws.get_availability_zones_output(
            state="available",
            filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}],
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        other_az_ids = zones.zone_ids.apply(lambda ids: _other_az_ids(cfg.trainium_az_id, cfg.az_count - 1, ids))
        az_ids = [verified_az_id] + [other_az_ids.apply(lambda ids, i=i: ids[i]) for i in range(cfg.az_count - 1)]
        private_cidrs, public_cidrs = subnet_cidrs(cfg.vpc_cidr, cfg.az_count)

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=cfg.vpc_cidr,
            enable_dns_hostnames=True,  # EKS nodes and FSx mounts resolve by DNS name
            enable_dns_support=True,
            tags={**tags, "Name": f"{args.cluster_name}-vpc"},
            opts=child,
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={**tags, "Name": f"{args.cluster_name}-igw"}, opts=child)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags={**tags, "Name": f"{args.cluster_name}-public"},
            opts=child,
        )

        public_subnets, private_subnets = [], []
        for i, (az_id, private_cidr, public_cidr) in enumerate(zip(az_ids, private_cidrs, public_cidrs, strict=True)):
            role = "trainium" if i == 0 else f"az{i}"
            public = aws.ec2.Subnet(
                f"{name}-public-{role}",
                vpc_id=vpc.id,
                cidr_block=public_cidr,
                availability_zone_id=az_id,
                map_public_ip_on_launch=False,  # only NAT gateways and load balancers live here
                tags={**tags, **cluster_tag, "Name": f"{args.cluster_name}-public-{role}", "kubernetes.io/role/elb": "1"},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(f"{name}-public-{role}", subnet_id=public.id, route_table_id=public_rt.id, opts=child)
            private = aws.ec2.Subnet(
                f"{name}-private-{role}",
                vpc_id=vpc.id,
                cidr_block=private_cidr,
                availability_zone_id=az_id,
                tags={
                    **tags,
                    **cluster_tag,
                    "Name": f"{args.cluster_name}-private-{role}",
                    "kubernetes.io/role/internal-elb": "1",
                },
                opts=child,
            )
            public_subnets.append(public)
            private_subnets.append(private)

        nat_count = cfg.az_count if cfg.nat_gateways == "perAz" else 1
        nat_gateways = []
        for i in range(nat_count):
            eip = aws.ec2.Eip(f"{name}-nat-{i}", domain="vpc", tags={**tags, "Name": f"{args.cluster_name}-nat-{i}"}, opts=child)
            nat_gateways.append(
                aws.ec2.NatGateway(
                    f"{name}-nat-{i}",
                    allocation_id=eip.id,
                    subnet_id=public_subnets[i].id,
                    tags={**tags, "Name": f"{args.cluster_name}-nat-{i}"},
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
                )
            )
        self.private_routing, route_tables = [], []
        for i, private in enumerate(private_subnets):
            role = "trainium" if i == 0 else f"az{i}"
            route_table = aws.ec2.RouteTable(
                f"{name}-private-{role}",
                vpc_id=vpc.id,
                routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat_gateways[i % nat_count].id}],
                tags={**tags, "Name": f"{args.cluster_name}-private-{role}"},
                opts=child,
            )
            route_tables.append(route_table)
            self.private_routing.append(
                aws.ec2.RouteTableAssociation(
                    f"{name}-private-{role}", subnet_id=private.id, route_table_id=route_table.id, opts=child
                )
            )

        VpcEndpoints(
            f"{name}-endpoints",
            EndpointsArgs(
                region=args.region,
                vpc_id=vpc.id,
                vpc_cidr=cfg.vpc_cidr,
                subnet_id=private_subnets[0].id,
                route_table_ids=[table.id for table in route_tables],
                services=args.endpoint_services,
                tags=tags,
            ),
            opts=child,
        )
        self.vpc_id = vpc.id
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private_subnets])
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public_subnets])
        self.trainium_subnet_id = private_subnets[0].id
