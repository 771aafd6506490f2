"""What the nodes' own role may do: join the cluster, pull images and be managed. The VPC CNI's permissions
belong to the vpc-cni add-on's service-account role, and wider registry access to no node at all, since every
pod that reaches the instance metadata service could use them.
"""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph.graph import Graph, Node
from policies.rules import Violation, as_list, describe, listed
from policies.rules.iam import IAM_ROLE, ROLE_POLICY_ATTACHMENT, statements

EC2_SERVICE = "ec2.amazonaws.com"
# Managed policies a node role must not hold, with what to do instead.
NOT_ON_NODES = {
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy": "give it to the vpc-cni add-on's service-account role",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly": "use AmazonEC2ContainerRegistryPullOnly",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPowerUser": "use AmazonEC2ContainerRegistryPullOnly",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryFullAccess": "use AmazonEC2ContainerRegistryPullOnly",
}


def _is_node_role(role: Node) -> bool:
    """A role EC2 instances assume."""
    for statement in statements(role.props.get("assumeRolePolicy")):
        principal = statement.get("Principal")
        services = as_list(principal.get("Service", [])) if isinstance(principal, dict) else []
        if EC2_SERVICE in services:
            return True
    return False


def node_role_least_privilege(graph: Graph, config: dict) -> Iterator[Violation]:
    for attachment in graph.of_type(ROLE_POLICY_ATTACHMENT):
        arn = attachment.props.get("policyArn")
        if isinstance(arn, str) and arn in NOT_ON_NODES and any(_is_node_role(r) for r in attachment.linked("role", IAM_ROLE)):
            yield Violation(attachment.urn, f"{describe(attachment)} gives the node role {arn}; {NOT_ON_NODES[arn]}")
    for role in graph.of_type(IAM_ROLE):
        held = [a for a in listed(role.props.get("managedPolicyArns")) if isinstance(a, str) and a in NOT_ON_NODES]
        if held and _is_node_role(role):
            yield Violation(role.urn, f"{describe(role)} is a node role with {', '.join(held)}; {NOT_ON_NODES[held[0]]}")
