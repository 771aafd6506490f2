"""The node rules: the node-role rule on hand-built graphs (which roles are node roles, and which policies they may not
hold); the Trainium node image and training-stack rules on hand-built groups (each group against its own stack, values
unknown in a preview skipped) and on a plan with a trn1 group and a trn2 group (``tests/generation_mutations.py``)."""

from __future__ import annotations

import json

import pytest
from generation_mutations import TRN1_STACK, TRN2_STACK, TWO_GENERATIONS, UNSOURCED, refused_by
from mutation_case import plan_of
from rule_graphs import expect, node
from support import FIXTURE_STACKS

from plan_graph.graph import UNKNOWN, Graph, Node
from plan_graph.trainium_groups import NODE_GROUP, trainium_groups
from policies.rules import nodes, trainium_nodes
from preflight import check
from trainium_eks import layout, tokens, versions

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


# ---- Trainium node image and training stack ---------------------------------------------------------------------


def managed_group(instance_type: str, release, stack, name: str = "ng") -> Node:
    """A managed Trainium group pinning ``release`` (a NodeImageRelease, or a raw releaseVersion) whose nodes are
    labelled with training stack ``stack`` (None: unlabelled)."""
    labels = {layout.NODE_GROUP_LABEL: name} | ({} if stack is None else {layout.TRAINING_STACK_LABEL: stack})
    version = f"1.35.6-{release.tag.removeprefix('v')}" if isinstance(release, versions.NodeImageRelease) else release
    return node(NODE_GROUP, {"instanceTypes": [instance_type], "labels": labels, "releaseVersion": version}, name)


def test_each_group_is_checked_against_its_own_stack():
    trn1 = managed_group("trn1.32xlarge", versions.NODE_IMAGE_RELEASES[TRN1_STACK.default_node_image_release], TRN1_STACK.name)
    trn2 = managed_group("trn2.48xlarge", versions.NODE_IMAGE_RELEASES[TRN2_STACK.default_node_image_release], TRN2_STACK.name)
    graph = Graph([trn1, trn2])
    for rule in (trainium_nodes.node_image_pinned, trainium_nodes.neuron_driver_compatible):
        expect(rule(graph, {}))  # two releases, each its stack's
    trn1.props["releaseVersion"] = trn2.props["releaseVersion"]
    expect(trainium_nodes.neuron_driver_compatible(graph, {}), "'ng' (Trainium group ng) boots node image release")
    trn1.props["releaseVersion"] = "1.35.6-20250101"
    expect(trainium_nodes.neuron_driver_compatible(graph, {}), "does not record")
    trn1.props["releaseVersion"] = ""
    expect(trainium_nodes.node_image_pinned(graph, {}), "releaseVersion unset")


@pytest.mark.parametrize(
    ("stack", "release", "fragments"),
    [
        (TRN2_STACK.name, refused_by(TRN2_STACK), (f"serve training stack {TRN2_STACK.name}",)),
        (TRN2_STACK.name, UNSOURCED, ("no source states",)),
        (UNKNOWN, refused_by(TRN2_STACK), ()),  # which runtime is unknown
        ("no-such-stack", refused_by(TRN2_STACK), ()),  # trainium-training-stack-fits-generation reports it
        (TRN1_STACK.name, refused_by(TRN1_STACK), ()),  # likewise: a stack of another generation
        (TRN2_STACK.name, UNKNOWN, ()),
    ],
)
def test_driver_rule_on_a_trn2_group(stack, release, fragments):
    expect(trainium_nodes.neuron_driver_compatible(Graph([managed_group("trn2.48xlarge", release, stack)]), {}), *fragments)


@pytest.mark.parametrize(
    ("instance_type", "stack", "fragments"),
    [
        ("trn1.32xlarge", TRN1_STACK.name, ()),
        ("trn1n.32xlarge", TRN1_STACK.name, ()),
        ("trn2.48xlarge", TRN2_STACK.name, ()),
        ("trn2.48xlarge", TRN1_STACK.name, (f"which trains trn1, not trn2; give them {TRN2_STACK.name}",)),
        ("trn1.32xlarge", TRN2_STACK.name, (f"not trn1; give them {TRN1_STACK.name}",)),
        ("trn1.32xlarge", None, (f"no {layout.TRAINING_STACK_LABEL} label",)),
        ("trn1.32xlarge", "pytorch-xla-9.99", ("'pytorch-xla-9.99', a training stack trainium_eks/versions.py does not",)),
        ("trn1.32xlarge", UNKNOWN, ()),
    ],
)
def test_training_stack_fits_generation(instance_type, stack, fragments):
    group = managed_group(instance_type, versions.NODE_IMAGE_RELEASES[TRN1_STACK.default_node_image_release], stack)
    expect(trainium_nodes.training_stack_fits_generation(Graph([group]), {}), *fragments)


def test_labels_unknown_in_a_preview_are_skipped():
    group = managed_group("trn2.48xlarge", refused_by(TRN2_STACK), None)
    group.props["labels"] = UNKNOWN
    assert not list(trainium_nodes.training_stack_fits_generation(Graph([group]), {}))
    assert not list(trainium_nodes.neuron_driver_compatible(Graph([group]), {}))


def test_a_trn1_and_a_trn2_group_each_on_its_own_release_pass():
    plan = plan_of("staging", **TWO_GENERATIONS)
    releases = {group.spec.generation: group.pinned_release() for group in trainium_groups(Graph.from_records(plan["resources"]))}
    assert releases.keys() == {"trn1", "trn2"} and releases["trn1"] != releases["trn2"], releases
    # staging's policy config with its node and budget limits lifted: they are set for its one group
    fixture_config = check.load_policy_config("staging", FIXTURE_STACKS / "policy-config" / "staging.json")
    config = fixture_config | {"trainium-node-limit": "disabled", "monthly-cost-budget": "disabled"}
    result = check.check_plan(plan, config, "two-generations.json")
    assert result.violations == [], [(v.policy, v.message) for v in result.violations]
