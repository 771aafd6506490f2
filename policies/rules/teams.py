"""Team rules: each team's workspace stays its own. Access in its namespace only, a Role that leaves the platform's
limits alone, a volume on its own directory of the file system, quotas that together fit the Neuron capacity the
node groups provide, whole nodes of each group that together fit what the group runs, and a quota and queue that each
hold a whole node of every group (``trainium_eks.shares``).

Teams are recognised by the label (Kubernetes) or tag (AWS) ``trainium-eks/team`` the platform puts on each of their
resources.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from plan_graph.graph import Graph, Node, dig, known
from plan_graph.trainium_groups import trainium_groups
from policies.rules import Violation, describe, shown
from policies.rules.scheduling import plan_fleet, provisioned_capacity
from trainium_eks import layout, names, shares, tokens
from trainium_eks.quantities import quantity

QUOTA_PREFIX = "requests."
GROUP_NODES_ANNOTATION = layout.TEAM_GROUP_NODES_ANNOTATION
WHOLE_NUMBER = re.compile(r"\A[0-9]+\Z")  # what CEL's int() reads, never negative
READ_VERBS = frozenset({"get", "list", "watch"})
# What holds a team to its share and its network, which a team's Role may read but never change: its quota and
# NetworkPolicies, the Volcano queues and the PodGroups that hold a job's place in them.
PLATFORM_HELD = frozenset(
    {
        ("", "resourcequotas"),
        ("networking.k8s.io", "networkpolicies"),
        ("scheduling.volcano.sh", "queues"),
        ("scheduling.volcano.sh", "podgroups"),
    }
)
# The verbs that let a holder grant more than it holds (Kubernetes RBAC, "Privilege escalation prevention").
ESCALATING_VERBS = frozenset({"bind", "escalate"})
RBAC_GROUP = "rbac.authorization.k8s.io"
ROLE_RESOURCES = frozenset({"roles", "clusterroles"})


def team_of(node: Node) -> str | None:
    team = dig(node.props, "metadata", "labels", layout.TEAM_LABEL) or dig(node.props, "tags", layout.TEAM_LABEL)
    return team if isinstance(team, str) and known(team) else None


def _group_subjects(binding: Node) -> list[object]:
    """The names of the groups ``binding`` names as subjects, as written."""
    subjects = binding.props.get("subjects")
    if not isinstance(subjects, list):
        return []
    return [s.get("name") for s in subjects if isinstance(s, dict) and s.get("kind") == "Group" and known(s.get("name"))]


def _bound_teams(binding: Node, groups: dict[str, str]) -> Iterator[Violation | str]:
    """The teams whose group ``binding`` names, and a violation for a group name that is no string (it may be any
    team's: fail closed)."""
    for name in _group_subjects(binding):
        if not isinstance(name, str):
            yield Violation(binding.urn, f"{describe(binding)} names the group {name!r}, which is no group name")
        elif name in groups:
            yield groups[name]


def team_access_namespaced(graph: Graph, config: dict) -> Iterator[Violation]:
    entries = [(entry, team_of(entry)) for entry in graph.of_type(tokens.EKS_ACCESS_ENTRY)]
    principals: dict[str, str] = {}
    for entry, team in entries:
        if not team:
            continue
        principal, groups = entry.props.get("principalArn"), entry.props.get("kubernetesGroups")
        if isinstance(principal, str):
            principals[principal] = team
            if entry.region and names.arn_partition(principal) != names.partition(entry.region):
                yield Violation(
                    entry.urn,
                    f"{describe(entry)} of team {team} names {principal}, of partition {names.arn_partition(principal)}: "
                    f"no principal outside {names.partition(entry.region)} reaches a {entry.region} cluster; use one of it",
                )
        elif known(principal):
            yield Violation(entry.urn, f"{describe(entry)} of team {team} names the principal {principal!r}, which is no ARN")
        if known(groups) and groups != [layout.team_group(team)]:
            yield Violation(
                entry.urn,
                f"{describe(entry)} of team {team} carries the groups {groups!r}; a member's entry carries "
                f"{layout.team_group(team)} alone, bound in {layout.team_namespace(team)}",
            )
    for association in graph.of_type(tokens.EKS_ACCESS_POLICY_ASSOCIATION):
        principal = association.props.get("principalArn")
        if not known(principal):
            continue
        if not isinstance(principal, str):  # it may be a team member's: fail closed
            if principals:
                yield Violation(association.urn, f"{describe(association)} names the principal {principal!r}, which is no ARN")
            continue
        team, scope = principals.get(principal), association.props.get("accessScope")
        if team is None or not known(scope):
            continue
        if (
            not isinstance(scope, dict)
            or scope.get("type") != "namespace"
            or scope.get("namespaces") != [layout.team_namespace(team)]
        ):
            yield Violation(
                association.urn,
                f"{describe(association)} grants a member of team {team} {association.props.get('policyArn')} beyond "
                f"the namespace {layout.team_namespace(team)}; scope it to that namespace, or remove it",
            )
    groups = {layout.team_group(team): team for _, team in entries if team}
    groups.update({layout.team_group(team): team for team in filter(None, map(team_of, graph.of_type(tokens.K8S_NAMESPACE)))})
    if not groups:
        return
    for binding in graph.of_type(tokens.K8S_CLUSTER_ROLE_BINDING):
        for team in _bound_teams(binding, groups):
            yield (
                team
                if isinstance(team, Violation)
                else Violation(
                    binding.urn,
                    f"{describe(binding)} binds team {team}'s group cluster-wide; bind a Role in {layout.team_namespace(team)}",
                )
            )
    for binding in graph.of_type(tokens.K8S_ROLE_BINDING):
        namespace = dig(binding.props, "metadata", "namespace")
        for team in _bound_teams(binding, groups):
            if isinstance(team, Violation):
                yield team
            elif known(namespace) and namespace != layout.team_namespace(team):
                yield Violation(
                    binding.urn,
                    f"{describe(binding)} gives team {team} access to the namespace {namespace}; a team acts in "
                    f"{layout.team_namespace(team)} only",
                )


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _beyond_team(rule: object) -> Iterator[str]:
    """What one rule of a Role grants that a team's Role must not."""
    if not isinstance(rule, dict):
        return
    groups, resources, verbs = (_strings(rule.get(key)) for key in ("apiGroups", "resources", "verbs"))
    wildcards = [key for key, values in (("apiGroups", groups), ("resources", resources), ("verbs", verbs)) if "*" in values]
    if wildcards:
        yield f"'*' in its {' and '.join(wildcards)}"
        return
    writes, escalating = sorted(set(verbs) - READ_VERBS), sorted(ESCALATING_VERBS & set(verbs))
    for group in groups:
        for resource in resources:
            base = resource.split("/")[0]  # a subresource (resourcequotas/status) is its resource's
            if writes and (group, base) in PLATFORM_HELD:
                yield f"{', '.join(writes)} on {resource}"
            if escalating and group == RBAC_GROUP and base in ROLE_RESOURCES:
                yield f"{', '.join(escalating)} on {resource}"


def team_role_bounded(graph: Graph, config: dict) -> Iterator[Violation]:
    """A Role of a team (labelled, or in a team's namespace) holds no wildcard, changes none of what holds the team
    to its share and network, and cannot grant more than it holds."""
    namespaces = {layout.team_namespace(t): t for t in filter(None, map(team_of, graph.of_type(tokens.K8S_NAMESPACE)))}
    for role in graph.of_type(tokens.K8S_ROLE):
        namespace = dig(role.props, "metadata", "namespace")
        team = team_of(role) or (namespaces.get(namespace) if isinstance(namespace, str) else None)
        rules = role.props.get("rules")
        if team is None or not known(rules) or not isinstance(rules, list):
            continue
        grants = [grant for rule in rules for grant in _beyond_team(rule)]
        if grants:
            yield Violation(
                role.urn,
                f"{describe(role)} of team {team} grants {'; '.join(grants)}; a team's Role names its API groups, "
                "resources and verbs, only reads its quota, NetworkPolicies, queues and PodGroups, and holds no bind "
                "or escalate on Roles",
            )


def _own_directory(mount_name: str, directory: str) -> bool:
    """``<file system mount name><directory>``: one segment, the file system's, before the team's directory. Anything
    else (``..`` segments, a path through another team's directory) may reach beyond it."""
    prefix = mount_name[: -len(directory)] if mount_name.endswith(directory) else None
    return prefix is not None and "/" not in prefix and prefix not in ("", ".", "..")


def team_volume_own_directory(node: Node, config: dict) -> Iterator[Violation]:
    team = team_of(node)
    if team is None:
        return
    mount_name = dig(node.props, "spec", "csi", "volumeAttributes", "mountname")
    directory = layout.team_directory(team)
    if (
        known(mount_name)
        and mount_name is not None
        and not (isinstance(mount_name, str) and _own_directory(mount_name, directory))
    ):
        yield Violation(
            node.urn,
            f"{describe(node)} of team {team} mounts '{mount_name}', not the team's directory; set its mountname to "
            f"<mount name>{directory}, so that the team sees nothing of the file system above it",
        )
    claim, namespace = dig(node.props, "spec", "claimRef"), layout.team_namespace(team)
    if not known(claim):
        return
    if claim is not None and not isinstance(claim, dict):  # it reserves the volume for no claim
        held = f"claimRef {claim!r}, which is no object reference"
    elif (claim or {}).get("namespace") != namespace:
        held = f"claimRef namespace {(claim or {}).get('namespace')!r}"
    else:
        return
    yield Violation(
        node.urn,
        f"{describe(node)} of team {team} is not reserved for its namespace ({held}); bind it to the team's claim in {namespace}",
    )


def _hard(quota: Node, resource: str) -> object:
    """The quota's hard limit on ``requests.<resource>`` as written (None: it sets none)."""
    return dig(quota.props, "spec", "hard", QUOTA_PREFIX + resource)


def team_quotas_within_capacity(graph: Graph, config: dict) -> Iterator[Violation]:
    quotas = {team: quota for quota in graph.of_type(tokens.K8S_RESOURCE_QUOTA) if (team := team_of(quota))}
    for namespace in graph.of_type(tokens.K8S_NAMESPACE):
        team = team_of(namespace)
        if team and (team not in quotas or _hard(quotas[team], layout.NEURON_DEVICE_RESOURCE) is None):
            yield Violation(
                namespace.urn,
                f"{describe(namespace)} of team {team} has no ResourceQuota on {QUOTA_PREFIX}{layout.NEURON_DEVICE_RESOURCE}; "
                "give the team its share as a quota",
            )
    amounts = {}  # team -> resource -> the quota's hard limit, as a number
    for team, quota in sorted(quotas.items()):
        hard = dig(quota.props, "spec", "hard")
        if not known(hard):
            continue
        if not isinstance(hard, dict):
            hard = {"": hard}  # reported below: a hard limit that is no map of quantities
        amounts[team] = {}
        for key, value in hard.items():
            amount = quantity(value)
            if amount is None:
                yield Violation(
                    quota.urn,
                    f"{describe(quota)} of team {team} sets {key or 'spec.hard'} to {value!r}, which is no Kubernetes "
                    "quantity; write a number such as 16 (or 16k, 1Ki, 1e3)",
                )
            elif key.startswith(QUOTA_PREFIX):
                amounts[team][key.removeprefix(QUOTA_PREFIX)] = amount
    yield from _group_nodes_fit(graph)
    capacity = provisioned_capacity(graph)
    if capacity is None or not amounts:
        return
    for resource, provided in capacity.items():
        asked = [(team, held[resource]) for team, held in amounts.items() if resource in held]
        total = sum(amount for _, amount in asked)
        if total > provided:
            by_team = ", ".join(f"{team} {shown(float(amount))}" for team, amount in asked)
            yield Violation(
                quotas[asked[0][0]].urn,
                f"the teams' quotas add up to {shown(float(total))} {resource} ({by_team}) but the node groups provide "
                f"{provided} at their maximum size; lower the teams' neuronShare or raise maxSize",
            )


def _group_nodes_fit(graph: Graph) -> Iterator[Violation]:
    """The teams' whole nodes of each group (their namespaces' GROUP_NODES_ANNOTATION) add up to what the group runs:
    an elastic group's maxSize, a managed group's desiredSize (the nodes it runs until the stack scales it), so that
    every team's nodes of the group fit it at once (docs/teams.md, "Capacity")."""
    granted: dict[str, list[tuple[str, int, Node]]] = {}  # group -> (team, nodes, namespace)
    for namespace in graph.of_type(tokens.K8S_NAMESPACE):
        annotations, team = dig(namespace.props, "metadata", "annotations"), team_of(namespace)
        if not team or not isinstance(annotations, dict):
            continue
        for key, value in annotations.items():
            if not key.startswith(GROUP_NODES_ANNOTATION) or not known(value):
                continue
            if not (isinstance(value, str) and WHOLE_NUMBER.match(value)):
                yield Violation(
                    namespace.urn,
                    f"{describe(namespace)} of team {team} sets {key} to {value!r}, which is no whole number of nodes; "
                    "the platform writes floor(neuronShare x maxSize) there, as digits",
                )
                continue
            granted.setdefault(key.removeprefix(GROUP_NODES_ANNOTATION), []).append((team, int(value), namespace))
    for group in trainium_groups(graph):
        runs, size = (group.max_size, "maxSize") if group.elastic else (group.desired_size, "desiredSize")
        held = granted.get(group.name or "", [])
        total = sum(nodes for _, nodes, _ in held)
        if runs is None or total <= runs:
            continue
        by_team = ", ".join(f"{team} {nodes}" for team, nodes, _ in held)
        yield Violation(
            held[0][2].urn,
            f"the teams' whole nodes of node group {group.name} add up to {total} ({by_team}), but the group runs "
            f"{runs} ({size}); lower the teams' neuronShare or raise the group's {size}, so that each team's nodes are "
            "there when it trains",
        )


def _limits(amounts: object, prefix: str) -> dict:
    """The quota'd resources a quota's ``hard`` (keys ``prefix``+resource) or a queue's capability limits, as numbers;
    an amount that is no quantity is left to team-quotas-within-capacity and volcano-queue-within-capacity."""
    if not isinstance(amounts, dict) or not known(amounts):
        return {}
    limits = {}
    for resource in shares.QUOTAED_RESOURCES:
        amount = quantity(amounts.get(prefix + resource))
        if amount is not None:
            limits[resource] = amount
    return limits


def team_quotas_hold_a_node(graph: Graph, config: dict) -> Iterator[Violation]:
    """A team is entitled to whole nodes of every group: its quota and its queue must each hold one node of each group
    on every resource the node advertises, or no job of the team fits there (docs/teams.md, "Capacity")."""
    fleet = plan_fleet(graph)
    if not fleet:
        return
    held = [
        (quota, team, _limits(dig(quota.props, "spec", "hard"), QUOTA_PREFIX))
        for quota in graph.of_type(tokens.K8S_RESOURCE_QUOTA)
        if (team := team_of(quota))
    ]
    held += [
        (queue, team, _limits(dig(queue.props, "spec", "capability"), ""))
        for queue in graph.of_type(tokens.VOLCANO_QUEUE)
        if (team := team_of(queue))
    ]
    for node, team, limits in held:
        for group in fleet:
            if shares.nodes_held(limits, group) >= 1:
                continue
            short = ", ".join(
                f"{shown(float(limits[resource]))} of the {amount} {resource}"
                for resource, amount in group.per_node.items()
                if resource in limits and limits[resource] < amount
            )
            yield Violation(
                node.urn,
                f"{describe(node)} of team {team} holds {short} one {group.instance_type} node of group {group.name} "
                "advertises, so no job of the team fits there; raise the team's neuronShare so that it is entitled to "
                "a whole node of every group (floor(neuronShare x maxSize) >= 1)",
            )
