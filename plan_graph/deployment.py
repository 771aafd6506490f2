"""How long `pulumi up` of a new stack takes, and what sets that time: the deployment's critical path.

The engine creates a resource once everything it depends on exists: its dependencies (data and explicit
``dependsOn``), its provider, and, for a dependency that is a component, every resource inside that
component. Each resource takes its type's typical creation time (``CREATE_MINUTES``, each with its source).
The critical path is the chain of waits that ends last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from plan_graph.graph import Graph, Node
from trainium_eks import tokens

TF_DEFAULT = "Terraform AWS provider default create timeout"
OBSERVED = "observed in public Terraform/Pulumi apply logs, 2023-2025"

# (minutes, source). Typical creation times, not worst cases: the engine's timeouts are far longer.
CREATE_MINUTES: Mapping[str, tuple[float, str]] = {
    # pulumi-eks creates its control plane, IAM, security groups, OIDC provider and managed add-ons in ~12.5 min
    # (748 s, pulumi/pulumi-eks#1819, 2025); the aws:eks/cluster:Cluster inside it takes 8-12 min of that.
    tokens.EKS_COMPONENT_CLUSTER: (12.5, "pulumi/pulumi-eks#1819: 748 s for the component with its sub-resources"),
    tokens.EKS_CLUSTER: (10.0, f"8m21s-12m18s {OBSERVED}; {TF_DEFAULT} 30 min"),
    tokens.EKS_NODE_GROUP: (3.0, f"1m48s-3m41s {OBSERVED}; {TF_DEFAULT} 60 min"),
    tokens.EKS_ADDON: (1.0, f"35s-1m6s once nodes run, {OBSERVED}; {TF_DEFAULT} 20 min"),
    tokens.FSX_LUSTRE_FILE_SYSTEM: (10.0, "~6-10 min: aws-samples/aws-hpc-tutorials#289; steampipe#906"),
    tokens.FSX_DATA_REPOSITORY_ASSOCIATION: (
        5.0,
        "several minutes: aws-samples/amazon-eks-machine-learning-with-terraform-and-kubeflow#112",
    ),
    tokens.EC2_VPC_ENDPOINT: (1.0, f"an interface endpoint turns available in a minute or two (estimate); {TF_DEFAULT} 10 min"),
    tokens.EC2_NAT_GATEWAY: (2.0, f"1m25s-2m5s {OBSERVED}; {TF_DEFAULT} 10 min"),
    tokens.EC2_VPC: (0.3, f"13-24 s {OBSERVED}"),
    tokens.EC2_SUBNET: (0.2, f"1-15 s {OBSERVED}"),
    tokens.EC2_INTERNET_GATEWAY: (0.05, f"1 s {OBSERVED}"),
    tokens.EC2_ROUTE_TABLE: (0.1, f"0-7 s {OBSERVED}"),
    tokens.EC2_ROUTE_TABLE_ASSOCIATION: (0.05, f"0-1 s {OBSERVED}"),
    tokens.EC2_EIP: (0.05, f"3 s {OBSERVED}"),
    tokens.EC2_SECURITY_GROUP: (0.05, f"2 s {OBSERVED}"),
    tokens.VPC_SECURITY_GROUP_INGRESS_RULE: (0.05, f"1-5 s {OBSERVED}"),
    tokens.VPC_SECURITY_GROUP_EGRESS_RULE: (0.05, f"1-5 s {OBSERVED}"),
    tokens.EC2_LAUNCH_TEMPLATE: (0.1, f"1-7 s {OBSERVED}"),
    tokens.EC2_INSTANCE: (0.5, f"waits until the instance runs, well under a minute (estimate); {TF_DEFAULT} 10 min"),
    tokens.EC2_PLACEMENT_GROUP: (0.05, "an API call; no timing published (estimate)"),
    tokens.KMS_KEY: (0.4, f"12-29 s {OBSERVED}"),
    tokens.KMS_ALIAS: (0.05, "an API call (estimate)"),
    tokens.IAM_ROLE: (0.1, f"1-7 s {OBSERVED}"),
    tokens.IAM_INSTANCE_PROFILE: (0.05, "an API call (estimate)"),
    tokens.IAM_ROLE_POLICY_ATTACHMENT: (0.05, f"0-4 s {OBSERVED}"),
    tokens.IAM_ROLE_POLICY: (0.05, f"0-4 s {OBSERVED}"),
    tokens.ECR_REPOSITORY: (0.05, f"1-2 s {OBSERVED}"),
    tokens.ECR_LIFECYCLE_POLICY: (0.05, "an API call (estimate)"),
    tokens.CLOUDWATCH_LOG_GROUP: (0.05, "an API call (estimate)"),
    tokens.CODEBUILD_PROJECT: (0.05, "an API call (estimate)"),
    tokens.CODEBUILD_WEBHOOK: (0.05, "an API call that registers a GitHub webhook (estimate)"),
    tokens.HELM_RELEASE: (1.0, f"23-56 s for small charts {OBSERVED}"),
    tokens.K8S_STATEFUL_SET: (1.5, "image pull, volume provisioning and readiness (estimate)"),
    tokens.K8S_DEPLOYMENT: (2.0, "pull of a ~1.5 GB image and readiness (estimate)"),
    tokens.K8S_PERSISTENT_VOLUME_CLAIM: (0.1, "binds at once to a static volume (estimate)"),
    tokens.CLOUDWATCH_METRIC_ALARM: (0.05, "an API call (estimate)"),
    tokens.CLOUDWATCH_EVENT_RULE: (0.05, "an API call (estimate)"),
    tokens.CLOUDWATCH_EVENT_TARGET: (0.05, "an API call (estimate)"),
    tokens.SQS_QUEUE: (0.05, "an API call (estimate)"),
    tokens.SQS_QUEUE_POLICY: (0.05, "an API call (estimate)"),
    tokens.EKS_ACCESS_ENTRY: (0.05, "an API call (estimate)"),
    tokens.IAM_POLICY: (0.05, f"0-4 s {OBSERVED}"),
    tokens.CLOUDWATCH_DASHBOARD: (0.05, "an API call (estimate)"),
}
KUBERNETES_OBJECT = (0.05, "an API call (estimate)")
NOTHING = (0.0, "no cloud work: components, providers and the stack register instantly")
UNMEASURED = (0.5, "type without a measured time (a guess)")


def create_minutes(node: Node) -> tuple[float, str]:
    if node.type in CREATE_MINUTES:
        return CREATE_MINUTES[node.type]
    if not node.custom or node.type.startswith("pulumi:"):
        return NOTHING
    if node.type.startswith("kubernetes:"):
        return KUBERNETES_OBJECT
    return UNMEASURED


@dataclass(frozen=True)
class Step:
    node: Node
    start: float
    finish: float
    waited_for: Node | None  # what set the start (None: nothing to wait for)

    def to_json(self) -> dict:
        minutes, source = create_minutes(self.node)
        return {
            "urn": self.node.urn,
            "type": self.node.type,
            "startMinute": round(self.start, 2),
            "finishMinute": round(self.finish, 2),
            "minutes": minutes,
            "source": source,
        }


class Schedule:
    """Earliest start and finish of every resource when `pulumi up` creates the stack from nothing."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.children: dict[int, list[Node]] = {}
        for node in graph:
            if node.parent is not None:
                self.children.setdefault(id(node.parent), []).append(node)
        self._steps: dict[int, Step] = {}
        self._completion: dict[int, tuple[float, Node]] = {}

    def _ancestors(self, node: Node) -> set[int]:
        found, parent = set(), node.parent
        while parent is not None:
            found.add(id(parent))
            parent = parent.parent
        return found

    def completion(self, node: Node) -> tuple[float, Node]:
        """When a component and everything inside it exist, and which resource finishes last."""
        if id(node) not in self._completion:
            best = (self.step(node).finish, node)
            for child in self.children.get(id(node), []):
                best = max(best, self.completion(child), key=lambda pair: pair[0])
            self._completion[id(node)] = best
        return self._completion[id(node)]

    def step(self, node: Node) -> Step:
        if id(node) not in self._steps:
            ancestors = self._ancestors(node)
            waits: list[tuple[float, Node]] = []
            for dependency in [*node.dependencies, *([node.provider] if node.provider else [])]:
                if dependency.custom or id(dependency) in ancestors:
                    waits.append((self.step(dependency).finish, dependency))
                else:
                    waits.append(self.completion(dependency))
            if node.parent is not None:
                waits.append((self.step(node.parent).start, node.parent))
            start, waited_for = max(waits, key=lambda pair: pair[0], default=(0.0, None))
            self._steps[id(node)] = Step(node, start, start + create_minutes(node)[0], waited_for if start else None)
        return self._steps[id(node)]

    @cached_property
    def critical_path(self) -> list[Step]:
        if not self.graph.nodes:
            return []
        last = max((self.step(n) for n in self.graph), key=lambda s: s.finish).node
        path, node = [], last
        while node is not None:
            step = self.step(node)
            if create_minutes(node)[0] or not path:
                path.append(step)
            node = step.waited_for
        return list(reversed(path))

    def ordering_only_waits(self) -> list[dict]:
        """Steps of the critical path that wait for their predecessor through an explicit ``dependsOn`` only."""
        waits = []
        for before, after in zip(self.critical_path, self.critical_path[1:], strict=False):
            data = {id(n) for deps in after.node.property_dependencies.values() for n in deps}
            if id(before.node) not in data and before.node in after.node.dependencies:
                waits.append({"urn": after.node.urn, "waitsFor": before.node.urn})
        return waits

    def to_json(self) -> dict:
        path = self.critical_path
        return {
            "criticalPathMinutes": round(path[-1].finish, 2) if path else 0.0,
            "criticalPath": [s.node.urn for s in path],
            "steps": [s.to_json() for s in path],
            "orderingOnlyWaits": self.ordering_only_waits(),
        }
