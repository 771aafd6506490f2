"""Kubernetes helpers shared by the components: pinned Helm releases and the platform's node selectors."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from trainium_eks import layout, versions


def helm_release(
    component: str,
    release: str,
    chart: versions.HelmChart,
    *,
    namespace: str,
    values: dict,
    parent: pulumi.Resource,
    create_namespace: bool = False,
    skip_crds: bool = False,
    depends_on: list | None = None,
) -> k8s.helm.v3.Release:
    """A Helm release of a pinned chart; the one place releases are built, so every one is pinned alike.

    Named ``<component>-<release>`` in Pulumi and ``release`` in Helm; the Kubernetes provider comes from the
    parent component's options.
    """
    return k8s.helm.v3.Release(
        f"{component}-{release}",
        name=release,
        chart=chart.chart,
        version=chart.version,
        repository_opts={"repo": chart.repository} if chart.repository else None,
        namespace=namespace,
        create_namespace=create_namespace,
        skip_crds=skip_crds or None,
        values=values,
        atomic=True,  # a failed install or upgrade rolls back instead of leaving half a release
        cleanup_on_fail=True,
        timeout=600,
        # Releases were once named by release alone: the alias keeps a deployed release (a rename, not a replace).
        opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on or [], aliases=[pulumi.Alias(name=release)]),
    )


def trainium_node_selector() -> dict[str, str]:
    return {layout.NODE_ROLE_LABEL: layout.TRAINIUM_NODE_ROLE}


def system_node_selector() -> dict[str, str]:
    return {layout.NODE_ROLE_LABEL: layout.SYSTEM_NODE_ROLE}


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace


def ingress_policy(
    resource_name: str, *, name: str, namespace: pulumi.Input[str], labels: dict, ingress: list[dict], parent: pulumi.Resource
) -> k8s.networking.v1.NetworkPolicy:
    """A NetworkPolicy admitting to the pods labelled ``labels`` only the ``ingress`` rules' traffic."""
    return k8s.networking.v1.NetworkPolicy(
        resource_name,
        metadata={"name": name, "namespace": namespace, "labels": labels},
        spec={"podSelector": {"matchLabels": labels}, "policyTypes": ["Ingress"], "ingress": ingress},
        opts=pulumi.ResourceOptions(parent=parent),
    )


def from_namespace(namespace: pulumi.Input[str], port: int) -> dict:
    """A NetworkPolicy ingress rule: TCP ``port`` from the pods of ``namespace`` only."""
    return {
        "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}}],
        "ports": [{"port": port, "protocol": "TCP"}],
    }
