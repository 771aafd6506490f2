"""Mutations of a fixture stack's plan that leave something behind after `pulumi destroy`: Karpenter's pools that no
longer depend on its release (or the release on what its controller needs), a StatefulSet that keeps its claims on a
class that deletes volumes, a control-plane log group that EKS would create itself. Built from
``tests/mutation_case.py``; merged into the table ``tests/test_policies.py`` runs.
"""

from __future__ import annotations

from mutation_case import Case, edit, resource, without

from policies.rules.cleanup import KARPENTER_CHART
from trainium_eks import tokens

STATEFUL_SET = tokens.K8S_STATEFUL_SET
LOG_GROUP = tokens.CLOUDWATCH_LOG_GROUP
CONTROL_PLANE_LOGS = "-control-plane-logs"


def _karpenter_release(plan: dict) -> dict:
    (release,) = [
        r
        for r in plan["resources"]
        if r["type"] == tokens.HELM_RELEASE and str(r["inputs"].get("chart", "")).endswith(f"/{KARPENTER_CHART}")
    ]
    return release


def _forget(record: dict, urns: set[str]) -> None:
    record["dependencies"] = [u for u in record["dependencies"] if u not in urns]
    record["propertyDependencies"] = {p: [u for u in us if u not in urns] for p, us in record["propertyDependencies"].items()}


def _pools_without_the_release(plan: dict) -> None:
    release = _karpenter_release(plan)["urn"]
    for record in plan["resources"]:
        if record["type"] in (tokens.KARPENTER_NODE_POOL, tokens.KARPENTER_NODE_CLASS):
            _forget(record, {release})


def _release_depending_on_nothing(plan: dict) -> None:
    release = _karpenter_release(plan)
    _forget(release, set(release["dependencies"]) | {u for us in release["propertyDependencies"].values() for u in us})


def _cluster_not_waiting_for_its_logs(plan: dict) -> None:
    group = resource(plan, LOG_GROUP, CONTROL_PLANE_LOGS)["urn"]
    _forget(resource(plan, tokens.EKS_COMPONENT_CLUSTER), {group})


CLEANUP_CASES: dict[str, list[Case]] = {
    "karpenter-outlives-its-pools": [
        Case("pools-without-release", "dev", _pools_without_the_release, ("Karpenter release",), count=2),
        Case(
            "release-depends-on-nothing",
            "dev",
            _release_depending_on_nothing,
            ("IAM role", "interruption queue", "system nodes"),
            blames=tokens.HELM_RELEASE,
            count=3,
        ),
    ],
    "stateful-set-claims-go-with-it": [
        Case(
            "claims-kept",
            "dev",
            edit(STATEFUL_SET, "-etcd", "spec", "persistentVolumeClaimRetentionPolicy"),
            ("whenDeleted", "reclaimPolicy Delete"),
            blames=STATEFUL_SET,
        ),
        Case(
            "claims-retained-on-delete",
            "dev",
            edit(STATEFUL_SET, "-etcd", "spec", "persistentVolumeClaimRetentionPolicy", to={"whenDeleted": "Retain"}),
            ("whenDeleted",),
        ),
    ],
    "control-plane-log-group-owned": [
        Case(
            "no-log-group",
            "dev",
            without(lambda r: r["type"] == LOG_GROUP and r["name"].endswith(CONTROL_PLANE_LOGS)),
            ("/aws/eks/", "no retention"),
            blames=tokens.EKS_COMPONENT_CLUSTER,
        ),
        Case("no-retention", "dev", edit(LOG_GROUP, CONTROL_PLANE_LOGS, "retentionInDays"), ("never expire",), blames=LOG_GROUP),
        Case(
            "retention-minus-one",
            "dev",
            edit(LOG_GROUP, CONTROL_PLANE_LOGS, "retentionInDays", to=-1.0),
            ("does not take", "3653"),
            blames=LOG_GROUP,
        ),
        Case("cluster-first", "dev", _cluster_not_waiting_for_its_logs, ("does not wait",)),
    ],
}

# prod's gp3 class retains volumes (a protected stack keeps its data): claims that stay are no leak there.
SPARED_CLEANUP: dict[str, list[Case]] = {
    "stateful-set-claims-go-with-it": [
        Case("retaining-class", "prod", edit(STATEFUL_SET, "-etcd", "spec", "persistentVolumeClaimRetentionPolicy")),
    ],
}
