"""Node health on Trainium node groups: EKS node auto repair (Karpenter's node repair for an elastic pool) where the
stack requires it, and the node monitoring agent that repair needs to see a Neuron fault at all.

On its own, auto repair reacts only to the kubelet's ``Ready`` condition; the ``AcceleratedHardwareReady``
condition (Neuron DMA, HBM, NeuronCore and SRAM errors) comes from the ``eks-node-monitoring-agent`` add-on
(EKS user guide, "Enable node auto repair and investigate node health issues").
"""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph.graph import Graph, dig, is_unknown
from plan_graph.trainium_groups import TrainiumGroup, trainium_groups
from policies.rules import Violation, describe
from trainium_eks import tokens, versions

KARPENTER_CHART = versions.KARPENTER_CHART.chart


def _karpenter_repairs(graph: Graph) -> bool | None:
    """Whether the Karpenter release turns on its ``nodeRepair`` feature gate (charts/karpenter values.yaml 1.14.1:
    off by default), which repairs Karpenter's nodes on the node monitoring agent's conditions (EKS User Guide,
    "Enable node auto repair")."""
    releases = [r for r in graph.of_type(tokens.HELM_RELEASE) if r.props.get("chart") == KARPENTER_CHART]
    gates = [dig(r.props, "values", "settings", "featureGates", "nodeRepair") for r in releases]
    if any(is_unknown(g) for g in gates):
        return None
    return any(g is True for g in gates)


def _repair_enabled(group: TrainiumGroup, graph: Graph) -> bool | None:
    """True or False as the node group (or, for a pool, Karpenter) says, None while a preview does not know yet."""
    if group.elastic:
        return _karpenter_repairs(graph)
    enabled = dig(group.node.props, "nodeRepairConfig", "enabled")
    return None if is_unknown(enabled) else enabled is True


def _has_monitoring_agent(graph: Graph) -> bool:
    names = (addon.props.get("addonName") for addon in graph.of_type(tokens.EKS_ADDON))
    return any(name == versions.NODE_MONITORING_AGENT_ADDON or is_unknown(name) for name in names)


def trainium_node_auto_repair(graph: Graph, config: dict) -> Iterator[Violation]:
    required = bool(config.get("requireNodeRepair", False))
    groups = trainium_groups(graph)
    repaired = [g for g in groups if _repair_enabled(g, graph)]
    for group in groups:
        if required and _repair_enabled(group, graph) is False:
            setting = "Karpenter's nodeRepair feature gate" if group.elastic else "nodeRepairConfig.enabled"
            yield Violation(
                group.node.urn,
                f"{describe(group.node)} has no node auto repair; this stack requires {setting} "
                "(set nodeRepair: true) so that a node with failed Neuron hardware is rebooted or replaced",
            )
    if repaired and not _has_monitoring_agent(graph):
        for group in repaired:
            yield Violation(
                group.node.urn,
                f"{describe(group.node)} repairs nodes, but no {versions.NODE_MONITORING_AGENT_ADDON} add-on reports "
                "AcceleratedHardwareReady, so repair sees only the kubelet's Ready; set nodeMonitoringAgent: true",
            )
