"""The vocabulary of the policy mutation tables (``tests/policy_mutations.py``, ``tests/elastic_mutations.py`` and the
other ``tests/*_mutations.py``): a ``Case``, a private copy of a fixture stack's plan (``plan_of``), and the edits cases
are made of. Cases edit deep copies of the plans the whole session shares; only a case that needs different program
config evaluates the program again.
"""

from __future__ import annotations

import copy
import functools
import json
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from support import cached_plan, evaluate

from plan_graph.trainium_groups import LAUNCH_TEMPLATE, NODE_GROUP


@functools.cache
def _evaluated(stack: str, overrides: str) -> dict:
    return evaluate(stack, fixture=True, **json.loads(overrides)).to_json()


def plan_of(stack: str, preview: bool = False, **overrides: Any) -> dict:
    """A private copy of the plan of the fixture stack named ``stack`` (tests/fixture_stacks, not the shipped stacks a
    user edits), evaluated once per session for each program config."""
    if overrides:
        return copy.deepcopy(_evaluated(stack, json.dumps(overrides, sort_keys=True)))
    return copy.deepcopy(cached_plan(stack, preview, fixture=True).to_json())


def resource(plan: dict, type_: str, name_part: str = "") -> dict:
    matches = [r for r in plan["resources"] if r["type"] == type_ and name_part in r["name"]]
    assert matches, (type_, name_part)
    return matches[0]


def trainium_node_group(plan: dict) -> dict:
    return resource(plan, NODE_GROUP, "-ng")


def trainium_template(plan: dict) -> dict:
    return resource(plan, LAUNCH_TEMPLATE, "-lt")


@dataclass(frozen=True)
class Case:
    """A stack, an edit of its plan, and what the policy (the table key) must report about the result."""

    id: str
    stack: str
    mutate: Callable[[dict], object]
    words: tuple[str, ...] = ()  # each appears in some violation's message
    blames: str | None = None  # the type of the resource every violation names
    count: int | None = None  # exactly this many violations
    overrides: dict = field(default_factory=dict)  # program config, for what a plan edit cannot express


_DELETE = object()


def edit(type_: str, name: str, *path: str | int, to: Any = _DELETE) -> Callable[[dict], None]:
    """Set ``inputs[path...]`` of the first ``type_`` resource with ``name`` in its name to ``to``, or delete it."""

    def mutate(plan: dict) -> None:
        *steps, last = path
        target = functools.reduce(operator.getitem, steps, resource(plan, type_, name)["inputs"])
        if to is _DELETE:
            del target[last]
        else:
            target[last] = to

    return mutate


def without(unwanted: Callable[[dict], bool]) -> Callable[[dict], None]:
    def mutate(plan: dict) -> None:
        plan["resources"] = [r for r in plan["resources"] if not unwanted(r)]

    return mutate


edit_template = functools.partial(edit, LAUNCH_TEMPLATE, "-lt")
edit_node_group = functools.partial(edit, NODE_GROUP, "-ng")
CONTAINER_0 = ("spec", "template", "spec", "containers", 0)
