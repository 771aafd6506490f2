"""Team rules: each team's workspace stays its own. Access in its namespace only, a volume on its own directory of
the file system, and quotas that together fit the Neuron capacity the node groups provide.

Teams are recognised by the label (Kubernetes) or tag (AWS) ``trainium-eks/team`` the platform puts on each of their
resources.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rules import Violation, describe, shown
from policies.rules.scheduling import provisioned_capacity
from trainium_eks import layout, tokens
from trainium_eks.graph import Graph, Node, dig, is_unknown, known

QUOTA_PREFIX = "requests."


def team_of(node: Node) -> str | None:
    team = dig(node.props, "metadata", "labels", layout.TEAM_LABEL) or dig(node.props, "tags", layout.TEAM_LABEL)
    return team if isinstance(team, str) and known(team) else None


def _team_subjects(binding: Node, groups: dict[str, str]) -> list[str]:
    """The teams whose group ``binding`` names as a subject."""
    subjects = binding.props.get("subjects")
    if not isinstance(subjects, list):
        return []
    return [groups[s["name"]] for s in subjects if isinstance(s, dict) and s.get("kind") == "Group" and s.get("name") in groups]


def team_access_namespaced(graph: Graph, config: dict) -> Iterator[Violation]:
    entries = [(entry, team_of(entry)) for entry in graph.of_type(tokens.EKS_ACCESS_ENTRY)]
    principals = {entry.props.get("principalArn"): team for entry, team in entries if team}
    for entry, team in entries:
        groups = entry.props.get("kubernetesGroups")
        if team and known(groups) and list(groups or []) != [layout.team_group(team)]:
            yield Violation(
                entry.urn,
                f"{describe(entry)} of team {team} carries the groups {groups}; a member's entry carries "
                f"{layout.team_group(team)} alone, bound in {layout.team_namespace(team)}",
            )
    for association in graph.of_type(tokens.EKS_ACCESS_POLICY_ASSOCIATION):
        team = principals.get(association.props.get("principalArn"))
        scope = association.props.get("accessScope") or {}
        if team is None or is_unknown(scope):
            continue
        if scope.get("type") != "namespace" or list(scope.get("namespaces") or []) != [layout.team_namespace(team)]:
            yield Violation(
                association.urn,
                f"{describe(association)} grants a member of team {team} {association.props.get('policyArn')} beyond "
                f"the namespace {layout.team_namespace(team)}; scope it to that namespace, or remove it",
            )
    groups = {layout.team_group(team): team for _, team in entries if team}
    groups.update({layout.team_group(team): team for team in filter(None, map(team_of, graph.of_type(tokens.K8S_NAMESPACE)))})
    for binding in graph.of_type(tokens.K8S_CLUSTER_ROLE_BINDING):
        for team in _team_subjects(binding, groups):
            yield Violation(
                binding.urn,
                f"{describe(binding)} binds team {team}'s group cluster-wide; bind a Role in {layout.team_namespace(team)}",
            )
    for binding in graph.of_type(tokens.K8S_ROLE_BINDING):
        namespace = dig(binding.props, "metadata", "namespace")
        for team in _team_subjects(binding, groups):
            if known(namespace) and namespace != layout.team_namespace(team):
                yield Violation(
                    binding.urn,
                    f"{describe(binding)} gives team {team} access to the namespace {namespace}; a team acts in "
                    f"{layout.team_namespace(team)} only",
                )


def team_volume_own_directory(node: Node, config: dict) -> Iterator[Violation]:
    team = team_of(node)
    if team is None:
        return
    mount_name = dig(node.props, "spec", "csi", "volumeAttributes", "mountname")
    directory = layout.team_directory(team)
    if known(mount_name) and isinstance(mount_name, str) and not mount_name.endswith(directory):
        yield Violation(
            node.urn,
            f"{describe(node)} of team {team} mounts '{mount_name}', not the team's directory; set its mountname to "
            f"<mount name>{directory}, so that the team sees nothing of the file system above it",
        )
    claim = dig(node.props, "spec", "claimRef") or {}
    if known(claim) and claim.get("namespace") != layout.team_namespace(team):
        yield Violation(
            node.urn,
            f"{describe(node)} of team {team} is not reserved for its namespace (claimRef namespace "
            f"{claim.get('namespace')!r}); bind it to the team's claim in {layout.team_namespace(team)}",
        )


def _hard(quota: Node, resource: str) -> float | None:
    value = dig(quota.props, "spec", "hard", QUOTA_PREFIX + resource)
    return float(value) if known(value) and value is not None else None


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
    capacity = provisioned_capacity(graph)
    if capacity is None or not quotas:
        return
    for resource, provided in capacity.items():
        asked = [(team, _hard(quota, resource)) for team, quota in sorted(quotas.items())]
        total = sum(amount for _, amount in asked if amount is not None)
        if total > provided:
            shares = ", ".join(f"{team} {shown(amount)}" for team, amount in asked if amount is not None)
            yield Violation(
                quotas[asked[0][0]].urn,
                f"the teams' quotas add up to {shown(total)} {resource} ({shares}) but the node groups provide "
                f"{provided} at their maximum size; lower the teams' neuronShare or raise maxSize",
            )
