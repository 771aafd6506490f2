"""What a change of Kubernetes version or node image does beyond the inputs it changes: the nodes Karpenter replaces
(drift), the Trainium groups a node image move rolls, and the moves back that EKS refuses.

Each finding is ``{"urn", "why"}``: the resource, and one sentence naming the values, the reason and what to do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from plan_graph.graph import Graph
from plan_graph.trainium_groups import RELEASE_VERSION, TrainiumGroup, trainium_groups
from trainium_eks import tokens, versions


def cluster_version(resources: Mapping[str, dict]) -> str | None:
    found = [r["inputs"].get("version") for r in resources.values() if r["type"] in tokens.EKS_CLUSTERS]
    return found[0] if found else None


def version_drifts(old: Mapping[str, dict], new: Mapping[str, dict]) -> list[dict]:
    """The EC2NodeClasses whose nodes Karpenter replaces because the control plane's version changed: their inputs
    stay the same, but an ``al2023@<release>`` alias resolves to that release's build for the cluster's version
    (Karpenter docs, FAQ "How do I upgrade an EKS Cluster with Karpenter?": drift keeps the nodes in step with it)."""
    before, after = cluster_version(old), cluster_version(new)
    if before == after:
        return []
    return [
        {"urn": urn, "why": f"its AMI alias resolves to the Kubernetes {after} build (was {before})"}
        for urn, r in sorted(new.items())
        if r["type"] == tokens.KARPENTER_NODE_CLASS
        and any("alias" in term for term in ((r["inputs"].get("spec") or {}).get("amiSelectorTerms") or []))
    ]


def _release(group: TrainiumGroup | None) -> str | None:
    """The node image release a group pins, as ``v<date>`` (None: none, or not known)."""
    pinned = group.pinned_release() if group is not None else None
    return f"v{pinned[0]}" if pinned and pinned[0] else None


def _with_driver(tag: str | None) -> str:
    release = versions.NODE_IMAGE_RELEASES.get(tag or "")
    if release is None:
        return tag or "no pinned release"
    return f"{tag} (Neuron driver {release.neuron_driver or 'not sourced'})"


def node_image_moves(old: Mapping[str, dict], new: Mapping[str, dict], changed: Iterable) -> list[dict]:
    """The Trainium groups whose node image release changes. Each group pins its own release (its training stack's,
    or trainiumNodeGroups[i].nodeImageRelease), so a move replaces that group's nodes (the change of its node group or
    EC2NodeClass, ``diff.Change.nodes``) and leaves every other group's as they are. Each finding is ``{"urn",
    "group", "release": {"old", "new"}, "why"}``."""
    before = {g.node.urn: g for g in trainium_groups(Graph.from_records(list(old.values())))}
    groups = trainium_groups(Graph.from_records(list(new.values())))
    how = {c.urn: c.nodes for c in changed if c.nodes}
    moved = [g for g in groups if g.node.urn in before and _release(before[g.node.urn]) != _release(g)]
    moved_urns = {g.node.urn for g in moved}
    found = []
    for group in moved:
        was, now = _release(before[group.node.urn]), _release(group)
        name = group.name or group.node.name
        rolls = how.get(group.node.urn) or (how.get(group.template.urn) if group.template else None) or "its nodes are replaced"
        others = [g.name or g.node.name for g in groups if g.node.urn not in moved_urns]
        kept = f"; the nodes of {', '.join(others)} stay as they are" if others else ""
        found.append(
            {
                "urn": group.node.urn,
                "group": name,
                "release": {"old": was, "new": now},
                "why": f"its {group.spec.name} nodes move from node image release {_with_driver(was)} to "
                f"{_with_driver(now)}: {rolls}{kept}",
            }
        )
    return found


def refused(changed: Iterable, new: Mapping[str, dict]) -> list[dict]:
    """The changes (``diff.Change``) EKS refuses to apply: a control plane or a managed node group moved back."""
    found = []
    for change in changed:
        kind = new[change.urn]["type"]
        for path, old_value, new_value in change.values:
            if kind == tokens.EKS_CLUSTER and path == "version" and _older_version(old_value, new_value):
                found.append({"urn": change.urn, "why": _control_plane_downgrade(old_value, new_value)})
            elif kind == tokens.EKS_NODE_GROUP and _node_group_rollback(path, old_value, new_value):
                found.append(
                    {
                        "urn": change.urn,
                        # EKS API Reference, UpdateNodegroupVersion: "You cannot roll back a node group to an earlier
                        # Kubernetes version or AMI version". A new group (another name) is created at any release.
                        "why": f"{path} {old_value} -> {new_value} rolls the group back, which EKS refuses; keep "
                        f"{old_value}, or give the group a new name so that a new group replaces it",
                    }
                )
    return found


def _control_plane_downgrade(old: str, new: str) -> str:
    """EKS User Guide, "Update existing cluster to new Kubernetes version": once upgraded, a cluster cannot be
    downgraded; "Rollback cluster to previous Kubernetes version": except by one minor version, within 7 days of the
    in-place upgrade from it (never for a cluster created at its version). Offline, neither is known: the line says
    when EKS would take it."""
    (major, minor), target = versions.minor_version(old), versions.minor_version(new)
    rollback = (
        f", except as a version rollback started within 7 days of this cluster's in-place upgrade from {new}"
        if target == (major, minor - 1)
        else " (a version rollback goes back one minor version only)"
    )
    return (
        f"version {old} -> {new} moves the control plane back, which EKS refuses{rollback} (EKS User Guide, "
        f'"Rollback cluster to previous Kubernetes version"); keep {old}'
    )


def _node_group_rollback(path: str, old: Any, new: Any) -> bool:
    if path == "version":
        return _older_version(old, new)
    return path == "releaseVersion" and _older_release(old, new)


def _older_version(old: Any, new: Any) -> bool:
    if not all(isinstance(v, str) and re.fullmatch(r"\d+\.\d+", v) for v in (old, new)):
        return False
    return versions.minor_version(new) < versions.minor_version(old)


def _older_release(old: Any, new: Any) -> bool:
    dates = [RELEASE_VERSION.match(v) if isinstance(v, str) else None for v in (old, new)]
    return all(dates) and dates[1].group(1) < dates[0].group(1)
