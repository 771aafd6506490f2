"""Policy rules: pure functions from resources (``plan_graph.graph.Node``) and config to violations."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Violation:
    urn: str
    message: str


def describe(node) -> str:
    """How messages name a resource: its type and logical name."""
    return f"{node.type} '{node.name}'"


def shown(value):
    """A value as a message shows it: the engine carries every number as a float, and 2.0 reads as 2."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def listed(value) -> list:
    """A list input as a list; anything else (unset, unknown, a wrong type) as none."""
    return value if isinstance(value, list) else []
