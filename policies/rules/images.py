"""Image provenance rules: EKS-published images come from the stack's own region.

EKS replicates the images it publishes to a registry in every region it supports (EKS User Guide, "View Amazon
container image registries for Amazon EKS add-ons"; that the EFA device plugin's image is among them is an
inference, see trainium_eks/versions.py), so a node need not pull one across regions; a chart's default (the EFA
plugin's is us-west-2's) would make every other stack do so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from plan_graph.graph import Graph, dig, is_unknown
from policies.rules import Violation, describe
from trainium_eks import tokens, versions

HELM_RELEASE_TYPES = (tokens.HELM_RELEASE, tokens.HELM_CHART)
EFA_CHART = "aws-efa-k8s-device-plugin"
EKS_IMAGE = re.compile(r"\A\d{12}\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com/eks/", re.ASCII)


def stack_region(graph: Graph) -> str | None:
    """The region of the stack's AWS resources (their providers'), or None when it is unknown or not one region."""
    regions = {node.region for node in graph if node.region}
    return regions.pop() if len(regions) == 1 else None


def eks_images_from_stack_region(graph: Graph, config: dict) -> Iterator[Violation]:
    region = stack_region(graph)
    if region is None:
        return
    wanted = (
        versions.eks_image_repository(region, versions.EFA_DEVICE_PLUGIN_IMAGE_REPOSITORY)
        if region in versions.EKS_IMAGE_REGISTRY_ACCOUNTS
        else f"the EKS image registry of {region}"
    )
    for release in graph.of_type(*HELM_RELEASE_TYPES):
        repository = dig(release.props, "values", "image", "repository")
        if is_unknown(repository):
            continue
        is_efa_plugin = str(release.props.get("chart", "")).rstrip("/").endswith(EFA_CHART)
        if repository is None and is_efa_plugin:
            yield Violation(
                release.urn,
                f"{describe(release)} keeps the chart's default image repository (us-west-2's registry); "
                f"set values.image.repository to {wanted}",
            )
            continue
        match = EKS_IMAGE.match(str(repository or ""))
        if match and match["region"] != region:
            yield Violation(
                release.urn,
                f"{describe(release)} pulls '{repository}' from {match['region']} into a {region} stack; "
                f"use the registry of {region}" + (f" ({wanted})" if is_efa_plugin else ""),
            )
