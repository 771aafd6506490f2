"""In-cluster hardening of the platform's own workloads: etcd keeps its quorum through node drains, workloads
that never call the Kubernetes API get no service-account token, every container has a liveness probe, and
the platform's namespaces enforce a Pod Security Standard.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from policies.rules import Violation, describe
from trainium_eks import tokens
from trainium_eks.graph import Graph, Node, dig, is_unknown, known

WORKLOAD_TYPES = (tokens.K8S_STATEFUL_SET, tokens.K8S_DEPLOYMENT)
ETCD_IMAGE = re.compile(r"(^|/)etcd(:|@|$)")
PART_OF = ("app.kubernetes.io/part-of", "trainium-eks")
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
ENFORCED_LEVELS = ("baseline", "restricted")


def _pod(node: Node) -> dict:
    pod = dig(node.props, "spec", "template", "spec")
    return pod if isinstance(pod, dict) else {}


def _containers(node: Node) -> list[dict]:
    containers = _pod(node).get("containers")
    return [c for c in containers if isinstance(c, dict)] if known(containers) and isinstance(containers, list) else []


def _runs_etcd(node: Node) -> bool:
    return any(ETCD_IMAGE.search(str(c.get("image", ""))) for c in _containers(node))


def _selects(budget: Node, labels: dict) -> bool:
    wanted = dig(budget.props, "spec", "selector", "matchLabels")
    return isinstance(wanted, dict) and bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def _keeps(budget: Node, replicas: int, quorum: int) -> bool:
    spec = budget.props.get("spec") or {}
    minimum, maximum = spec.get("minAvailable"), spec.get("maxUnavailable")
    if isinstance(minimum, (int, float)) and not isinstance(minimum, bool):
        return minimum >= quorum
    if isinstance(maximum, (int, float)) and not isinstance(maximum, bool):
        return maximum <= replicas - quorum
    return False  # percentages and unknowns cannot be shown to keep the majority


def etcd_quorum_disruption_budget(graph: Graph, config: dict) -> Iterator[Violation]:
    budgets = graph.of_type(tokens.K8S_POD_DISRUPTION_BUDGET)
    for etcd in graph.of_type(tokens.K8S_STATEFUL_SET):
        replicas = dig(etcd.props, "spec", "replicas")
        labels = dig(etcd.props, "spec", "template", "metadata", "labels")
        if not _runs_etcd(etcd) or is_unknown(replicas) or not isinstance(replicas, (int, float)) or replicas <= 1:
            continue
        if not isinstance(labels, dict):
            continue
        quorum = int(replicas) // 2 + 1
        namespace = dig(etcd.props, "metadata", "namespace")
        guarding = [b for b in budgets if dig(b.props, "metadata", "namespace") == namespace and _selects(b, labels)]
        if not any(_keeps(b, int(replicas), quorum) for b in guarding):
            yield Violation(
                etcd.urn,
                f"{describe(etcd)} runs {int(replicas)} etcd members and no PodDisruptionBudget keeps {quorum} of "
                f"them up, so a node drain may take the majority; add one with minAvailable: {quorum}",
            )


def service_account_token_off(node: Node, config: dict) -> Iterator[Violation]:
    pod = _pod(node)
    if not pod or pod.get("serviceAccountName"):
        return  # a named service account is there to be used
    if pod.get("automountServiceAccountToken") is not False and not is_unknown(pod.get("automountServiceAccountToken")):
        yield Violation(
            node.urn,
            f"{describe(node)} uses no service account of its own yet mounts the default one's token; "
            "set automountServiceAccountToken: false",
        )


def liveness_probes(node: Node, config: dict) -> Iterator[Violation]:
    for container in _containers(node):
        if not container.get("livenessProbe"):
            yield Violation(
                node.urn,
                f"{describe(node)} container '{container.get('name')}' has no liveness probe, so a hung process is "
                "never restarted; add one",
            )


def namespace_pod_security(node: Node, config: dict) -> Iterator[Violation]:
    labels = dig(node.props, "metadata", "labels")
    if not isinstance(labels, dict) or labels.get(PART_OF[0]) != PART_OF[1]:
        return  # only the platform's own namespaces
    level = labels.get(ENFORCE_LABEL)
    if not is_unknown(level) and level not in ENFORCED_LEVELS:
        yield Violation(
            node.urn,
            f"{describe(node)} enforces no Pod Security Standard ({ENFORCE_LABEL}: {level!r}); label it baseline or restricted",
        )
