"""``python -m preflight destroy STACK``: what `pulumi destroy` does to a stack, read offline from its evaluated plan.

- The order: the engine deletes a resource only after every resource that depends on it is gone (its dependencies,
  property dependencies, parent and provider; a dependency on a component reaches the component's children), and
  deletes what no remaining resource depends on in parallel (pulumi/pulumi pkg/resource/graph/dependency_graph.go,
  ``DependenciesOf``). Each step below is one such round.
- What it refuses: a protected resource fails its delete step, and a resource whose input turns on deletion protection
  fails at the provider. `pulumi destroy --exclude-protected` deletes the rest and keeps each protected resource with
  everything it depends on, transitively (pulumi/pulumi pkg/cmd/pulumi/operations/destroy.go, getProtectedExcludes).
- What remains afterwards: those, with a monthly cost where the price catalog has a source; the final backup FSx takes
  of a persistent file system; volumes whose claims or class keep them; and what the stack refers to but another
  system owns.
- What Karpenter deletes on its own while its controller still runs: the nodes of its NodePools, and the instance
  profiles and launch templates of its EC2NodeClasses.
- What it needs of the Kubernetes API (``preflight/destroy_access.py``): the running jobs stopped first, and the way
  to the API (network, deploy runner, access host) deleted only after the last Kubernetes object.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from plan_graph.graph import Graph, Node, number
from policies.rules.cleanup import claims_that_stay, control_plane_log_group_missing, controller_of_pools, karpenter_pools
from preflight.destroy_access import ApiPathOrder, Drain, api_path_order, drain
from trainium_eks import catalog, service_prices, tokens, versions

DELETION_PROTECTION_INPUTS = ("deletionProtection", "enableDeletionProtection")
PERSISTENT_FSX = ("PERSISTENT_1", "PERSISTENT_2")
NOTHING_REMAINS = "nothing remains"


@dataclass(frozen=True)
class Remaining:
    what: str
    reason: str
    monthly_usd: float | None  # None: no sourced price (or billed by its owner)

    def to_json(self) -> dict:
        return {"what": self.what, "reason": self.reason, "monthlyUsd": self.monthly_usd}


@dataclass(frozen=True)
class DestroyPlan:
    stack: str
    steps: list[list[Node]]  # the resources each round deletes (components and providers left out)
    refused: list[tuple[Node, str]]
    remains: list[Remaining]
    karpenter: list[str]
    drain: Drain | None  # the jobs to stop before `pulumi destroy`
    api_path: ApiPathOrder | None

    def to_json(self) -> dict:
        return {
            "stack": self.stack,
            "drain": self.drain.to_json() if self.drain else None,
            "steps": [[_label(n) for n in step] for step in self.steps],
            "apiPath": self.api_path.to_json() if self.api_path else None,
            "refused": [{"resource": _label(n), "reason": reason} for n, reason in self.refused],
            "remains": [r.to_json() for r in self.remains],
            "karpenter": self.karpenter,
        }


def _label(node: Node) -> str:
    return f"{node.type} {node.name}"


def _shown(node: Node) -> bool:
    """Resources a delete calls a provider for: not components, the stack or providers."""
    return node.custom and not node.type.startswith("pulumi:")


def _descendants(graph: Graph) -> dict[Node, list[Node]]:
    children: dict[Node, list[Node]] = {}
    for node in graph:
        if node.parent is not None:
            children.setdefault(node.parent, []).append(node)
    result: dict[Node, list[Node]] = {}

    def walk(node: Node) -> list[Node]:
        if node not in result:
            result[node] = [d for child in children.get(node, []) for d in (child, *walk(child))]
        return result[node]

    for node in graph:
        walk(node)
    return result


def dependencies(graph: Graph) -> dict[Node, set[Node]]:
    """What each resource must outlive it: the resources it depends on, as the engine counts them for a delete."""
    below = _descendants(graph)
    result: dict[Node, set[Node]] = {}
    for node in graph:
        direct = {*node.dependencies, *(d for deps in node.property_dependencies.values() for d in deps)}
        # a component dependency reaches its children, except those that are this resource or hold it
        reached = {c for d in direct if not d.custom for c in below[d] if c is not node and node not in below[c]}
        result[node] = {d for d in (*direct, *reached, node.parent, node.provider) if d is not None and d is not node}
    return result


def _closure(start: Iterable[Node], edges: dict[Node, set[Node]]) -> set[Node]:
    seen: set[Node] = set()
    pending = list(start)
    while pending:
        node = pending.pop()
        if node not in seen:
            seen.add(node)
            pending.extend(edges[node])
    return seen


def deletion_steps(nodes: set[Node], edges: dict[Node, set[Node]]) -> list[list[Node]]:
    """Rounds of deletes over ``nodes``: a resource goes once nothing left in ``nodes`` depends on it."""
    dependents = {n: {m for m in nodes if n in edges[m]} for n in nodes}
    left, steps = set(nodes), []
    while left:
        ready = {n for n in left if not (dependents[n] & left)}
        if not ready:  # a cycle the engine would refuse too; show what is left as one round
            ready = set(left)
        steps.append(sorted(ready, key=lambda n: n.urn))
        left -= ready
    return steps


def _refusal(node: Node) -> str | None:
    if node.protect:
        return "protected: its delete step fails"
    # a remote component's child gets the setting from the component's inputs (pulumi-eks's deletionProtection)
    settings = [node.props, node.parent.props if node.parent is not None and not node.parent.custom else {}]
    for key in DELETION_PROTECTION_INPUTS:
        if any(props.get(key) is True for props in settings):
            return f"{key} is on: the provider refuses the delete"
    return None


def _monthly_usd(node: Node) -> float | None:
    """What a kept resource costs a month, where the price catalog has a source for it."""
    if node.type == tokens.EKS_CLUSTER:
        version = node.props.get("version")
        extended = version in versions.EXTENDED_SUPPORT_KUBERNETES_VERSIONS
        rate = service_prices.EKS_EXTENDED_SUPPORT_USD_PER_HOUR if extended else service_prices.EKS_CONTROL_PLANE_USD_PER_HOUR
        return round(rate * catalog.HOURS_PER_MONTH, 2)
    if node.type == tokens.FSX_LUSTRE_FILE_SYSTEM:
        tier = number(node.props.get("perUnitStorageThroughput")) or 0
        price = service_prices.FSX_LUSTRE_USD_PER_GB_MONTH.get((node.props.get("deploymentType"), int(tier)))
        capacity = number(node.props.get("storageCapacity"))
        return None if price is None or capacity is None else round(capacity * price, 2)
    if node.type == tokens.EC2_NAT_GATEWAY:
        return round(service_prices.NAT_GATEWAY_USD_PER_HOUR * catalog.HOURS_PER_MONTH, 2)
    return None


def _final_backups(deleted: set[Node], kept: set[Node]) -> list[Remaining]:
    """FSx takes a final backup of a persistent file system it deletes unless skipFinalBackup is set, and keeps it until
    someone deletes it (FSx API Reference, DeleteFileSystem, LustreConfiguration.SkipFinalBackup)."""
    result = []
    for fsx in (n for n in deleted | kept if n.type == tokens.FSX_LUSTRE_FILE_SYSTEM):
        if fsx.props.get("deploymentType") not in PERSISTENT_FSX or fsx.props.get("skipFinalBackup") is not False:
            continue
        when = "when this destroy deletes the file system" if fsx in deleted else "when the protected file system is deleted"
        result.append(
            Remaining(
                f"final FSx backup of {fsx.name}",
                f"taken {when} (skipFinalBackup false) and kept until you delete it; FSx bills backup storage per "
                "GB-month of data backed up (no sourced price in the catalog)",
                None,
            )
        )
    return result


def _volumes(graph: Graph, deleted: set[Node]) -> list[Remaining]:
    result = []
    for workload, claims, size_gib, reason in claims_that_stay(graph):
        if workload not in deleted:
            continue
        cost = round(claims * size_gib * service_prices.EBS_GP3_USD_PER_GB_MONTH, 2) if size_gib else None
        result.append(Remaining(f"{claims} EBS volume(s) of {workload.name}'s claims, {size_gib:g} GiB each", reason, cost))
    return result


def _owned_elsewhere(graph: Graph) -> list[Remaining]:
    """What the stack points at but another system owns: `pulumi destroy` never touches it."""
    result = []
    for association in graph.of_type(tokens.FSX_DATA_REPOSITORY_ASSOCIATION):
        path = association.props.get("dataRepositoryPath")
        result.append(Remaining(f"S3 data repository {path}", "yours: the files exported to it stay", None))
    topics = {a for alarm in graph.of_type(tokens.CLOUDWATCH_METRIC_ALARM) for a in alarm.props.get("alarmActions") or []}
    result += [Remaining(f"SNS topic {t}", "yours (alarmTopicArn): the stack only notifies it", None) for t in sorted(topics)]
    return result


def _karpenter(graph: Graph, steps: list[list[Node]]) -> list[str]:
    pools = karpenter_pools(graph)
    if not pools:
        return []
    step_of = {n: i for i, step in enumerate(steps, 1) for n in step}
    lines = [
        "deleting a NodePool drains and terminates the instances Karpenter launched for it; deleting an EC2NodeClass "
        "deletes the instance profile and launch templates Karpenter made from it (their finalizers, run by the "
        "controller)"
    ]
    for pool in pools:
        controller = controller_of_pools(graph, pool)
        if controller is None or pool not in step_of:
            continue
        lines.append(
            f"{pool.name} (step {step_of[pool]}) goes before the Karpenter release {controller.name} "
            f"(step {step_of.get(controller, '-')}), which its controller needs to finish"
        )
    return lines


def plan_destroy(records: list[dict], stack: str) -> DestroyPlan:
    graph = Graph.from_records(records)
    edges = dependencies(graph)
    refused = [(n, reason) for n in graph if (reason := _refusal(n)) is not None]
    kept = _closure((n for n, _ in refused), edges)
    deleted = set(graph) - kept
    steps = [shown for step in deletion_steps(deleted, edges) if (shown := [n for n in step if _shown(n)])]
    reasons = dict(refused)
    remains = [
        Remaining(_label(n), reasons.get(n, "a protected resource depends on it"), _monthly_usd(n))
        for n in sorted(kept, key=lambda n: n.urn)
        if _shown(n)
    ]
    remains += _final_backups(deleted, kept) + _volumes(graph, deleted) + _owned_elsewhere(graph)
    remains += [
        Remaining(group, "EKS creates it outside the stack's state, with no retention", None)
        for group in control_plane_log_group_missing(graph)
    ]
    return DestroyPlan(
        stack,
        steps,
        [(n, r) for n, r in refused if _shown(n)],
        remains,
        _karpenter(graph, steps),
        drain(graph, steps),
        api_path_order(graph, steps),
    )


def report(plan: DestroyPlan) -> str:
    lines = []
    if plan.drain:
        lines.append(f"first, stop the running jobs ({plan.drain.reason}):")
        lines += [f"  {command}" for command in plan.drain.commands]
    lines.append(f"pulumi destroy {plan.stack}: {sum(map(len, plan.steps))} resources deleted in {len(plan.steps)} steps")
    for index, step in enumerate(plan.steps, 1):
        lines.append(f"  step {index}:")
        lines += [f"    {_label(n)}" for n in step]
    if plan.api_path:
        lines.append(plan.api_path.line())
    if plan.karpenter:
        lines.append("Karpenter, while its controller runs:")
        lines += [f"  {line}" for line in plan.karpenter]
    if plan.refused:
        lines.append("refused (`pulumi destroy` stops at these; `pulumi destroy --exclude-protected` keeps them):")
        lines += [f"  {_label(n)}: {reason}" for n, reason in plan.refused]
    if not plan.remains:
        lines.append(f"afterwards: {NOTHING_REMAINS}")
        return "\n".join(lines)
    known = sum(r.monthly_usd for r in plan.remains if r.monthly_usd is not None)
    lines.append(f"afterwards, remains (at least {known:,.2f} USD a month where a price is sourced):")
    for r in plan.remains:
        cost = "no sourced price" if r.monthly_usd is None else f"{r.monthly_usd:,.2f} USD/month"
        lines.append(f"  {r.what}: {r.reason} [{cost}]")
    return "\n".join(lines)
