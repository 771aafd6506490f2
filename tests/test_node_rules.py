"""The node-role rule on hand-built graphs: which roles are node roles, and which policies they may not hold."""

from __future__ import annotations

import json

import pytest

from policies.rules import nodes
from trainium_eks import tokens
from trainium_eks.graph import UNKNOWN, Graph, Node

PULL_ONLY = "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly"


def trust(service_or_federated: dict) -> str:
    statement = {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": service_or_federated}
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def role(assume_role_policy, managed=()) -> Node:
    props = {"assumeRolePolicy": assume_role_policy, "managedPolicyArns": list(managed)}
    return Node("urn:role", tokens.IAM_ROLE, "node", props, provider_props={})


def attachment(arn: str, to: Node) -> Node:
    return Node("urn:att", tokens.IAM_ROLE_POLICY_ATTACHMENT, "att", {"policyArn": arn}, {}, property_dependencies={"role": [to]})


NODE_TRUST = trust({"Service": "ec2.amazonaws.com"})


@pytest.mark.parametrize(
    ("trust_policy", "arn", "fires"),
    [
        (NODE_TRUST, PULL_ONLY, False),
        (NODE_TRUST, "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy", True),
        (NODE_TRUST, "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly", True),
        (trust({"Service": ["lambda.amazonaws.com", "ec2.amazonaws.com"]}), "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy", True),
        (trust({"Federated": "arn:aws:iam::1:oidc-provider/x"}), "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy", False),
        (UNKNOWN, "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy", False),
        ("not json", "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy", False),
    ],
)
def test_node_role_attachments(trust_policy, arn, fires):
    node_role = role(trust_policy)
    violations = list(nodes.node_role_least_privilege(Graph([node_role, attachment(arn, node_role)]), {}))
    assert bool(violations) is fires


def test_managed_policies_listed_on_the_role_count_too():
    violations = list(
        nodes.node_role_least_privilege(Graph([role(NODE_TRUST, ["arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"])]), {})
    )
    assert len(violations) == 1 and "vpc-cni" in violations[0].message
