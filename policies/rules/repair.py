"""Node health on Trainium node groups: EKS node auto repair where the stack requires it, and the node monitoring
agent that repair needs to see a Neuron fault at all.

On its own, auto repair reacts only to the kubelet's ``Ready`` condition; the ``AcceleratedHardwareReady``
condition (Neuron DMA, HBM, NeuronCore and SRAM errors) comes from the ``eks-node-monitoring-agent`` add-on
(EKS user guide, "Enable node auto repair and investigate node health issues").
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rules import Violation, describe
from policies.rules.trainium import trainium_groups
from trainium_eks import tokens, versions
from trainium_eks.graph import Graph, dig, is_unknown


def _repair_enabled(props: dict) -> bool | None:
    """True or False as the node group says, None while a preview does not know yet."""
    enabled = dig(props, "nodeRepairConfig", "enabled")
    return None if is_unknown(enabled) else enabled is True


def _has_monitoring_agent(graph: Graph) -> bool:
    names = (addon.props.get("addonName") for addon in graph.of_type(tokens.EKS_ADDON))
    return any(name == versions.NODE_MONITORING_AGENT_ADDON or is_unknown(name) for name in names)


def trainium_node_auto_repair(graph: Graph, config: dict) -> Iterator[Violation]:
    required = bool(config.get("requireNodeRepair", False))
    groups = trainium_groups(graph)
    repaired = [g for g in groups if _repair_enabled(g.node.props)]
    for group in groups:
        if required and _repair_enabled(group.node.props) is False:
            yield Violation(
                group.node.urn,
                f"{describe(group.node)} has no node auto repair; this stack requires nodeRepairConfig.enabled "
                "(set nodeRepair: true) so that a node with failed Neuron hardware is rebooted or replaced",
            )
    if repaired and not _has_monitoring_agent(graph):
        for group in repaired:
            yield Violation(
                group.node.urn,
                f"{describe(group.node)} repairs nodes, but no {versions.NODE_MONITORING_AGENT_ADDON} add-on reports "
                "AcceleratedHardwareReady, so repair sees only the kubelet's Ready; set nodeMonitoringAgent: true",
            )
