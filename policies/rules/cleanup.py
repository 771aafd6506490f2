"""Clean-up that leaves nothing behind: what `pulumi destroy` deletes outside the stack's state must still be deletable
when its turn comes, and nothing the platform causes may outlive the stack.

- Karpenter removes the instances, instance profiles and launch templates it made only while its controller runs:
  every NodePool and EC2NodeClass depends on the Karpenter release (so the engine deletes them first), and the release
  on its IAM role, its interruption queue and the system nodes it runs on.
- A StatefulSet's claims on a class that deletes volumes go with the StatefulSet
  (``persistentVolumeClaimRetentionPolicy.whenDeleted: Delete``): claims left behind keep their EBS volumes after the
  cluster, with nothing left to delete them.
- The EKS control-plane log group is the stack's, with a retention, and the cluster waits for it: a group EKS creates
  itself never expires and outlives `pulumi destroy`.
"""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph.graph import Graph, Node, dig, is_unknown, number
from policies.rules import Violation, describe
from trainium_eks import tokens
from trainium_eks.config.key_values import LOG_RETENTION_DAYS

KARPENTER_CHART = "karpenter"  # the controller's chart (karpenter-crd only brings the CRDs)
POOL_TYPES = (tokens.KARPENTER_NODE_POOL, tokens.KARPENTER_NODE_CLASS)
# What the controller needs until the pools are gone: its role (IRSA), its interruption queue, and nodes to run on.
CONTROLLER_NEEDS = {
    tokens.IAM_ROLE: "its IAM role",
    tokens.SQS_QUEUE: "its interruption queue",
    tokens.EKS_NODE_GROUP: "the system nodes",
}
CLAIMS_STAY = "its claims stay after it, and nothing deletes their volumes once the cluster is gone"
DELETES_CLAIMS = "Delete"


def _links(node: Node) -> list[Node]:
    """What ``node`` depends on directly: its dependencies, property dependencies and parent."""
    linked = [*node.dependencies, *(d for deps in node.property_dependencies.values() for d in deps)]
    return linked + ([node.parent] if node.parent is not None else [])


def depends_on(node: Node, wanted) -> list[Node]:
    """The resources ``node`` depends on, transitively, that ``wanted`` accepts."""
    seen, pending, found = {node}, list(_links(node)), []
    while pending:
        other = pending.pop()
        if other in seen:
            continue
        seen.add(other)
        if wanted(other):
            found.append(other)
        pending.extend(_links(other))
    return found


def _is_karpenter_release(node: Node) -> bool:
    chart = node.props.get("chart")
    return node.type == tokens.HELM_RELEASE and isinstance(chart, str) and chart.rsplit("/", 1)[-1] == KARPENTER_CHART


def karpenter_pools(graph: Graph) -> list[Node]:
    return sorted(graph.of_type(*POOL_TYPES), key=lambda n: n.urn)


def controller_of_pools(graph: Graph, pool: Node) -> Node | None:
    """The Karpenter release ``pool`` depends on, if any."""
    releases = depends_on(pool, _is_karpenter_release)
    return releases[0] if releases else None


def pools_outlived_by_karpenter(graph: Graph, config: dict) -> Iterator[Violation]:
    for pool in karpenter_pools(graph):
        if controller_of_pools(graph, pool) is None:
            yield Violation(
                pool.urn,
                f"{describe(pool)} does not depend on the Karpenter release: `pulumi destroy` may remove the controller "
                "first, and the instances, instance profile and launch templates Karpenter made for it then stay. "
                "Make it depend on the release (depends_on).",
            )
    for release in (n for n in graph if _is_karpenter_release(n)):
        for type_, what in CONTROLLER_NEEDS.items():
            if not depends_on(release, lambda n, t=type_: n.type == t):
                yield Violation(
                    release.urn,
                    f"{describe(release)} does not depend on {what}: `pulumi destroy` may remove it while the "
                    "controller still has NodePools to clean up. Make the release depend on it.",
                )


def _storage_class(graph: Graph, workload: Node, template: dict) -> Node | None:
    """The StorageClass a claim template names, or the one the workload's spec was computed from while the name is
    unknown (preview)."""
    name = dig(template, "spec", "storageClassName")
    classes = graph.of_type(tokens.K8S_STORAGE_CLASS)
    if isinstance(name, str) and not is_unknown(name):
        return next((c for c in classes if dig(c.props, "metadata", "name") == name), None)
    linked = workload.linked("spec", tokens.K8S_STORAGE_CLASS)
    return linked[0] if len(linked) == 1 else None


def volume_size_gib(template: dict) -> float | None:
    """The storage a claim template requests in GiB (``8Gi``), or None when it is not a plain Gi quantity."""
    request = dig(template, "spec", "resources", "requests", "storage")
    return number(request[:-2]) if isinstance(request, str) and request.endswith("Gi") else None


def _templates(workload: Node) -> list[dict]:
    templates = dig(workload.props, "spec", "volumeClaimTemplates")
    return [t for t in templates if isinstance(t, dict)] if isinstance(templates, list) else []


def _deletes_claims(workload: Node) -> bool:
    return dig(workload.props, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted") == DELETES_CLAIMS


def claims_that_stay(graph: Graph) -> Iterator[tuple[Node, int, float, str]]:
    """StatefulSets whose claims' volumes outlive them: (StatefulSet, claims, GiB each, why)."""
    for workload in graph.of_type(tokens.K8S_STATEFUL_SET):
        replicas = int(number(dig(workload.props, "spec", "replicas")) or 1)
        for template in _templates(workload):
            size = volume_size_gib(template) or 0.0
            storage_class = _storage_class(graph, workload, template)
            reclaim = storage_class.props.get("reclaimPolicy") if storage_class else None
            if reclaim == "Retain":
                yield workload, replicas, size, f"the class {storage_class.name} retains volumes (reclaimPolicy Retain)"
            elif not _deletes_claims(workload):
                yield workload, replicas, size, CLAIMS_STAY


def claims_go_with_workload(graph: Graph, config: dict) -> Iterator[Violation]:
    for workload in graph.of_type(tokens.K8S_STATEFUL_SET):
        if _deletes_claims(workload):
            continue
        for template in _templates(workload):
            storage_class = _storage_class(graph, workload, template)
            if storage_class is not None and storage_class.props.get("reclaimPolicy", "Delete") == "Delete":
                yield Violation(
                    workload.urn,
                    f"{describe(workload)} keeps its claims on {storage_class.name} (reclaimPolicy Delete) when it is "
                    "deleted: their EBS volumes outlive the cluster. Set spec.persistentVolumeClaimRetentionPolicy."
                    "whenDeleted to Delete.",
                )
                break


def _own_clusters(graph: Graph) -> list[Node]:
    """The control planes: pulumi-eks components, and EKS clusters created directly (not a component's child)."""
    return [
        n
        for n in graph.of_type(*tokens.EKS_CLUSTERS)
        if n.type == tokens.EKS_COMPONENT_CLUSTER or n.parent is None or n.parent.type != tokens.EKS_COMPONENT_CLUSTER
    ]


def _logging_clusters(graph: Graph) -> Iterator[tuple[Node, str]]:
    for cluster in _own_clusters(graph):
        name, types = cluster.props.get("name"), cluster.props.get("enabledClusterLogTypes")
        if isinstance(name, str) and not is_unknown(name) and types:
            yield cluster, f"/aws/eks/{name}/cluster"


def _log_group(graph: Graph, name: str) -> Node | None:
    return next((g for g in graph.of_type(tokens.CLOUDWATCH_LOG_GROUP) if g.props.get("name") == name), None)


def control_plane_log_group_missing(graph: Graph) -> list[str]:
    """Control-plane log groups EKS would create itself, outside the state."""
    return [name for _, name in _logging_clusters(graph) if _log_group(graph, name) is None]


def control_plane_log_group(graph: Graph, config: dict) -> Iterator[Violation]:
    for cluster, name in _logging_clusters(graph):
        group = _log_group(graph, name)
        if group is None:
            yield Violation(
                cluster.urn,
                f"{describe(cluster)} sends control-plane logs to {name}, which the stack does not create: EKS creates it "
                "with no retention, and `pulumi destroy` leaves it. Create the log group with a retention first.",
            )
            continue
        given = group.props.get("retentionInDays")
        days = number(given)
        if given is None or days == 0:  # the provider's 0 is "never expire" (pulumi-aws LogGroup docs)
            yield Violation(group.urn, f"{describe(group)} ({name}) has no retention: its logs never expire. Set one.")
        elif not is_unknown(given) and days not in LOG_RETENTION_DAYS:
            shown = given if days is None else f"{days:g}"
            yield Violation(
                group.urn,
                f"{describe(group)} ({name}) has retentionInDays {shown}, which CloudWatch Logs does not take: set one "
                f"of {', '.join(map(str, LOG_RETENTION_DAYS))} days",
            )
        if not depends_on(cluster, lambda n, wanted=group: n is wanted):
            yield Violation(
                cluster.urn,
                f"{describe(cluster)} does not wait for {name}: EKS may create the group first, and creating it then "
                "fails. Make the cluster's name depend on the log group.",
            )
