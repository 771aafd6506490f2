"""Managed node groups state their Kubernetes version, so an upgrade moves them in a reviewed step of its own.

Without ``version`` a node group takes the cluster's version when it is created and keeps it: the control plane
moves on an upgrade while the nodes stay behind unseen, and a diff never shows them. EKS refuses nodes newer than the
control plane, and a ``releaseVersion`` is a build of one Kubernetes version (``<kubelet>-<date>``), which must be
the group's.
"""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph.graph import Graph, Node, is_unknown
from plan_graph.trainium_groups import RELEASE_VERSION
from policies.rules import Violation, describe
from trainium_eks import tokens


def _minor(version: str) -> tuple[int, int] | None:
    parts = version.split(".") if isinstance(version, str) else []
    return (int(parts[0]), int(parts[1])) if len(parts) >= 2 and all(p.isascii() and p.isdigit() for p in parts[:2]) else None


def _cluster_version(node_group: Node) -> str | None:
    """The version of the cluster the group joins; None while a preview does not know it."""
    for cluster in node_group.linked("clusterName"):
        if cluster.type in tokens.EKS_CLUSTERS and isinstance(cluster.props.get("version"), str):
            version = cluster.props["version"]
            return None if is_unknown(version) else version
    return None


def node_group_version_explicit(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in graph.of_type(tokens.EKS_NODE_GROUP):
        version, release = group.props.get("version"), group.props.get("releaseVersion")
        if is_unknown(version):
            continue
        if _minor(version) is None:
            yield Violation(
                group.urn,
                f"{describe(group)} states no Kubernetes version ({version or 'unset'}): it would keep the version it "
                "was created with while the control plane moves; set version to the cluster's",
            )
            continue
        cluster = _cluster_version(group)
        if cluster is not None and _minor(cluster) is not None and _minor(version) > _minor(cluster):
            yield Violation(
                group.urn,
                f"{describe(group)} runs Kubernetes {version}, newer than its cluster's {cluster}, which EKS refuses; "
                "upgrade the control plane first",
            )
        match = RELEASE_VERSION.match(release) if isinstance(release, str) else None
        if match and _minor(release) != _minor(version):
            yield Violation(
                group.urn,
                f"{describe(group)} runs Kubernetes {version} but its releaseVersion {release} is a build of another "
                "version; pin the release's build for the group's version",
            )
