"""The mutation cases of the teams' workspaces (staging declares nlp and vision): a team namespace without Pod
Security, a grant to a team's principal beyond its namespace, a team volume at the file system's root or open to any
claim, and quotas above the capacity the node groups provide.

``tests/test_policies.py`` merges them with the other tables.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from policy_mutations import Case, edit, resource, without

from trainium_eks import layout, tokens

TEAM = "nlp"
NAMESPACE_RESOURCE = f"teams-{TEAM}-namespace"
MEMBERS = f"teams-{TEAM}-members"


def _member_arn(plan: dict) -> str:
    return resource(plan, tokens.EKS_ACCESS_ENTRY, f"teams-{TEAM}-member-0")["inputs"]["principalArn"]


def _added(plan: dict, like: dict, type_: str, name: str, inputs: dict) -> None:
    """A resource of ``type_`` next to ``like`` (same parent and provider), as a hand-written program would add it."""
    record = copy.deepcopy(like)
    record.update(
        type=type_,
        name=name,
        urn=like["urn"].rsplit("$", 1)[0] + f"${type_}::{name}",
        inputs=inputs,
        dependencies=[],
        propertyDependencies={key: [] for key in inputs},
    )
    plan["resources"].append(record)


def _access_policy(scope: dict) -> Callable[[dict], None]:
    def mutate(plan: dict) -> None:
        entry = resource(plan, tokens.EKS_ACCESS_ENTRY, f"teams-{TEAM}-member-0")
        inputs = {
            "clusterName": entry["inputs"]["clusterName"],
            "principalArn": _member_arn(plan),
            "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy",
            "accessScope": scope,
        }
        _added(plan, entry, tokens.EKS_ACCESS_POLICY_ASSOCIATION, "nlp-edit", inputs)

    return mutate


def _group_binding(type_: str, namespace: str | None) -> Callable[[dict], None]:
    def mutate(plan: dict) -> None:
        binding = resource(plan, tokens.K8S_ROLE_BINDING, MEMBERS)
        inputs = copy.deepcopy(binding["inputs"])
        inputs["metadata"] = {"name": "nlp-extra"} | ({"namespace": namespace} if namespace else {})
        inputs["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}
        _added(plan, binding, type_, "nlp-extra", inputs)

    return mutate


TEAM_CASES: dict[str, list[Case]] = {
    "namespace-pod-security": [
        Case(
            "team-unlabelled",
            "staging",
            edit(tokens.K8S_NAMESPACE, NAMESPACE_RESOURCE, "metadata", "labels", "pod-security.kubernetes.io/enforce"),
            (NAMESPACE_RESOURCE, "label it baseline or restricted"),
            tokens.K8S_NAMESPACE,
            1,
        )
    ],
    "team-access-namespaced": [
        Case(
            "cluster-scoped-policy",
            "staging",
            _access_policy({"type": "cluster"}),
            ("AmazonEKSEditPolicy", "beyond the namespace team-nlp"),
            tokens.EKS_ACCESS_POLICY_ASSOCIATION,
            1,
        ),
        Case(
            "other-namespace-policy",
            "staging",
            _access_policy({"type": "namespace", "namespaces": ["team-nlp", "team-vision"]}),
            ("beyond the namespace team-nlp",),
            tokens.EKS_ACCESS_POLICY_ASSOCIATION,
            1,
        ),
        Case(
            "cluster-role-binding",
            "staging",
            _group_binding(tokens.K8S_CLUSTER_ROLE_BINDING, None),
            ("cluster-wide",),
            tokens.K8S_CLUSTER_ROLE_BINDING,
            1,
        ),
        Case(
            "binding-in-another-team",
            "staging",
            _group_binding(tokens.K8S_ROLE_BINDING, layout.team_namespace("vision")),
            ("team-vision", "team-nlp only"),
            tokens.K8S_ROLE_BINDING,
            1,
        ),
        Case(
            "masters-group",
            "staging",
            edit(
                tokens.EKS_ACCESS_ENTRY,
                f"teams-{TEAM}-member-0",
                "kubernetesGroups",
                to=[layout.team_group(TEAM), "system:masters"],
            ),
            ("system:masters",),
            tokens.EKS_ACCESS_ENTRY,
            1,
        ),
    ],
    "team-volume-own-directory": [
        Case(
            "file-system-root",
            "staging",
            edit(tokens.K8S_PERSISTENT_VOLUME, f"teams-{TEAM}-fsx", "spec", "csi", "volumeAttributes", "mountname", to="fsx"),
            ("not the team's directory", layout.team_directory(TEAM)),
            tokens.K8S_PERSISTENT_VOLUME,
            1,
        ),
        Case(
            "any-claim",
            "staging",
            edit(tokens.K8S_PERSISTENT_VOLUME, f"teams-{TEAM}-fsx", "spec", "claimRef"),
            ("not reserved for its namespace",),
            tokens.K8S_PERSISTENT_VOLUME,
            1,
        ),
        Case(
            "other-team-claim",
            "staging",
            edit(tokens.K8S_PERSISTENT_VOLUME, f"teams-{TEAM}-fsx", "spec", "claimRef", "namespace", to="team-vision"),
            ("'team-vision'",),
            tokens.K8S_PERSISTENT_VOLUME,
            1,
        ),
    ],
    "team-quotas-within-capacity": [
        Case(
            "shares-above-capacity",
            "staging",
            edit(
                tokens.K8S_RESOURCE_QUOTA,
                f"teams-{TEAM}-quota",
                "spec",
                "hard",
                f"requests.{layout.NEURON_DEVICE_RESOURCE}",
                to="32",
            ),
            ("add up to 48", layout.NEURON_DEVICE_RESOURCE, "neuronShare"),
            tokens.K8S_RESOURCE_QUOTA,
            1,
        ),
        Case(
            "no-quota",
            "staging",
            without(lambda r: r["type"] == tokens.K8S_RESOURCE_QUOTA and f"teams-{TEAM}-quota" in r["name"]),
            ("has no ResourceQuota",),
            tokens.K8S_NAMESPACE,
            1,
        ),
    ],
}
