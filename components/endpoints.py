"""VPC endpoints: the AWS APIs the nodes and controllers call, reached inside the VPC instead of through NAT.

A Trainium node's first job pulls a training image of many GB from the stack's ECR repository: the registry API
(``ecr.api``), the registry (``ecr.dkr``) and the image layers, which ECR keeps in S3. Through the NAT gateway every
GB is a NAT data-processing charge and shares the gateway's bandwidth (5 Gbps, scaling to 100 Gbps: VPC User Guide,
"NAT gateway basics"); through endpoints, S3 (a gateway endpoint) is free and the rest costs the interface endpoints'
per-GB rate. The list follows the EKS User Guide, "Deploy private clusters with limited internet access" (the nodes'
endpoints) and Karpenter's "Private Clusters" (the controller's). Other traffic (public images, pip, the Hugging Face
hub) keeps the NAT route.

Interface endpoints sit in the Trainium subnet only: they are billed per AZ-hour (AWS PrivateLink pricing), and the
traffic that matters comes from that AZ's Trainium nodes; nodes of the other AZs reach them across AZs through
the same private DNS names. An endpoint carries 10 Gbps per AZ and scales to 100 Gbps (AWS PrivateLink quotas).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.https_groups import https_group


@dataclass(frozen=True)
class EndpointService:
    name: str  # com.amazonaws.<region>.<name>
    callers: str  # who calls it, and why that traffic should stay in the VPC


IMAGE_PULLS = (
    EndpointService("ecr.api", "every node: image pull authorisation (kubelet's ECR credential provider)"),
    EndpointService("ecr.dkr", "every node: image manifests and layer locations"),
)
NODE_SERVICES = (
    *IMAGE_PULLS,
    EndpointService("sts", "every service-account role (IRSA): AssumeRoleWithWebIdentity"),
    EndpointService("ec2", "the VPC CNI (interfaces and addresses) and the EBS CSI driver"),
)
LOG_SERVICES = (EndpointService("logs", "the CloudWatch Observability agents: container logs and metrics"),)
KARPENTER_SERVICES = (
    EndpointService("ssm", "Karpenter: the pinned AMI alias resolves through SSM parameters"),
    EndpointService("sqs", "Karpenter: the interruption queue"),
    EndpointService("eks", "Karpenter: the cluster's endpoint and version at start"),
)


def endpoint_services(*, elastic: bool, cloudwatch: bool) -> tuple[EndpointService, ...]:
    """The interface endpoints a stack needs: the nodes', Karpenter's when a pool is elastic, CloudWatch Logs' when
    the observability add-on ships logs."""
    return (*NODE_SERVICES, *(KARPENTER_SERVICES if elastic else ()), *(LOG_SERVICES if cloudwatch else ()))


@dataclass(frozen=True)
class EndpointsArgs:
    region: str
    vpc_id: pulumi.Input[str]
    vpc_cidr: str
    subnet_id: pulumi.Input[str]  # the Trainium subnet
    route_table_ids: Sequence[pulumi.Input[str]]  # the private subnets', for the S3 gateway endpoint
    services: Sequence[EndpointService]
    tags: Mapping[str, str]


class VpcEndpoints(pulumi.ComponentResource):
    """An S3 gateway endpoint on the private route tables and an interface endpoint per service, with private DNS,
    behind a security group that admits HTTPS from the VPC alone."""

    def __init__(self, name: str, args: EndpointsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:network:VpcEndpoints", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=args.vpc_id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=list(args.route_table_ids),
            tags={**tags, "Name": f"{name}-s3"},
            opts=child,
        )
        group = https_group(
            f"{name}-interface",
            group_name=f"{name}-interface",
            description="HTTPS from the VPC to its interface endpoints",
            vpc_id=args.vpc_id,
            tags=tags,
            parent=self,
            inbound_from=args.vpc_cidr,
        )
        for service in args.services:
            aws.ec2.VpcEndpoint(
                f"{name}-{service.name.replace('.', '-')}",
                vpc_id=args.vpc_id,
                service_name=f"com.amazonaws.{args.region}.{service.name}",
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,  # the SDKs' usual names resolve to the endpoint
                subnet_ids=[args.subnet_id],
                security_group_ids=[group.id],
                tags={**tags, "Name": f"{name}-{service.name}"},
                opts=child,
            )
        self.register_outputs({})
