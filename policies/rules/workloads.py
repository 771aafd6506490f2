"""In-cluster hardening of the platform's own workloads: etcd keeps its quorum through node drains and admits
only chosen clients (under a NetworkPolicy the VPC CNI enforces), workloads that never call the Kubernetes API
get no service-account token, every container has a liveness probe, and the platform's namespaces enforce a
Pod Security Standard.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator

from plan_graph.graph import Graph, Node, dig, is_unknown, known
from policies.rules import Violation, describe, listed
from trainium_eks import tokens

WORKLOAD_TYPES = (tokens.K8S_STATEFUL_SET, tokens.K8S_DEPLOYMENT)
ETCD_IMAGE = re.compile(r"(\A|/)etcd(:|@|\Z)")
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


def _selects(selector: Node, labels: dict, *path: str) -> bool:
    wanted = dig(selector.props, "spec", *path, "matchLabels")
    return isinstance(wanted, dict) and bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def _etcd_members(graph: Graph) -> Iterator[tuple[Node, dict]]:
    """etcd StatefulSets with the labels of their pods."""
    for etcd in graph.of_type(tokens.K8S_STATEFUL_SET):
        labels = dig(etcd.props, "spec", "template", "metadata", "labels")
        if _runs_etcd(etcd) and isinstance(labels, dict):
            yield etcd, labels


def _same_namespace(a: Node, b: Node) -> bool:
    return dig(a.props, "metadata", "namespace") == dig(b.props, "metadata", "namespace")


def _keeps(budget: Node, replicas: int, quorum: int) -> bool:
    minimum, maximum = dig(budget.props, "spec", "minAvailable"), dig(budget.props, "spec", "maxUnavailable")
    if isinstance(minimum, (int, float)) and not isinstance(minimum, bool):
        return minimum >= quorum
    if isinstance(maximum, (int, float)) and not isinstance(maximum, bool):
        return maximum <= replicas - quorum
    return False  # percentages and unknowns cannot be shown to keep the majority


def etcd_quorum_disruption_budget(graph: Graph, config: dict) -> Iterator[Violation]:
    budgets = graph.of_type(tokens.K8S_POD_DISRUPTION_BUDGET)
    for etcd, labels in _etcd_members(graph):
        replicas = dig(etcd.props, "spec", "replicas")
        if is_unknown(replicas) or not isinstance(replicas, (int, float)) or not 1 < replicas < math.inf:
            continue
        quorum = int(replicas) // 2 + 1
        guarding = [b for b in budgets if _same_namespace(b, etcd) and _selects(b, labels, "selector")]
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


def _admits_anyone(rule: dict) -> bool:
    """An ingress rule with no sources, or a source that is every namespace or the whole internet."""
    sources = rule.get("from")
    if is_unknown(sources):
        return False
    if not sources:
        return True
    for peer in sources if isinstance(sources, list) else []:
        namespaces = peer.get("namespaceSelector") if isinstance(peer, dict) else None
        if isinstance(namespaces, dict) and not namespaces.get("matchLabels") and not namespaces.get("matchExpressions"):
            return True
        cidr = dig(peer, "ipBlock", "cidr") if isinstance(peer, dict) else None
        if isinstance(cidr, str) and cidr.endswith("/0"):
            return True
    return False


def _network_policy_enforced(graph: Graph) -> bool:
    """Whether the VPC CNI add-on runs its network policy agent."""
    for addon in graph.of_type(tokens.EKS_ADDON):
        if addon.props.get("addonName") != "vpc-cni":
            continue
        values = addon.props.get("configurationValues")
        if is_unknown(values):
            return True
        try:
            return json.loads(values or "{}").get("enableNetworkPolicy") == "true"
        except (TypeError, ValueError, AttributeError):
            return False
    return False


def etcd_access_restricted(graph: Graph, config: dict) -> Iterator[Violation]:
    policies = [p for p in graph.of_type(tokens.K8S_NETWORK_POLICY) if "Ingress" in listed(dig(p.props, "spec", "policyTypes"))]
    for etcd, labels in _etcd_members(graph):
        guarding = [p for p in policies if _same_namespace(p, etcd) and _selects(p, labels, "podSelector")]
        if not guarding:
            yield Violation(
                etcd.urn,
                f"{describe(etcd)} holds every job's rendezvous state and no NetworkPolicy limits who reaches it; "
                "admit only the job namespace to its client port",
            )
            continue
        rules = [r for p in guarding for r in listed(dig(p.props, "spec", "ingress")) if isinstance(r, dict)]
        if any(_admits_anyone(r) for r in rules):
            yield Violation(etcd.urn, f"{describe(etcd)}'s NetworkPolicy admits any source; name the job namespace")
        if not _network_policy_enforced(graph):
            yield Violation(
                etcd.urn,
                f"{describe(etcd)} has a NetworkPolicy that nothing enforces; enable network policies in the "
                'vpc-cni add-on (configurationValues enableNetworkPolicy: "true")',
            )
