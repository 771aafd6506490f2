"""Image pulls and S3 reads stay inside the VPC the platform creates: an S3 gateway endpoint on every route table that
sends the internet to a NAT gateway, and ECR's two interface endpoints with private DNS (components/endpoints.py).

Without them a node pulls its training image of many GB through the NAT gateway, billed per GB it processes (0.045
USD, VPC pricing) and sharing its bandwidth, and ECR's layers, which ECR keeps in S3, take the same route.
"""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph.graph import Graph, Node, dig, is_unknown, vpc_endpoint_service
from plan_graph.trainium_groups import trainium_groups
from policies.rules import Violation, describe
from trainium_eks import tokens

IMAGE_PULL_SERVICES = ("ecr.api", "ecr.dkr")


def _nat_route_tables(graph: Graph, vpc: Node) -> list[Node]:
    tables = [t for t in graph.of_type(tokens.EC2_ROUTE_TABLE) if vpc in t.linked("vpcId")]
    return [t for t in tables if any(isinstance(r, dict) and r.get("natGatewayId") for r in _listed(t.props.get("routes")))]


def _listed(value) -> list:
    return value if isinstance(value, list) else []


def image_pulls_through_endpoints(graph: Graph, config: dict) -> Iterator[Violation]:
    """One finding per VPC, naming everything that sends pulls through NAT."""
    if not trainium_groups(graph):
        return
    for vpc in graph.of_type(tokens.EC2_VPC):
        endpoints = [e for e in graph.of_type(tokens.EC2_VPC_ENDPOINT) if vpc in e.linked("vpcId")]
        if any(is_unknown(e.props.get("serviceName")) for e in endpoints):
            continue  # a preview that does not know the services yet (a null or malformed one is no service)
        gateway = [e for e in endpoints if vpc_endpoint_service(e) == "s3" and e.props.get("vpcEndpointType") == "Gateway"]
        routed = {id(t) for e in gateway for t in e.linked("routeTableIds")}
        unrouted = [t for t in _nat_route_tables(graph, vpc) if id(t) not in routed]
        problems = []
        if not gateway or unrouted:
            problems.append(
                "sends S3 traffic (ECR's image layers, datasets) through NAT from "
                f"{', '.join(t.name for t in unrouted) or 'its private route tables'}; add an S3 gateway endpoint on every "
                "route table with a NAT route"
            )
        missing = [
            service
            for service in IMAGE_PULL_SERVICES
            if not any(
                vpc_endpoint_service(e) == service
                and e.props.get("vpcEndpointType") == "Interface"
                and (dig(e.props, "privateDnsEnabled") is True or is_unknown(dig(e.props, "privateDnsEnabled")))
                for e in endpoints
            )
        ]
        if missing:
            problems.append(
                f"has no {' or '.join(missing)} interface endpoint with private DNS, so image pulls go through NAT; add "
                + ", ".join(f"com.amazonaws.<region>.{service}" for service in missing)
                + " (privateDnsEnabled: true)"
            )
        if problems:
            yield Violation(vpc.urn, f"{describe(vpc)} {'; it '.join(problems)}")
