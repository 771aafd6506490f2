"""The system pods fit the system node group at its minimum size (``plan_graph.system_fit``): a controller that
cannot be scheduled stops what it runs (Karpenter brings no node, Volcano schedules no job, etcd has no member).
A value the fit cannot read (a string for a map, ``"x"`` for a quantity) fails it; one the preview does not know yet
skips it."""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph.graph import Graph
from plan_graph.system_fit import system_fit
from policies.rules import Violation, describe


def system_pods_fit(graph: Graph, config: dict) -> Iterator[Violation]:
    fit = system_fit(graph)
    if fit is None or fit.fits:
        return
    if fit.unreadable:
        yield Violation(
            fit.node_group.urn,
            f"the system pods' fit on {describe(fit.node_group)} cannot be judged: {'; '.join(fit.unreadable)}; "
            "write each as the Kubernetes API (or the chart) takes it",
        )
    if not fit.unplaced:
        return
    yield Violation(
        fit.node_group.urn,
        f"{describe(fit.node_group)} at its minimum size ({fit.nodes} x {fit.instance_type}, "
        f"{fit.allocatable.millicpu / 1000:.2f} vCPU and {fit.allocatable.memory_mib / 1024:.1f} GiB allocatable each) "
        f"has no room for {', '.join(fit.unplaced)}; raise systemNodeMinSize or use a larger systemNodeInstanceType",
    )
