"""The node groups whose running nodes a change replaces, and how many nodes that takes.

A group is a managed node group and its launch template, or a Karpenter NodePool and the EC2NodeClass it names. Its
nodes are replaced when either resource is replaced, or changes in a way that replaces them (``diff.Change.nodes``: a
new launch template version, drift), or drifts with the control plane's version (``version_moves.version_drifts``). A
managed group runs its desired size; a pool runs what its jobs need, so the plan tells only how many at most.
"""

from __future__ import annotations

from collections.abc import Mapping

from plan_graph.graph import Graph, Node, dig, number
from plan_graph.trainium_groups import node_class_of, trainium_groups
from trainium_eks import tokens

REPLACED = "the group is replaced: the new one starts its own nodes, the old one's go with it"


def replaced_groups(new: Mapping[str, dict], how: Mapping[str, str]) -> list[dict]:
    """The groups of the plan ``new`` whose nodes go, given what each changed resource does to its nodes (``how``, by
    URN). Each finding is ``{"urn", "group", "nodes", "elastic", "how"}``: the node group or NodePool, the platform's
    name of the group, its nodes (a pool's at most; None: not known), and how they are replaced."""
    graph = Graph.from_records(new.values())
    trainium = {g.node.urn: g for g in trainium_groups(graph)}
    found = []
    for node in graph.of_type(tokens.EKS_NODE_GROUP, tokens.KARPENTER_NODE_POOL):
        elastic = node.type == tokens.KARPENTER_NODE_POOL
        template = _template(graph, node, elastic)
        reasons = [how[urn] for urn in (node.urn, template.urn if template else None) if urn in how]
        if not reasons:
            continue
        group = trainium.get(node.urn)
        if elastic:
            nodes = group.max_size if group else None
        else:
            desired = number(dig(node.props, "scalingConfig", "desiredSize"))
            nodes = None if desired is None else int(desired)
        name = (group.name if group else None) or node.name
        # the group's own change comes first: its replacement makes a new version of its template moot
        found.append({"urn": node.urn, "group": name, "nodes": nodes, "elastic": elastic, "how": reasons[0]})
    return found


def _template(graph: Graph, node: Node, elastic: bool) -> Node | None:
    if elastic:
        return node_class_of(graph, node)
    templates = node.linked("launchTemplate", tokens.EC2_LAUNCH_TEMPLATE)
    return templates[0] if templates else None


def node_count(group: dict) -> str:
    """The nodes a replacement takes, in words: ``2 nodes``; of a pool, ``those running, up to 2``."""
    if group["nodes"] is None:
        return "its nodes"
    plural = "node" if group["nodes"] == 1 else "nodes"
    return f"those running, up to {group['nodes']}" if group["elastic"] else f"{group['nodes']} {plural}"
