"""A plain resource graph: what the engine knows about each resource, with links resolved to nodes.

Policies (through the adapters in ``policies/packs.py``) and the offline engine (from a plan) both build this graph,
so the policy rules and the cost estimate are plain functions over one shape. A node is not a record of its own: it
is one registration (the plan file's ``preflight.planfile.PlannedResource``, or the policy SDK's resource under the
real engine) with its provider, parent and dependencies resolved to the nodes they name. Property values use the
engine's wire names; values unknown during preview are the analyzer's unknown sentinels (``is_unknown``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

# The sentinels the engine and the policy SDK use for values unknown during preview (pulumi_policy.proxy).
UNKNOWN_SENTINELS = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string (also the SDK's generic unknown)
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
        "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
        "e48ece36-62e2-4504-bad9-02848725956a",  # archive
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
    }
)
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def is_unknown(value: Any) -> bool:
    return isinstance(value, str) and value in UNKNOWN_SENTINELS


def known(value: Any) -> bool:
    """True when the value, and everything inside it, is known."""
    if is_unknown(value):
        return False
    if isinstance(value, Mapping):
        return all(known(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(known(v) for v in value)
    return True


def number(value: Any) -> float | None:
    """A known, finite number (the engine carries numbers as floats; some inputs are numeric strings), else None."""
    if value is None or isinstance(value, bool) or is_unknown(value):
        return None
    try:
        result = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return result if math.isfinite(result) else None


def dig(props: Mapping, *path: str | int, default: Any = None) -> Any:
    """``props[path[0]][path[1]]...``, or ``default`` when a step is missing (unknowns are returned as they are)."""
    value: Any = props
    for step in path:
        if is_unknown(value):
            return value
        if isinstance(step, int):
            if not isinstance(value, (list, tuple)) or step >= len(value):
                return default
        elif not isinstance(value, Mapping) or step not in value:
            return default
        value = value[step]
    return value


@dataclass(eq=False)
class Node:
    urn: str
    type: str
    name: str
    props: Mapping[str, Any]
    protect: bool = False
    custom: bool = True  # False for components
    provider_props: Mapping[str, Any] = field(default_factory=dict)
    provider: Node | None = None
    parent: Node | None = None
    dependencies: list[Node] = field(default_factory=list)
    property_dependencies: dict[str, list[Node]] = field(default_factory=dict)

    def __repr__(self) -> str:  # the default would print the whole graph through the links
        return f"Node({self.type} {self.name})"

    def linked(self, prop: str, type_: str | None = None) -> list[Node]:
        """The resources ``prop`` was computed from (optionally only those of ``type_``)."""
        return [n for n in self.property_dependencies.get(prop, []) if type_ is None or n.type == type_]

    @property
    def region(self) -> str | None:
        region = self.provider_props.get("region")
        return region if isinstance(region, str) and not is_unknown(region) else None


class Graph:
    def __init__(self, nodes: Iterable[Node]):
        self.nodes = list(nodes)

    def of_type(self, *types: str) -> list[Node]:
        return [n for n in self.nodes if n.type in types]

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> Graph:
        """Build from plan records: ``{"urn", "type", "name", "protect", "provider", "parent", "dependencies",
        "propertyDependencies", "inputs"}`` (the ``preflight plan --json`` resource shape)."""
        records = list(records)
        nodes = {
            r["urn"]: Node(r["urn"], r["type"], r["name"], r["inputs"], bool(r.get("protect")), r.get("custom", True))
            for r in records
        }
        for record in records:
            node = nodes[record["urn"]]
            node.provider = nodes.get(record.get("provider") or "")
            node.provider_props = node.provider.props if node.provider else {}
            node.parent = nodes.get(record.get("parent") or "")
            node.dependencies = [nodes[u] for u in record.get("dependencies", []) if u in nodes]
            node.property_dependencies = {
                prop: [nodes[u] for u in urns if u in nodes] for prop, urns in record.get("propertyDependencies", {}).items()
            }
        return cls(nodes.values())


def vpc_endpoint_service(endpoint: Node) -> str | None:
    """``ecr.dkr`` of a VPC endpoint's ``com.amazonaws.<region>.ecr.dkr``; None while a preview does not know it."""
    name = endpoint.props.get("serviceName")
    return None if not isinstance(name, str) or is_unknown(name) else name.split(".", 3)[-1]
