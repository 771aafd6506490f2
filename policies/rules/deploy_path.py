"""The deploy path: a cluster whose API endpoint is private only can be previewed and updated by the pipeline
only from inside its VPC, so the stack must carry an in-VPC CodeBuild runner that the cluster admits on 443.

Resources are matched through the graph's links (the VPC a runner and the cluster were given, the groups a rule
names), which are known in preview as well; known values (an adopted VPC's ID) are compared when no link exists.
"""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph.graph import Graph, Node, dig, is_unknown
from policies.rules import Violation, as_list, describe
from policies.rules.iam import statements
from policies.rules.network import PortRange, traffic_of
from trainium_eks import tokens

EKS_COMPONENT = tokens.EKS_COMPONENT_CLUSTER
CODEBUILD_PROJECT = tokens.CODEBUILD_PROJECT
HTTPS = PortRange(443, 443)


def _same_vpc(cluster: Node, project: Node) -> bool:
    linked = set(cluster.linked("vpcId", tokens.EC2_VPC))
    if linked:
        return bool(linked & set(project.linked("vpcConfig", tokens.EC2_VPC)))
    cluster_vpc, project_vpc = cluster.props.get("vpcId"), dig(project.props, "vpcConfig", "vpcId")
    return isinstance(cluster_vpc, str) and not is_unknown(cluster_vpc) and cluster_vpc == project_vpc


def admits(graph: Graph, cluster: Node, client_groups: set[Node]) -> bool:
    """Some ingress rule on the cluster's security group lets one of ``client_groups`` in on TCP 443."""
    for rule in graph.of_type(tokens.VPC_SECURITY_GROUP_INGRESS_RULE):
        if cluster not in rule.linked("securityGroupId") or not client_groups & set(rule.linked("referencedSecurityGroupId")):
            continue
        traffic = traffic_of(rule.props)
        if traffic is None:
            return True  # unknown in preview: not judged
        if traffic.protocol in ("tcp", "all") and traffic.ports is not None and traffic.ports.covers(HTTPS):
            return True
    return False


def private_endpoint_has_in_vpc_runner(graph: Graph, config: dict) -> Iterator[Violation]:
    if not config.get("requireInVpcRunner", True):
        return
    for cluster in graph.of_type(EKS_COMPONENT):
        public = cluster.props.get("endpointPublicAccess", True)  # pulumi-eks's default is a public endpoint
        if is_unknown(public) or public:
            continue
        runners = [p for p in graph.of_type(CODEBUILD_PROJECT) if _same_vpc(cluster, p)]
        if not runners:
            yield Violation(
                cluster.urn,
                f"{describe(cluster)} has a private-only API endpoint and no CodeBuild runner in its VPC, so no "
                "pipeline job can reach it; set ciRunnerRepository and ciRunnerConnectionArn (or set "
                "requireInVpcRunner to false for a stack deployed from inside the VPC by other means)",
            )
        elif not any(admits(graph, cluster, set(r.linked("vpcConfig", tokens.EC2_SECURITY_GROUP))) for r in runners):
            yield Violation(
                cluster.urn,
                f"{describe(cluster)} does not admit its runner's security group on TCP 443 "
                f"({', '.join(describe(r) for r in runners)}); add an ingress rule on the cluster security group",
            )


# A role an EC2 instance assumes needs no source condition (the instance profile is the boundary); a role an AWS
# service assumes on a caller's behalf does (IAM User Guide, "The confused deputy problem").
INSTANCE_SERVICES = {"ec2.amazonaws.com", "ec2.amazonaws.com.cn"}
SOURCE_KEYS = ("aws:SourceArn", "aws:SourceAccount")


def service_role_trust_scoped(node: Node, config: dict) -> Iterator[Violation]:
    for statement in statements(node.props.get("assumeRolePolicy")):
        principal = statement.get("Principal")
        named = as_list(principal.get("Service", [])) if isinstance(principal, dict) else []
        services = {service for service in named if isinstance(service, str)}
        if statement.get("Effect") != "Allow" or not services - INSTANCE_SERVICES:
            continue
        conditions = statement.get("Condition")
        operators = conditions.values() if isinstance(conditions, dict) else ()
        keys = {key for operator in operators if isinstance(operator, dict) for key in operator}
        if not keys & set(SOURCE_KEYS):
            yield Violation(
                node.urn,
                f"{describe(node)} lets {', '.join(sorted(services - INSTANCE_SERVICES))} assume it for any caller; add "
                "an aws:SourceArn (the one resource it serves) and aws:SourceAccount condition",
            )
