"""Whether the system pods fit the system node group at its minimum size, from the plan's resources.

Counted: the platform's Deployments, StatefulSets and DaemonSets that may run on system nodes (not those that select
Trainium nodes), and the pods of the Helm releases that run there, from each chart's defaults at its pinned version
and the release's values. Each pod asks for its containers' requests; a workload whose pods require a node each
(pod anti-affinity on ``kubernetes.io/hostname``) places one replica per node; a DaemonSet one pod on every node.
Against it: each node's allocatable CPU and memory (``allocatable``: the catalog's vCPU and memory less the EKS AMI's
kubelet reservations). Not counted: pods EKS runs itself (CoreDNS, kube-proxy) and the EKS add-ons' (``NOT_COUNTED``), whose
requests are EKS's, not the plan's; so a stack that fails here cannot fit, and one that passes is close to its limit
by those add-ons' requests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from plan_graph.graph import Graph, Node, dig, is_unknown, number
from plan_graph.trainium_groups import trainium_groups
from trainium_eks import catalog, hardware, layout, tokens, versions
from trainium_eks.quantities import quantity

NOT_COUNTED = "CoreDNS, kube-proxy and the EKS add-ons' pods (their requests are EKS's)"
WORKLOADS = ("kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:StatefulSet", "kubernetes:apps/v1:DaemonSet")
HOSTNAME = "kubernetes.io/hostname"
# This check's own bound on the replicas of one workload and the nodes it places them on, which keeps the placement
# small: no system node group comes near it, and a count beyond it is not judged (the fit fails).
MAX_COUNT = 1000


class Unreadable(ValueError):
    """A value of the plan that no API server would take where it stands (a string for a map, ``"x"`` for a quantity):
    the fit cannot be judged, so it does not hold."""


class NotKnown(Exception):
    """A value the preview does not know yet: the fit is not judged."""


def _map(value, what: str) -> dict:
    """``value`` as a map (absent: an empty one)."""
    if value is None:
        return {}
    if is_unknown(value):
        raise NotKnown(what)
    if not isinstance(value, dict):
        raise Unreadable(f"{what} {value!r} is no map")
    return value


def _list(value, what: str) -> list:
    if value is None:
        return []
    if is_unknown(value):
        raise NotKnown(what)
    if not isinstance(value, list):
        raise Unreadable(f"{what} {value!r} is no list")
    return value


def _count(value, default: int | None, what: str) -> int:
    """A replica or node count: a whole number from 0 to ``MAX_COUNT`` (absent: ``default``, or unreadable without)."""
    if value is None:
        if default is None:
            raise Unreadable(f"{what} is not given")
        return default
    if is_unknown(value):
        raise NotKnown(what)
    count = number(value)
    if count is None or not count.is_integer() or not 0 <= count <= MAX_COUNT:
        raise Unreadable(f"{what} {value!r} is no whole number from 0 to {MAX_COUNT}")
    return int(count)


@dataclass(frozen=True)
class Requests:
    millicpu: float = 0.0
    memory_mib: float = 0.0

    def __add__(self, other: Requests) -> Requests:
        return Requests(self.millicpu + other.millicpu, self.memory_mib + other.memory_mib)

    @classmethod
    def of(cls, requests, what: str = "requests") -> Requests:
        """A container's ``resources.requests`` (absent: none)."""
        requests = _map(requests, what)
        amounts = []
        for resource in ("cpu", "memory"):
            value = requests.get(resource, 0)
            if is_unknown(value):
                raise NotKnown(f"{what}.{resource}")
            amount = quantity(value)
            if amount is None or amount < 0:
                raise Unreadable(f"{what}.{resource} {value!r} is no Kubernetes quantity of 0 or more")
            amounts.append(amount)
        return cls(float(amounts[0] * 1000), float(amounts[1] / 2**20))


@dataclass(frozen=True)
class Workload:
    name: str
    replicas: int | None  # None: a DaemonSet, one pod on every node
    requests: Requests  # one pod's
    one_per_node: bool = False


# awslabs/amazon-eks-ami nodeadm/internal/kubelet/config.go (commit 81fec2e8): kube-reserved CPU is 6 % of the first
# core, 1 % of the second, 0.5 % of the third and fourth and 0.25 % of the rest; memory 11 MiB x maxPods + 255 MiB;
# evictionHard memory.available 100Mi.
KUBE_RESERVED_CPU = ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, None, 25))  # millicores, per 10,000
EVICTION_MEMORY_MIB = 100


def kube_reserved_millicpu(spec: hardware.InstanceType) -> int:
    millicores = spec.vcpus * 1000
    return sum(
        max(0, min(millicores, end or millicores) - start) * per_ten_thousand // 10000
        for start, end, per_ten_thousand in KUBE_RESERVED_CPU
    )


def allocatable(spec: hardware.InstanceType) -> Requests:
    """What the kubelet of the EKS AMI offers pods on a node of ``spec``: its nominal vCPU and memory less the
    reservations and the memory eviction threshold (the kernel's own share of memory is not known here, so the
    figure is an upper bound)."""
    memory_mib = spec.memory_gib * 1024 - (11 * spec.max_pods + 255) - EVICTION_MEMORY_MIB
    return Requests(spec.vcpus * 1000 - kube_reserved_millicpu(spec), memory_mib)


# --- the charts' pods at their pinned versions, with the values that change them ----------------------------------
# karpenter v1.14.1 charts/karpenter/values.yaml: replicas 2, controller resources {}, a required pod anti-affinity
# on kubernetes.io/hostname (and a zone spread, DoNotSchedule) unless ``affinity`` is given.
# aws-fsx-csi-driver chart 1.17.0 values.yaml and templates (kubernetes-sigs/aws-fsx-csi-driver 5b227125): the
# controller (replicaCount 2) runs fsx-plugin at controller.resources (10m, 40Mi) and the provisioner, resizer and
# liveness probe at 10m, 32Mi each; the node DaemonSet (no node selector, so on system nodes too) fsx-plugin at
# node.resources (10m, 40Mi) and the registrar and liveness probe at 10m, 32Mi each.
# volcano release-1.15 installer/helm/chart/volcano/values.yaml (d52b6ec4): admission, controller and scheduler,
# one replica each (custom.<name>_replicas), no resources (custom.<name>_resources: ~) and no affinity.
SIDECAR = Requests(10, 32)
FSX_PLUGIN = {"requests": {"cpu": "10m", "memory": "40Mi"}}


def _karpenter(values: dict) -> list[Workload]:
    replicas = _count(values.get("replicas"), 2, "replicas")
    controller = _map(_map(values.get("controller"), "controller").get("resources"), "controller.resources")
    requests = Requests.of(controller.get("requests"), "controller.resources.requests")
    return [Workload("karpenter controller", replicas, requests, one_per_node="affinity" not in values)]


def _fsx_csi(values: dict) -> list[Workload]:
    controller, node = _map(values.get("controller"), "controller"), _map(values.get("node"), "node")
    plugin, node_plugin = (
        Requests.of(_map(part.get("resources") or FSX_PLUGIN, f"{name}.resources").get("requests"), f"{name}.resources.requests")
        for part, name in ((controller, "controller"), (node, "node"))
    )
    replicas = _count(controller.get("replicaCount"), 2, "controller.replicaCount")
    return [
        Workload("fsx-csi-controller", replicas, plugin + SIDECAR + SIDECAR + SIDECAR),
        Workload("fsx-csi-node", None, node_plugin + SIDECAR + SIDECAR),
    ]


def _volcano(values: dict) -> list[Workload]:
    custom = _map(values.get("custom"), "custom")
    return [
        Workload(
            f"volcano-{part}",
            _count(custom.get(f"{part}_replicas"), 1, f"custom.{part}_replicas"),
            Requests.of(
                _map(custom.get(f"{part}_resources"), f"custom.{part}_resources").get("requests"),
                f"custom.{part}_resources.requests",
            ),
        )
        for part in ("admission", "controller", "scheduler")
        if custom.get(f"{part}_enable", True) is not False
    ]


CHARTS: dict[str, Callable[[dict], list[Workload]]] = {
    versions.KARPENTER_CHART.chart: _karpenter,
    versions.FSX_CSI_CHART.chart: _fsx_csi,
    versions.VOLCANO_CHART.chart: _volcano,
}


def _containers(pod: dict, key: str) -> Iterator[Requests]:
    for index, container in enumerate(_list(pod.get(key), key)):
        what = f"{key}[{index}]"
        resources = _map(_map(container, what).get("resources"), f"{what}.resources")
        yield Requests.of(resources.get("requests"), f"{what}.resources.requests")


def _pod_requests(pod: dict) -> Requests:
    """A pod's requests as the scheduler counts them: its containers', or its largest init container's if more."""
    containers = sum(_containers(pod, "containers"), Requests())
    for first in _containers(pod, "initContainers"):
        containers = Requests(max(containers.millicpu, first.millicpu), max(containers.memory_mib, first.memory_mib))
    return containers


def _one_per_node(pod: dict) -> bool:
    anti_affinity = _map(_map(pod.get("affinity"), "affinity").get("podAntiAffinity"), "affinity.podAntiAffinity")
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    terms = _list(anti_affinity.get(required), f"affinity.podAntiAffinity.{required}")
    return any(isinstance(t, dict) and t.get("topologyKey") == HOSTNAME for t in terms)


def _on_system_nodes(pod: dict) -> bool:
    selector = _map(pod.get("nodeSelector"), "nodeSelector")
    return selector.get(layout.NODE_ROLE_LABEL, layout.SYSTEM_NODE_ROLE) == layout.SYSTEM_NODE_ROLE


def _of_resource(node: Node) -> list[Workload]:
    """The system pods of one Deployment, StatefulSet or DaemonSet (none when they run elsewhere)."""
    pod = _map(dig(node.props, "spec", "template", "spec"), "spec.template.spec")
    if not pod or not _on_system_nodes(pod):
        return []
    replicas = None if node.type.endswith("DaemonSet") else _count(dig(node.props, "spec", "replicas"), 1, "spec.replicas")
    name = dig(node.props, "metadata", "name")
    return [Workload(name if isinstance(name, str) else node.name, replicas, _pod_requests(pod), _one_per_node(pod))]


def _of_release(release: Node) -> list[Workload]:
    """The system pods of one Helm release of a chart this module knows (none for another chart)."""
    chart = release.props.get("chart")
    read = CHARTS.get(chart) if isinstance(chart, str) else None
    return [] if read is None else read(_map(release.props.get("values"), "values"))


def workloads(graph: Graph, unreadable: list[str]) -> Iterator[Workload]:
    """The system pods' workloads; what cannot be read is added to ``unreadable`` (``NotKnown``: a value the preview
    does not know)."""
    for node, read in [(n, _of_resource) for n in graph.of_type(*WORKLOADS)] + [
        (n, _of_release) for n in graph.of_type(tokens.HELM_RELEASE)
    ]:
        try:
            yield from read(node)
        except Unreadable as error:
            unreadable.append(f"{node.name}: {error}")


@dataclass(frozen=True)
class SystemFit:
    node_group: Node
    instance_type: str
    nodes: int
    allocatable: Requests
    loads: tuple[Requests, ...]  # what each node's pods request
    unplaced: tuple[str, ...]  # pods no node has room for
    unreadable: tuple[str, ...] = ()  # values the fit could not read (``Unreadable``): it does not hold

    @property
    def fits(self) -> bool:
        return not self.unplaced and not self.unreadable

    def to_json(self) -> dict:
        return {
            "instanceType": self.instance_type,
            "nodes": self.nodes,
            "allocatableMillicpu": self.allocatable.millicpu,
            "allocatableMemoryMiB": self.allocatable.memory_mib,
            "requestedPerNode": [{"millicpu": round(n.millicpu), "memoryMiB": round(n.memory_mib)} for n in self.loads],
            "unplaced": list(self.unplaced),
            "unreadable": list(self.unreadable),
            "fits": self.fits,
            "notCounted": NOT_COUNTED,
        }


def _system_node_group(graph: Graph) -> tuple[Node, hardware.InstanceType, int | str] | None:
    """The first node group that is not a Trainium one and whose type the catalog knows, its type and its minimum size
    (or why that size cannot be read)."""
    trainium = {id(g.node) for g in trainium_groups(graph)}
    for node in graph.of_type(tokens.EKS_NODE_GROUP):
        types = node.props.get("instanceTypes")
        first = types[0] if isinstance(types, list) and types else None
        spec = catalog.INSTANCE_TYPES.get(first) if isinstance(first, str) else None
        if id(node) in trainium or spec is None:
            continue
        try:
            return node, spec, _count(dig(node.props, "scalingConfig", "minSize"), None, "scalingConfig.minSize")
        except Unreadable as error:
            return node, spec, f"{node.name}: {error}"
    return None


def system_fit(graph: Graph) -> SystemFit | None:
    """The system pods placed on the system node group at its minimum size (None: the plan has no such group or the
    preview does not know a value the fit reads). DaemonSets first, then the one-per-node replicas on distinct nodes,
    then the rest by size on the emptiest node, as the scheduler's spreading would."""
    try:
        found = _system_node_group(graph)
        unreadable: list[str] = []
        everything = list(workloads(graph, unreadable))
    except NotKnown:
        return None
    if found is None:
        return None
    group, spec, size = found
    room_per_node = allocatable(spec)
    if isinstance(size, str):
        return SystemFit(group, spec.name, 0, room_per_node, (), (), (size, *unreadable))
    daemons = sum((w.requests for w in everything if w.replicas is None), Requests())
    loads = [daemons] * size
    unplaced = []

    def room(load: Requests, pod: Requests) -> bool:
        total = load + pod
        return total.millicpu <= room_per_node.millicpu and total.memory_mib <= room_per_node.memory_mib

    replicas = [w for w in everything if w.replicas is not None]
    for workload in sorted(replicas, key=lambda w: (not w.one_per_node, -w.requests.millicpu, -w.requests.memory_mib)):
        taken: set[int] = set()
        for replica in range(workload.replicas):
            candidates = [i for i in range(size) if room(loads[i], workload.requests) and i not in taken]
            if not candidates:  # loads only grow: no later replica finds room either
                unplaced += [f"{workload.name} ({n} of {workload.replicas})" for n in range(replica + 1, workload.replicas + 1)]
                break
            chosen = min(candidates, key=lambda i: (loads[i].millicpu, loads[i].memory_mib))
            loads[chosen] += workload.requests
            if workload.one_per_node:
                taken.add(chosen)
    if size == 0 and everything:
        unplaced.append("every system pod (systemNodeMinSize 0)")
    return SystemFit(group, spec.name, size, room_per_node, tuple(loads), tuple(unplaced), tuple(unreadable))


def summary(fit: dict) -> list[str]:
    """The lines ``preflight plan`` prints for ``SystemFit.to_json()``."""
    cpu, memory = fit["allocatableMillicpu"], fit["allocatableMemoryMiB"]
    unplaced, unreadable = fit["unplaced"], fit.get("unreadable") or []
    verdict = "fit" if fit["fits"] else "do NOT fit"
    verdict += (": no node has room for " + ", ".join(unplaced)) if unplaced else ""
    verdict += ("; cannot read " + "; ".join(unreadable)) if unreadable else ""
    lines = [
        f"System pods on {fit['nodes']} x {fit['instanceType']} (systemNodeMinSize; {cpu / 1000:.2f} vCPU and "
        f"{memory / 1024:.1f} GiB allocatable each): {verdict}"
    ]
    lines += [
        f"    node {i + 1}: {n['millicpu'] / 1000:.2f} vCPU, {n['memoryMiB'] / 1024:.1f} GiB requested"
        for i, n in enumerate(fit["requestedPerNode"])
    ]
    lines.append(f"    not counted: {fit['notCounted']}")
    return lines
