"""Hand-built resource graphs for the policy rules' tests: nodes with the engine's wire names (camelCase props,
numbers as floats), and the one assertion every rule test makes."""

from __future__ import annotations

from plan_graph.graph import Graph, Node

__all__ = ["Graph", "Node", "expect", "node"]


def node(type_: str, props: dict | None = None, name: str = "r", **links: list[Node]) -> Node:
    urn = f"urn:pulumi:test::trainium-eks::{type_}::{name}"
    return Node(urn, type_, name, props or {}, provider_props={"region": "us-east-1"}, property_dependencies=links)


def expect(violations, *fragments: str) -> None:
    """One violation per fragment, in order, each containing its fragment."""
    found = [v.message for v in violations]
    assert len(found) == len(fragments) and all(f in m for f, m in zip(fragments, found, strict=True)), found
