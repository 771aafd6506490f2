"""The workload-hardening rules on hand-built graphs: each branch, unknown values, malformed values."""

from __future__ import annotations

import pytest

from plan_graph.graph import UNKNOWN, Graph, Node
from policies.rules import workloads
from trainium_eks import tokens

LABELS = {"app.kubernetes.io/name": "etcd"}


def node(type_: str, props: dict, name: str = "r") -> Node:
    return Node(f"urn:pulumi:test::trainium-eks::{type_}::{name}", type_, name, props, provider_props={})


def etcd(replicas, *, image="quay.io/coreos/etcd:v3.5.33", namespace="training", pod=None) -> Node:
    template = {"metadata": {"labels": LABELS}, "spec": {"containers": [{"name": "etcd", "image": image}], **(pod or {})}}
    spec = {"replicas": replicas, "template": template}
    return node(tokens.K8S_STATEFUL_SET, {"metadata": {"namespace": namespace}, "spec": spec}, "etcd")


def budget(spec: dict, namespace="training", selector=LABELS) -> Node:
    props = {"metadata": {"namespace": namespace}, "spec": {"selector": {"matchLabels": selector}, **spec}}
    return node(tokens.K8S_POD_DISRUPTION_BUDGET, props, "quorum")


def quorum_violations(*nodes: Node) -> list[str]:
    return [v.message for v in workloads.etcd_quorum_disruption_budget(Graph(nodes), {})]


@pytest.mark.parametrize(
    ("members", "budgets", "fires"),
    [
        (3.0, [budget({"minAvailable": 2.0})], False),
        (5.0, [budget({"minAvailable": 3.0})], False),
        (5.0, [budget({"maxUnavailable": 2.0})], False),
        (3.0, [], True),
        (3.0, [budget({"minAvailable": 1.0})], True),
        (5.0, [budget({"maxUnavailable": 3.0})], True),
        (3.0, [budget({"minAvailable": "66%"})], True),  # a percentage cannot be shown to keep the majority
        (3.0, [budget({"minAvailable": 2.0}, namespace="other")], True),
        (3.0, [budget({"minAvailable": 2.0}, selector={"app": "other"})], True),
        (3.0, [budget({"minAvailable": 2.0}, selector={})], True),  # an empty selector guards nothing here
        (1.0, [], False),  # a single member has no majority to keep
        (UNKNOWN, [], False),  # unknown in a preview: judged when known
    ],
)
def test_etcd_quorum_budget(members, budgets, fires):
    assert bool(quorum_violations(etcd(members), *budgets)) is fires


def test_other_statefulsets_need_no_quorum_budget():
    assert quorum_violations(etcd(3.0, image="postgres:16.4")) == []


@pytest.mark.parametrize(
    ("pod", "fires"),
    [
        ({"automountServiceAccountToken": False}, False),
        ({}, True),
        ({"automountServiceAccountToken": True}, True),
        ({"serviceAccountName": "trainer"}, False),  # a named account is there to be used
        ({"automountServiceAccountToken": UNKNOWN}, False),
    ],
)
def test_service_account_token(pod, fires):
    violations = list(workloads.service_account_token_off(etcd(3.0, pod=pod), {}))
    assert bool(violations) is fires


@pytest.mark.parametrize(
    ("containers", "count"),
    [
        ([{"name": "a", "livenessProbe": {"tcpSocket": {"port": 2379.0}}}], 0),
        ([{"name": "a"}, {"name": "b", "livenessProbe": {"httpGet": {"path": "/"}}}], 1),
        ([{"name": "a", "livenessProbe": {}}], 1),
        (UNKNOWN, 0),
        ("not-a-list", 0),
    ],
)
def test_liveness_probes(containers, count):
    props = {"spec": {"template": {"spec": {"containers": containers}}}}
    assert len(list(workloads.liveness_probes(node(tokens.K8S_DEPLOYMENT, props), {}))) == count


@pytest.mark.parametrize(
    ("labels", "fires"),
    [
        ({"app.kubernetes.io/part-of": "trainium-eks", "pod-security.kubernetes.io/enforce": "baseline"}, False),
        ({"app.kubernetes.io/part-of": "trainium-eks", "pod-security.kubernetes.io/enforce": "restricted"}, False),
        ({"app.kubernetes.io/part-of": "trainium-eks", "pod-security.kubernetes.io/enforce": "privileged"}, True),
        ({"app.kubernetes.io/part-of": "trainium-eks"}, True),
        ({"app.kubernetes.io/part-of": "trainium-eks", "pod-security.kubernetes.io/enforce": UNKNOWN}, False),
        ({}, False),  # not one of the platform's namespaces
        ("not-a-map", False),
    ],
)
def test_namespace_pod_security(labels, fires):
    namespace = node(tokens.K8S_NAMESPACE, {"metadata": {"labels": labels}})
    assert bool(list(workloads.namespace_pod_security(namespace, {}))) is fires


def network_policy(ingress, namespace="training", selector=LABELS, types=("Ingress",)) -> Node:
    spec = {"podSelector": {"matchLabels": selector}, "policyTypes": list(types), "ingress": ingress}
    return node(tokens.K8S_NETWORK_POLICY, {"metadata": {"namespace": namespace}, "spec": spec}, "access")


def vpc_cni(values='{"enableNetworkPolicy":"true"}') -> Node:
    return node(tokens.EKS_ADDON, {"addonName": "vpc-cni", "configurationValues": values}, "vpc-cni")


JOB_NAMESPACE_ONLY = [{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "training"}}}]}]


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ([network_policy(JOB_NAMESPACE_ONLY), vpc_cni()], []),
        ([network_policy(JOB_NAMESPACE_ONLY), vpc_cni(UNKNOWN)], []),
        ([], ["no NetworkPolicy"]),
        ([network_policy(JOB_NAMESPACE_ONLY, namespace="other"), vpc_cni()], ["no NetworkPolicy"]),
        ([network_policy(JOB_NAMESPACE_ONLY, types=("Egress",)), vpc_cni()], ["no NetworkPolicy"]),
        ([network_policy([{"ports": [{"port": 2379.0}]}]), vpc_cni()], ["any source"]),
        ([network_policy([{"from": [{"namespaceSelector": {}}]}]), vpc_cni()], ["any source"]),
        ([network_policy([{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]), vpc_cni()], ["any source"]),
        ([network_policy(JOB_NAMESPACE_ONLY)], ["nothing enforces"]),
        ([network_policy(JOB_NAMESPACE_ONLY), vpc_cni("{}")], ["nothing enforces"]),
        ([network_policy(JOB_NAMESPACE_ONLY), vpc_cni("not json")], ["nothing enforces"]),
    ],
)
def test_etcd_access(extra, words):
    messages = [v.message for v in workloads.etcd_access_restricted(Graph([etcd(3.0), *extra]), {})]
    assert len(messages) == len(words) and all(w in m for w, m in zip(words, messages, strict=True)), messages
