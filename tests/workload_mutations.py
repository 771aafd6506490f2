"""The mutation cases of the platform's own workloads (etcd, TensorBoard, the jobs namespace) and the node role they
run under: etcd's version and v2 API, its quorum's disruption budget, who may reach it and its service account token;
liveness probes, Pod Security on namespaces, and the node role's least privilege. ``tests/test_policies.py`` merges them
with the other tables.
"""

from __future__ import annotations

from mutation_case import CONTAINER_0, Case, edit, resource, without

from policies.rules.iam import ROLE_POLICY_ATTACHMENT

ETCD = "kubernetes:apps/v1:StatefulSet"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DISRUPTION_BUDGET = "kubernetes:policy/v1:PodDisruptionBudget"
NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
ADDON = "aws:eks/addon:Addon"
READ_ONLY = "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly"
CNI = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"


def _etcd_3_6_without_v2(plan: dict) -> None:
    container = resource(plan, ETCD)["inputs"]["spec"]["template"]["spec"]["containers"][0]
    container["args"].remove("--enable-v2=true")
    container["image"] = "quay.io/coreos/etcd:v3.6.14"


WORKLOAD_CASES: dict[str, list[Case]] = {
    # ---- trainium-topology
    "etcd-pinned-with-v2-api": [Case("3.6-without-v2", "dev", _etcd_3_6_without_v2, ("v3.5", "--enable-v2"), ETCD, 2)],
    # ---- security-baseline: the platform's own workloads
    "etcd-quorum-disruption-budget": [
        Case("no-budget", "prod", without(lambda r: r["type"] == DISRUPTION_BUDGET), ("minAvailable: 2",), ETCD),
        Case("one-of-three", "staging", edit(DISRUPTION_BUDGET, "quorum", "spec", "minAvailable", to=1.0), blames=ETCD),
    ],
    "node-role-least-privilege": [
        Case("read-only", "dev", edit(ROLE_POLICY_ATTACHMENT, "node-ecr", "policyArn", to=READ_ONLY), ("PullOnly",)),
        Case("cni", "prod", edit(ROLE_POLICY_ATTACHMENT, "node-ssm", "policyArn", to=CNI), ("vpc-cni",)),
    ],
    "etcd-access-restricted": [
        Case("no-policy", "staging", without(lambda r: r["type"] == NETWORK_POLICY), ("no NetworkPolicy",), ETCD),
        Case("open", "dev", edit(NETWORK_POLICY, "access", "spec", "ingress", 0, "from", to=[]), ("any source",), ETCD),
        Case("not-enforced", "prod", edit(ADDON, "vpc-cni", "configurationValues", to="{}"), ("nothing enforces",), ETCD),
    ],
    "service-account-token-off": [
        Case("etcd", "dev", edit(ETCD, "etcd", "spec", "template", "spec", "automountServiceAccountToken"), blames=ETCD)
    ],
    "workload-liveness-probes": [Case("tensorboard", "staging", edit(DEPLOYMENT, "tensorboard", *CONTAINER_0, "livenessProbe"))],
    "namespace-pod-security": [
        Case("unlabelled", "prod", edit(NAMESPACE, "jobs", "metadata", "labels", "pod-security.kubernetes.io/enforce"))
    ],
}
