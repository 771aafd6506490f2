"""Kubernetes helpers shared by the components: pinned Helm releases and the platform's node selectors."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from trainium_eks import layout, versions


def helm_release(
    name: str,
    chart: versions.HelmChart,
    *,
    namespace: str,
    values: dict,
    parent: pulumi.Resource,
    provider: k8s.Provider,
    create_namespace: bool = False,
    depends_on: list | None = None,
) -> k8s.helm.v3.Release:
    """A Helm release of a pinned chart; the one place releases are built, so every one is pinned alike."""
    return k8s.helm.v3.Release(
        name,
        name=name,
        chart=chart.chart,
        version=chart.version,
        repository_opts={"repo": chart.repository} if chart.repository else None,
        namespace=namespace,
        create_namespace=create_namespace,
        values=values,
        atomic=True,  # a failed install or upgrade rolls back instead of leaving half a release
        cleanup_on_fail=True,
        timeout=600,
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=depends_on or []),
    )


def trainium_node_selector() -> dict[str, str]:
    return {layout.NODE_ROLE_LABEL: layout.TRAINIUM_NODE_ROLE}


def system_node_selector() -> dict[str, str]:
    return {layout.NODE_ROLE_LABEL: layout.SYSTEM_NODE_ROLE}
