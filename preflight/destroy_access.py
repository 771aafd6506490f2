"""What `pulumi destroy` needs of the Kubernetes API: the running jobs stopped before it starts, and the way to the API
kept until its last Kubernetes object is deleted.

- Every Kubernetes object (Helm releases included) is deleted through the API server. A private-only endpoint answers
  inside the VPC alone (EKS User Guide, "Cluster API server endpoint"): from the deploy runner, or through the access
  host, which reaches Systems Manager over the network's NAT gateway or VPC endpoints. The platform makes the
  Kubernetes provider depend on the network, the runner and the host (components/cluster.py, ``api_access_path``), so
  the engine deletes all of them after the provider, which goes after every object it manages.
- Training pods carry ``karpenter.sh/do-not-disrupt``, which Karpenter's termination controller does not evict: the
  node of a deleted NodePool stays until such pods end (aws/karpenter-provider-aws v1.14.1,
  website/content/en/docs/concepts/disruption.md, "NodePool Deletion" and "Pod-Level Controls"). Deleting a Volcano
  Job deletes its pods, which carry a controller owner reference to it and the label ``volcano.sh/job-name``
  (volcano-sh/volcano release-1.15, pkg/controllers/job/job_controller_util.go, createJobPod); ``vcjob`` is the Job
  CRD's short name (installer/helm/chart/volcano/crd/bases/batch.volcano.sh_jobs.yaml).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from plan_graph.graph import Graph, Node, dig, known
from trainium_eks import tokens

ACCESS_COMPONENTS = (tokens.NETWORK_COMPONENT, tokens.DEPLOY_RUNNER_COMPONENT, tokens.API_ACCESS_HOST_COMPONENT)
VOLCANO_JOB_LABEL = "volcano.sh/job-name"  # on every pod of a Volcano Job


def through_the_api(node: Node) -> bool:
    """A resource whose create, update and delete are calls to the Kubernetes API server."""
    return node.custom and node.type.startswith("kubernetes:")


def _inside(node: Node, component_types: Sequence[str]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in component_types:
            return True
        parent = parent.parent
    return False


def api_access_path(graph: Graph) -> set[Node]:
    """The resources `pulumi destroy` reaches the API through: those of the network (routes, NAT, internet gateway, VPC
    endpoints), the deploy runner and the access host, and the cluster's rules admitting the runner and the host."""
    path = {n for n in graph if n.custom and _inside(n, ACCESS_COMPONENTS)}
    admitted = {
        rule
        for rule in graph.of_type(tokens.VPC_SECURITY_GROUP_INGRESS_RULE)
        if set(rule.linked("referencedSecurityGroupId")) & path
    }
    return path | admitted


@dataclass(frozen=True)
class ApiPathOrder:
    """Where the Kubernetes objects and the way to the API fall among the destroy's steps (numbered from 1)."""

    last_kubernetes_step: int
    first_path_step: int
    last_path_step: int

    @property
    def keeps_the_api(self) -> bool:
        return self.last_kubernetes_step < self.first_path_step

    def to_json(self) -> dict:
        return {
            "lastKubernetesStep": self.last_kubernetes_step,
            "firstPathStep": self.first_path_step,
            "lastPathStep": self.last_path_step,
        }

    def line(self) -> str:
        if self.keeps_the_api:
            return (
                f"the way to the Kubernetes API (network, deploy runner, access host) goes in steps "
                f"{self.first_path_step}-{self.last_path_step}, after the last Kubernetes object (step "
                f"{self.last_kubernetes_step})"
            )
        return (
            f"the way to the Kubernetes API starts going in step {self.first_path_step}, before the last Kubernetes "
            f"object (step {self.last_kubernetes_step}): `pulumi destroy` loses the API part way"
        )


def api_path_order(graph: Graph, steps: Sequence[Sequence[Node]]) -> ApiPathOrder | None:
    """None when the destroy deletes no Kubernetes object or nothing of the way to the API."""
    step_of = {n: i for i, step in enumerate(steps, 1) for n in step}
    objects = [step_of[n] for n in graph if through_the_api(n) and n in step_of]
    path = [step_of[n] for n in api_access_path(graph) if n in step_of]
    if not objects or not path:
        return None
    return ApiPathOrder(max(objects), min(path), max(path))


@dataclass(frozen=True)
class Drain:
    """Stopping the running jobs, the first step of a clean-up."""

    reason: str
    commands: list[str]

    def to_json(self) -> dict:
        return {"reason": self.reason, "commands": self.commands}


def drain(graph: Graph, steps: Sequence[Sequence[Node]]) -> Drain | None:
    """The commands that delete the Volcano Jobs of every namespace the stack creates; None without Volcano queues."""
    namespaces = sorted(
        name for n in graph.of_type(tokens.K8S_NAMESPACE) if known(name := dig(n.props, "metadata", "name")) and name
    )
    if not namespaces or not graph.of_type(tokens.VOLCANO_QUEUE):
        return None
    pool_steps = [i for i, step in enumerate(steps, 1) for n in step if n.type == tokens.KARPENTER_NODE_POOL]
    if pool_steps:
        reason = (
            "their pods carry karpenter.sh/do-not-disrupt, which Karpenter does not evict, so the nodes of the "
            f"NodePools deleted in step {min(pool_steps)} stay, and bill, until the pods end"
        )
    else:
        reason = "the destroy deletes their nodes and namespaces while they train"
    if graph.of_type(tokens.API_ACCESS_HOST_COMPONENT):
        reason += "; the endpoint is private: run kubectl through the access host (README, Jobs into a private cluster)"
    commands = [f"kubectl delete vcjob --all -n {namespace}" for namespace in namespaces]
    commands.append(f"kubectl get pods -A -l {VOLCANO_JOB_LABEL}   # repeat until it lists none")
    return Drain(reason, commands)
