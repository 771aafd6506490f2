"""Cost guard rules: Trainium node ceilings, a monthly budget, and the tags cost reports are grouped by."""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph import cost
from plan_graph.graph import Graph, Node, dig, is_unknown
from plan_graph.trainium_groups import trainium_groups
from policies.rules import Violation, describe
from trainium_eks import tokens
from trainium_eks.quantities import quantity

DEFAULT_REQUIRED_TAGS = ["environment", "owner", "cost-center"]
# Taggable types the platform creates; any other resource with a `tags` input is checked as well.
TAGGABLE_TYPES = frozenset(
    {
        tokens.EC2_VPC,
        tokens.EC2_SUBNET,
        tokens.EC2_INTERNET_GATEWAY,
        tokens.EC2_ROUTE_TABLE,
        tokens.EC2_EIP,
        tokens.EC2_NAT_GATEWAY,
        tokens.EC2_SECURITY_GROUP,
        tokens.EC2_PLACEMENT_GROUP,
        tokens.EC2_LAUNCH_TEMPLATE,
        tokens.EKS_NODE_GROUP,
        tokens.EKS_ADDON,
        tokens.EKS_CLUSTER,
        tokens.KMS_KEY,
        tokens.IAM_ROLE,
        tokens.FSX_LUSTRE_FILE_SYSTEM,
        tokens.FSX_DATA_REPOSITORY_ASSOCIATION,
        tokens.ECR_REPOSITORY,
        tokens.EKS_COMPONENT_CLUSTER,
    }
)


def _unbounded_pools(groups) -> Iterator[Violation]:
    """Karpenter launches a pool's nodes until its spec.limits are reached, and without limits without end (Karpenter
    docs, NodePools, "spec.limits"); the node ceiling is read from the CPU limit, a Kubernetes quantity."""
    for group in groups:
        cpu = dig(group.node.props, "spec", "limits", "cpu")
        if not group.elastic or is_unknown(cpu) or quantity(cpu) is not None:
            continue
        problem = "sets no spec.limits.cpu" if cpu is None else f"sets spec.limits.cpu {cpu!r}, which is no Kubernetes quantity"
        yield Violation(
            group.node.urn,
            f"{describe(group.node)} {problem}, so Karpenter may launch {group.spec.name} nodes without end; set it to "
            f"maxSize x {group.spec.vcpus} vCPUs (e.g. {group.spec.vcpus * 2} for two nodes)",
        )


def trainium_node_limit(graph: Graph, config: dict) -> Iterator[Violation]:
    limit = int(config.get("maxTrainiumNodes", 16))
    groups = trainium_groups(graph)
    yield from _unbounded_pools(groups)
    sizes = [g.max_size for g in groups]
    if groups and None not in sizes and sum(sizes) > limit:
        yield Violation(
            groups[0].node.urn,
            f"Trainium node groups can grow to {sum(sizes)} nodes "
            f"({', '.join(f'{g.node.name}: {g.max_size}' for g in groups)}), above this stack's limit of "
            f"{limit}; lower maxSize or raise maxTrainiumNodes in the stack's policy config",
        )


def monthly_cost_budget(graph: Graph, config: dict) -> Iterator[Violation]:
    """The stack's monthly running cost when busy (``plan_graph.cost``) within ``maxMonthlyUsd``. A Capacity Block is
    not in it: it is bought outside the stack and paid up front for its window (the estimate's ``prepaid``), so no
    edit of the stack raises or lowers what it costs; an item without a known price counts as 0."""
    budget = float(config.get("maxMonthlyUsd", 100_000))
    region = next((n.region for n in graph if n.region), "us-east-1")
    estimate = cost.estimate(graph, region)
    if estimate.monthly_usd > budget:
        biggest = estimate.lines[0]
        yield Violation(
            biggest.urn,
            f"estimated cost is {estimate.monthly_usd:,.0f} USD/month, above this stack's budget "
            f"of {budget:,.0f} USD; the largest item is {biggest.description} "
            f"({biggest.hourly_usd * 730:,.0f} USD/month); scale down or raise maxMonthlyUsd",
        )


def _missing_tags(node: Node, config: dict) -> list[str] | None:
    if node.type not in TAGGABLE_TYPES and "tags" not in node.props:
        return None
    tags = node.props.get("tags") or {}
    if is_unknown(tags):
        return None
    required = config.get("requiredTags") or DEFAULT_REQUIRED_TAGS
    return [key for key in required if not (isinstance(tags, dict) and tags.get(key))]


def required_tags(node: Node, config: dict) -> Iterator[Violation]:
    missing = _missing_tags(node, config)
    if missing:
        yield Violation(
            node.urn,
            f"{describe(node)} lacks the tags {', '.join(missing)}; add them (the program's "
            "environment, owner and costCenter config), or set defaultTags for remediation",
        )


def add_default_tags(node: Node, config: dict) -> dict | None:
    """Remediation: the resource's inputs with missing required tags filled in from ``defaultTags``."""
    missing = _missing_tags(node, config)
    defaults = config.get("defaultTags") or {}
    fill = {key: defaults[key] for key in missing or [] if defaults.get(key)}
    if not fill:
        return None
    tags = node.props.get("tags")
    return {**node.props, "tags": {**(tags if isinstance(tags, dict) else {}), **fill}}
