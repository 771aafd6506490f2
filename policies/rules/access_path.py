"""The access path: people reach a private-only API endpoint through a Systems Manager managed host, which must be
closed to the network (no inbound rule, no key pair, no public address, IMDSv2) and whose sessions IAM limits to
port forwarding on that host.

Security groups are matched through the graph's links (the groups an instance or a rule was given), known in
preview as well.
"""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph.graph import Graph, Node, dig, is_unknown
from policies.rules import Violation, describe, listed
from policies.rules.deploy_path import admits
from policies.rules.iam import IAM_ROLE, allows, resources_of, statements
from trainium_eks import tokens
from trainium_eks.names import whole

INSTANCE = tokens.EC2_INSTANCE
INGRESS_RULE_TYPES = (tokens.VPC_SECURITY_GROUP_INGRESS_RULE, tokens.EC2_SECURITY_GROUP_RULE)
# Session documents that forward a port, and nothing else (Systems Manager User Guide, "Session document schema";
# the AWS-owned documents for port forwarding).
PORT_FORWARDING_DOCUMENTS = ("AWS-StartPortForwardingSession", "AWS-StartPortForwardingSessionToRemoteHost")
# Their ARNs exactly: AWS-owned, so no account ("arn:aws:ssm:us-east-2::document/AWS-StartPortForwardingSession", as
# components/api_access.py grants it), and no wildcard, which would take any document whose name merely ends so.
PORT_FORWARDING_DOCUMENT_ARN = whole(rf"arn:aws[a-z-]*:ssm:[a-z0-9-]+::document/({'|'.join(PORT_FORWARDING_DOCUMENTS)})")
START_SESSION = "ssm:StartSession"
# The strings EC2 reads a boolean from (pulumi-aws sends some as strings, e.g. launch templates; Go's
# strconv.ParseBool): anything else asked for a public address, or would fail the deployment.
FALSE_WORDS = (False, "false", "False", "FALSE", "f", "F", "0")


def _ingress_rules(graph: Graph, group: Node) -> list[Node]:
    rules = [r for r in graph.of_type(*INGRESS_RULE_TYPES) if group in r.linked("securityGroupId")]
    return [r for r in rules if r.type != tokens.EC2_SECURITY_GROUP_RULE or r.props.get("type") == "ingress"]


def instances_closed(graph: Graph, config: dict) -> Iterator[Violation]:
    """Every EC2 instance of the stack takes no inbound connection: no ingress on its security groups, no key pair,
    no public address; its metadata needs IMDSv2 within the instance (hop limit 1); its root volume is encrypted."""
    for instance in graph.of_type(INSTANCE):
        problems = []
        if instance.props.get("keyName"):
            problems.append("has a key pair (remove keyName: sessions need none)")
        public = instance.props.get("associatePublicIpAddress")
        if public is not None and not is_unknown(public) and public not in FALSE_WORDS:
            problems.append(f"has a public address (associatePublicIpAddress {public!r}; set it to false)")
        metadata = instance.props.get("metadataOptions") or {}
        metadata = metadata if isinstance(metadata, dict) or is_unknown(metadata) else {}
        if not is_unknown(metadata) and (
            metadata.get("httpTokens") != "required" or metadata.get("httpPutResponseHopLimit") not in (1, 1.0)
        ):
            problems.append("does not require IMDSv2 with hop limit 1 (metadataOptions)")
        if dig(instance.props, "rootBlockDevice", "encrypted") is not True:
            problems.append("has an unencrypted root volume (rootBlockDevice.encrypted)")
        for group in instance.linked("vpcSecurityGroupIds", tokens.EC2_SECURITY_GROUP):
            inline = group.props.get("ingress")
            rules = _ingress_rules(graph, group)
            if rules or (isinstance(inline, list) and inline):
                named = ", ".join(describe(r) for r in rules) or "inline ingress"
                problems.append(f"admits inbound traffic through {describe(group)} ({named}); remove the ingress")
        for problem in problems:
            yield Violation(instance.urn, f"{describe(instance)} {problem}")


def _documents(node: Node) -> list:
    if node.type == IAM_ROLE:
        return [p.get("policy") for p in listed(node.props.get("inlinePolicies")) if isinstance(p, dict)]
    return [node.props.get("policy")]


def session_access_scoped(node: Node, config: dict) -> Iterator[Violation]:
    """A grant of ssm:StartSession (by name, by a wildcard such as ``ssm:Start*``, or through a NotAction that does not
    list it) names the instances it opens (no wildcard) and port-forwarding documents only: a shell document, or none
    named, would give a shell on the host."""
    for document in _documents(node):
        for statement in statements(document):
            if not allows(statement, START_SESSION):
                continue
            resources = resources_of(statement)
            documents = [r for r in resources if ":document/" in r]
            # a wildcard resource that is no document may stand for any instance
            instances = [r for r in resources if ":instance/" in r or ("*" in r and r not in documents)]
            if any("*" in r for r in instances):
                yield Violation(node.urn, f"{describe(node)} allows ssm:StartSession on every instance; name the host's ARN")
            if not documents or any(not PORT_FORWARDING_DOCUMENT_ARN.match(r) for r in documents):
                yield Violation(
                    node.urn,
                    f"{describe(node)} allows ssm:StartSession with documents beyond port forwarding; list only "
                    f"{' or '.join(PORT_FORWARDING_DOCUMENTS)}, AWS's own (arn:aws:ssm:<region>::document/<name>)",
                )


def private_endpoint_has_access_host(graph: Graph, config: dict) -> Iterator[Violation]:
    """A cluster whose endpoint is private only has an instance in the stack whose security group it admits on 443:
    the host people's port forwarding goes through."""
    if not config.get("requireApiAccessHost", True):
        return
    for cluster in graph.of_type(tokens.EKS_COMPONENT_CLUSTER):
        public = cluster.props.get("endpointPublicAccess", True)  # pulumi-eks's default is a public endpoint
        if is_unknown(public) or public:
            continue
        groups = {g for i in graph.of_type(INSTANCE) for g in i.linked("vpcSecurityGroupIds", tokens.EC2_SECURITY_GROUP)}
        if not admits(graph, cluster, groups):
            yield Violation(
                cluster.urn,
                f"{describe(cluster)} has a private-only API endpoint and admits no access host on TCP 443, so no one "
                "outside the VPC can submit a job; keep the platform's API access host (or set requireApiAccessHost to "
                "false for a network with its own way in, such as a VPN)",
            )
