"""Which nodes a job takes: the node group it names, how many of its nodes (what a managed group runs, or up to an
elastic group's maxSize, which Karpenter brings), each pod's share of a whole node, and whether the workspace's quota
and queue admit the job's pods, counted as the API server and Volcano count them.

What a job asks for is read from the pods the tools build (``job_usage``), never from a table beside them:
- a pod's request of a resource is the sum of its containers' requests, a container's limit standing for a request
  it does not set (the API server's defaulting: Kubernetes docs, "Resource Management for Pods and Containers": "If you
  specify a limit for a resource, but do not specify any request ... Kubernetes copies the limit"); the tools' pods
  have no init containers (whose requests would count where larger: Kubernetes docs, "Init containers") and no
  RuntimeClass overhead;
- a team's ResourceQuota (the contract's team ``quota``, which the platform writes as ``hard: requests.<resource>``:
  components/teams.py) refuses a pod whose requests would take the namespace's sum of ``requests.<resource>`` (of
  ``pods``: the number of pods) beyond ``hard`` (Kubernetes docs, "Resource Quotas": compute and extended resources,
  object count ``pods``);
- a team's whole nodes of the group the job's pods name (``team_group_nodes``) bound what the job asks there: the team
  namespace's admission policies refuse a Job, or a pod, beyond them (components/team_admission.py);
- a Volcano queue's capability leaves a job Pending while its PodGroup's minResources (the requests of its
  minAvailable pods: every pod of the tools' jobs) exceed it in any resource the job asks for and the capability names;
  a capability without cpu or memory does not bound them, nor one without a scalar resource that resource (volcano
  release-1.15 pkg/scheduler/plugins/proportion/proportion.go 120-127, 132-138, and 412-430, where
  ``LessEqualWithDimensionAndResourcesName`` (pkg/scheduler/api/resource_info.go 479-524) compares the dimensions the
  request names; ``MinDimensionResource``, 949-985, leaves a dimension the capability lacks at the cluster's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from jobs.errors import LaunchError
from trainium_eks import layout
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup, Team
from trainium_eks.quantities import quantity
from trainium_eks.wording import counted

RESERVED_VCPUS = 4  # kubelet, the VPC CNI and the device-plugin DaemonSets
MEMORY_FRACTION = 0.9
PODS = "pods"  # a ResourceQuota's count of pods
# TorchX's Kubernetes scheduler requests a role's CPUs and memory less these and limits them at the full amount
# (torchx 0.7.0 schedulers/kubernetes_scheduler.py:97-98 and 206-213); quota and Volcano count the requests.
TORCHX_RESERVED_MILLICPU = 100
TORCHX_RESERVED_MEMMB = 1024
QUOTA_REQUESTS = "requests."
# What a resource's amount counts, as an error message says it.
UNITS = {
    layout.NEURON_DEVICE_RESOURCE: "Neuron devices",
    layout.NEURON_CORE_RESOURCE: "NeuronCores",
    layout.EFA_RESOURCE: "EFA interfaces",
    "cpu": "CPUs",
    "memory": "bytes of memory",
    PODS: "pods",
}


def choose_node_group(contract: PlatformContract, name: str | None) -> NodeGroup:
    if name is None:
        return contract.node_groups[0]
    for group in contract.node_groups:
        if group.name == name:
            return group
    raise LaunchError(f"--node-group {name}: no such node group; the stack has {', '.join(g.name for g in contract.node_groups)}")


def whole_node_share(group: NodeGroup) -> dict[str, int]:
    """The vCPUs and MB of memory a pod that takes a whole node of ``group`` asks for (the rest runs the node)."""
    return {
        "cpu": max(1, group.vcpus_per_node - RESERVED_VCPUS),
        "mem_mb": int(group.memory_gib_per_node * 1024 * MEMORY_FRACTION),
    }


def whole_node_requests(group: NodeGroup) -> dict[str, Fraction]:
    """What the pod of one node of a whole-node job of ``group`` requests, as ``job_usage`` counts it, without
    building the job (the plan reads it; tests/test_default_jobs.py checks it against the launcher's job)."""
    share = whole_node_share(group)
    devices = {layout.NEURON_DEVICE_RESOURCE: group.neuron_devices_per_node, layout.EFA_RESOURCE: group.efa_interfaces_per_node}
    return {
        PODS: Fraction(1),
        "cpu": Fraction(share["cpu"] * 1000 - TORCHX_RESERVED_MILLICPU, 1000),
        "memory": Fraction((share["mem_mb"] - TORCHX_RESERVED_MEMMB) * 1000**2),
        **{name: Fraction(count) for name, count in devices.items() if count},
    }


# ---- what a job asks for ------------------------------------------------------------------------------------------


def _container_requests(container: dict) -> dict[str, Fraction]:
    resources = container.get("resources", {})
    return {name: quantity(amount) for name, amount in {**resources.get("limits", {}), **resources.get("requests", {})}.items()}


def pod_requests(spec: dict) -> dict[str, Fraction]:
    """What a pod of ``spec`` requests, resource by resource, as the quota and Volcano count it."""
    total: dict[str, Fraction] = {}
    for container in spec["containers"]:
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, Fraction(0)) + amount
    return total


def job_pods(job: dict) -> list[dict]:
    """The pod specs ``job`` runs at once: a Volcano Job's every task replica (minAvailable is all of them), a batch
    Job's ``parallelism`` pods of its template."""
    if job["apiVersion"] == "batch/v1":
        return [job["spec"]["template"]["spec"]] * job["spec"]["parallelism"]
    return [task["template"]["spec"] for task in job["spec"]["tasks"] for _ in range(task["replicas"])]


def job_usage(job: dict) -> dict[str, Fraction]:
    """The requests of every pod of ``job`` summed, resource by resource, and its number of pods (``pods``)."""
    usage: dict[str, Fraction] = {PODS: Fraction(0)}
    for spec in job_pods(job):
        usage[PODS] += 1
        for name, amount in pod_requests(spec).items():
            usage[name] = usage.get(name, Fraction(0)) + amount
    return usage


# ---- what admits it -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bound:
    """What must admit every pod of a job: a team's ResourceQuota, or the Volcano queue's capability."""

    name: str  # "team nlp's quota", "queue trainium"
    fix: str
    limits: Mapping[str, Fraction]  # resource (or ``pods``) -> the most the job may take

    def exceeded(self, usage: Mapping[str, Fraction]) -> str | None:
        """The first resource of ``usage`` beyond this bound, if any."""
        return next((name for name, most in self.limits.items() if usage.get(name, 0) > most), None)


@dataclass(frozen=True)
class GroupShare(Bound):
    """A team's whole nodes of one group, to which the namespace's admission policies hold a job's pods there."""

    team: str = ""
    group: str = ""
    nodes: int = 0
    held: tuple[str, ...] = ()  # the groups of which the team holds nodes

    def none_held(self) -> str:
        """One line refusing a job of the team on a group of which it holds no node."""
        elsewhere = f"run it on {', '.join(self.held)}, which the team holds, or " if self.held else ""
        return (
            f"--team {self.team} --node-group {self.group}: team {self.team} holds no node of {self.group} (its "
            f"neuronShare of the group's maxSize is less than one node), so admission refuses its pods there; "
            f"{elsewhere}{self.fix}"
        )


def advertised(group: NodeGroup) -> dict[str, int]:
    """What one node of ``group`` advertises of the quota'd resources."""
    return {
        layout.NEURON_DEVICE_RESOURCE: group.neuron_devices_per_node,
        layout.NEURON_CORE_RESOURCE: group.neuron_cores_per_node,
        layout.EFA_RESOURCE: group.efa_interfaces_per_node,
    }


def team_group_nodes(team: Team, groups: Sequence[NodeGroup]) -> dict[str, int]:
    """The team's whole nodes of each group: floor(neuronShare x maxSize), which the platform writes on its namespace
    for the admission policies (docs/teams.md, "Capacity"). The contract publishes the team's quota, those nodes'
    devices, cores and EFA interfaces added up over the groups, not the share: as a share grows no group's nodes
    shrink and the quota's Neuron devices grow, so the largest share whose nodes fit the quota is the team's own."""
    limits = _quota_limits(team.quota)

    def nodes(share: Fraction) -> dict[str, int]:
        return {group.name: math.floor(share * group.max_size) for group in groups}

    def fits(share: Fraction) -> bool:
        held = nodes(share)
        return all(
            sum(held[group.name] * advertised(group).get(resource, 0) for group in groups) <= most
            for resource, most in limits.items()
        )

    steps = {Fraction(k, group.max_size) for group in groups for k in range(group.max_size + 1)}
    return nodes(max(share for share in steps if fits(share)))


def _quota_limits(quota: Mapping[str, float]) -> dict[str, Fraction]:
    return {name.removeprefix(QUOTA_REQUESTS): quantity(amount) for name, amount in quota.items()}


def _capability_limits(capability: Mapping[str, float]) -> dict[str, Fraction]:
    """The capability's dimensions a job's pods can exceed: a pod requests no ``pods``, and a capability of cpu or
    memory at 0 or below is none (proportion.go 120-127)."""
    limits = {name: quantity(amount) for name, amount in capability.items() if name != PODS}
    return {name: most for name, most in limits.items() if name not in ("cpu", "memory") or most > 0}


def bounds(contract: PlatformContract, queue: str | None = None, group: NodeGroup | None = None) -> tuple[Bound, ...]:
    """What admits a job of the workspace ``contract`` names in ``queue`` (default: its first), on ``group``: in a
    team's namespace its quota, the queue's capability and the team's whole nodes of the group (``GroupShare``); a
    tie names the first."""
    name = queue or contract.queues[0]
    (entry,) = [q for q in contract.volcano_queues if q.name == name]
    team = next((team for team in contract.teams if team.namespace == contract.job_namespace), None)
    if team is None:
        return (Bound(f"queue {name}", "raise the queue's neuronShare", _capability_limits(entry.capability)),)
    fix = "raise the team's neuronShare"  # the team's nodes, quota and queue's capability are all its share
    quota = Bound(f"team {team.name}'s quota", fix, _quota_limits(team.quota))
    queued = Bound(f"queue {name}", fix, _capability_limits(entry.capability))
    if group is None:
        return (quota, queued)
    nodes = team_group_nodes(team, contract.node_groups)
    count = nodes[group.name]
    share = GroupShare(
        f"team {team.name}'s {counted(count, 'node')} of {group.name}",
        fix,
        {resource: Fraction(count * amount) for resource, amount in advertised(group).items() if amount},
        team=team.name,
        group=group.name,
        nodes=count,
        held=tuple(name for name, held in nodes.items() if held),
    )
    return (quota, queued, share)


def _amount(value: Fraction) -> str:
    return f"{value.numerator:,}" if value.denominator == 1 else f"{float(value):g}"


def refusal(bound: Bound, resource: str, usage: Mapping[str, Fraction], shape: str) -> str:
    """``<asked> <unit> (<resource>, <shape>), but <bound> admits <most>``."""
    unit = UNITS.get(resource, "")
    return f"{_amount(usage[resource])} {unit} ({resource}, {shape}), but {bound.name} admits {_amount(bound.limits[resource])}"


def job_group(contract: PlatformContract, job: dict) -> NodeGroup | None:
    """The Trainium group ``job``'s pods name in their nodeSelector (the tools put a job on one), if any."""
    named = {spec.get("nodeSelector", {}).get(layout.NODE_GROUP_LABEL) for spec in job_pods(job)}
    return next((group for group in contract.node_groups if group.name in named), None)


def admit(contract: PlatformContract, job: dict, subject: str, shape: str, queue: str | None = None) -> None:
    """Refuse ``job`` in one line when the team's nodes of its group, the workspace's quota or its queue would refuse
    one of its pods."""
    usage = job_usage(job)
    for bound in bounds(contract, queue, job_group(contract, job)):
        resource = bound.exceeded(usage)
        if resource is None:
            continue
        if isinstance(bound, GroupShare) and bound.nodes == 0:
            raise LaunchError(bound.none_held())
        raise LaunchError(f"{subject}: {refusal(bound, resource, usage, shape)}; {bound.fix}")


# ---- how many nodes -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Largest:
    """The largest job of whole nodes a workspace's quota and queue admit on a group, and what stops one more node: a
    resource of a bound, or (``bound`` None) the group's size."""

    nodes: int
    bound: Bound | None = None
    resource: str | None = None


def largest_admitted(
    contract: PlatformContract, group: NodeGroup, per_node: Mapping[str, Fraction], queue: str | None = None
) -> Largest:
    """The most nodes of ``group`` a job whose pods on one node ask for ``per_node`` (``job_usage`` of its one-node
    job) can take in the workspace ``contract`` names, in ``queue``: what the group holds, and every bound admits."""
    largest = Largest(contract.node_ceiling(group))
    for bound in bounds(contract, queue, group):
        for resource, most in bound.limits.items():
            asked = per_node.get(resource, 0)
            if asked > 0 and math.floor(most / asked) < largest.nodes:
                largest = Largest(math.floor(most / asked), bound, resource)
    return largest


def scaled(per_node: Mapping[str, Fraction], nodes: int) -> dict[str, Fraction]:
    return {name: amount * nodes for name, amount in per_node.items()}


def held_nodes(contract: PlatformContract, group: NodeGroup, requested: int | None, default: int) -> int:
    """``requested`` nodes of ``group``, else ``default`` (at most what it holds): a managed group holds the nodes it
    runs (desiredSize); an elastic group up to maxSize, which Karpenter brings when the job waits."""
    ceiling = contract.node_ceiling(group)
    if ceiling == 0:
        raise LaunchError(
            f"--node-group {group.name}: the group runs no node (desiredSize 0), so a job there would wait forever; "
            "scale it up, or make it elastic (provisioning: karpenter)"
        )
    nodes = min(default, ceiling) if requested is None else requested
    if nodes > ceiling:
        if contract.elastic(group):
            raise LaunchError(
                f"--nodes {nodes}: elastic node group {group.name} grows to {counted(ceiling, 'node')} at most (maxSize); "
                "raise its maxSize or lower --nodes"
            )
        raise LaunchError(
            f"--nodes {nodes}: node group {group.name} runs {counted(ceiling, 'node')} "
            f"({nodes * group.neuron_cores_per_node} cores asked, {ceiling * group.neuron_cores_per_node} "
            "provisioned); scale the node group (desiredSize), make it elastic, or lower --nodes"
        )
    return nodes


def node_count(
    contract: PlatformContract,
    group: NodeGroup,
    requested: int | None,
    per_node: Mapping[str, Fraction],
    *,
    default: int = 2,
    queue: str | None = None,
) -> int:
    """The nodes a job takes whose pods on one node ask for ``per_node``: ``requested``, else ``default``, at most the
    largest the group holds and the workspace admits (``largest_admitted``). A job the group cannot hold, or the
    team's nodes of the group, its quota or its queue would refuse, is refused: admission refuses a Job beyond the
    team's nodes, a pod the quota refuses is never created, and a queue leaves the gang Pending."""
    nodes = held_nodes(contract, group, requested, default)
    largest = largest_admitted(contract, group, per_node, queue)
    if isinstance(largest.bound, GroupShare) and largest.bound.nodes == 0:
        raise LaunchError(largest.bound.none_held())
    if largest.nodes == 0:
        one = refusal(largest.bound, largest.resource, per_node, f"one {group.instance_type}")
        raise LaunchError(f"--node-group {group.name}: {one}; {largest.bound.fix}, or name a node group of a smaller type")
    if requested is None:
        return min(nodes, largest.nodes)
    if nodes > largest.nodes:
        asked = refusal(largest.bound, largest.resource, scaled(per_node, nodes), f"{nodes} x {group.instance_type}")
        raise LaunchError(f"--nodes {nodes}: {asked}; lower --nodes, or {largest.bound.fix}")
    return nodes
