"""IAM rules and the reading of IAM policy documents: statements, actions as IAM matches them, resources."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from plan_graph.graph import Graph, Node, is_unknown, known
from policies.rules import Violation, as_list, describe, listed
from trainium_eks import tokens

IAM_ROLE = tokens.IAM_ROLE
IAM_POLICY_TYPES = (
    tokens.IAM_ROLE_POLICY,
    tokens.IAM_POLICY,
    tokens.IAM_USER_POLICY,
    tokens.IAM_GROUP_POLICY,
)
ROLE_POLICY_ATTACHMENT = tokens.IAM_ROLE_POLICY_ATTACHMENT


def statements(document) -> list[dict]:
    """The statements of an IAM policy document (JSON text or parsed); none when it is unknown or malformed."""
    if isinstance(document, str):
        if is_unknown(document):
            return []
        try:
            document = json.loads(document)
        except json.JSONDecodeError:
            return []
    statements = document.get("Statement", []) if isinstance(document, dict) else []
    return [statements] if isinstance(statements, dict) else [s for s in statements if isinstance(s, dict)]


def _action_matches(pattern, action: str) -> bool:
    """IAM action matching: case-insensitive, ``*`` any characters, ``?`` one (IAM User Guide, "IAM JSON policy
    elements: Action"). An entry that is not a string is no action IAM would take: read as matching (fail closed)."""
    if not isinstance(pattern, str):
        return True
    wildcard = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(wildcard, action, re.IGNORECASE | re.DOTALL) is not None


def allows(statement: dict, action: str) -> bool:
    """Whether an Allow statement grants ``action``, through Action or NotAction (everything it does not list)."""
    if statement.get("Effect") != "Allow":
        return False
    if "NotAction" in statement:
        return not any(_action_matches(p, action) for p in as_list(statement["NotAction"]))
    return any(_action_matches(p, action) for p in as_list(statement.get("Action", [])))


def resources_of(statement: dict) -> list:
    """The resources a statement names; NotResource (every resource but those listed) reads as ``*``."""
    return ["*"] if "NotResource" in statement else [r for r in as_list(statement.get("Resource", [])) if isinstance(r, str)]


def _every_action(statement: dict) -> bool:
    if "NotAction" in statement:
        return True  # every action but a list
    return any(not isinstance(a, str) or not a.replace(":", "").strip("*") for a in as_list(statement.get("Action", [])))


def iam_no_wildcard_admin(node: Node, config: dict) -> Iterator[Violation]:
    documents = [node.props.get("policy")]
    if node.type == IAM_ROLE:
        documents = [p.get("policy") for p in listed(node.props.get("inlinePolicies")) if isinstance(p, dict) and known(p)]
    for document in documents:
        for statement in statements(document):
            if statement.get("Effect") == "Allow" and _every_action(statement) and "*" in resources_of(statement):
                yield Violation(
                    node.urn,
                    f"{describe(node)} allows every action (Action '*' or a NotAction) on every resource; grant the "
                    "actions the workload needs on the resources it uses",
                )


def _is_irsa_role(role: Node) -> bool:
    return any(
        "sts:AssumeRoleWithWebIdentity" in as_list(s.get("Action", [])) for s in statements(role.props.get("assumeRolePolicy"))
    )


def irsa_no_full_access(graph: Graph, config: dict) -> Iterator[Violation]:
    for attachment in graph.of_type(ROLE_POLICY_ATTACHMENT):
        arn = attachment.props.get("policyArn")
        roles = attachment.linked("role", IAM_ROLE)
        if isinstance(arn, str) and arn.endswith("FullAccess") and any(_is_irsa_role(r) for r in roles):
            yield Violation(
                attachment.urn,
                f"{describe(attachment)} gives the service-account role {roles[0].name} {arn}; "
                "attach a policy scoped to what the controller needs",
            )
    for role in graph.of_type(IAM_ROLE):
        full = [a for a in listed(role.props.get("managedPolicyArns")) if isinstance(a, str) and a.endswith("FullAccess")]
        if full and _is_irsa_role(role):
            yield Violation(role.urn, f"{describe(role)} is a service-account role with {', '.join(full)}; scope it down")
