"""Security groups that carry HTTPS alone: a host that only calls out, and the interface endpoints the VPC calls."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

HTTPS = 443


def https_group(
    name: str,
    *,
    group_name: str,
    description: str,
    vpc_id: pulumi.Input[str],
    tags: Mapping[str, str],
    parent: pulumi.Resource,
    inbound_from: str | None = None,
) -> aws.ec2.SecurityGroup:
    """A security group with one rule, on TCP 443: out to anywhere (``inbound_from`` None: the group of a host that
    only calls out; DNS goes to the VPC resolver, which security groups do not filter), or in from the
    ``inbound_from`` CIDR alone (the group of a service the VPC calls)."""
    child = pulumi.ResourceOptions(parent=parent)
    group = aws.ec2.SecurityGroup(name, description=description, vpc_id=vpc_id, tags={**tags, "Name": group_name}, opts=child)
    rule, cidr, rule_description = (
        (aws.vpc.SecurityGroupEgressRule, "0.0.0.0/0", "HTTPS out")
        if inbound_from is None
        else (aws.vpc.SecurityGroupIngressRule, inbound_from, "HTTPS in")
    )
    rule(
        f"{name}-https",
        security_group_id=group.id,
        ip_protocol="tcp",
        from_port=HTTPS,
        to_port=HTTPS,
        cidr_ipv4=cidr,
        description=rule_description,
        tags=dict(tags),
        opts=child,
    )
    return group
