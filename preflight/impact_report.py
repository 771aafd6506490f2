"""The text of `preflight diff`: what a change loses, what EKS refuses, what is added, removed and changed (in the
order `pulumi up` applies it, each input's old and new value), the node groups whose nodes go (in the first line, with
their node counts) and the nodes a version or node image move replaces, and the monthly cost before and after.

A changed value fits on one line (``path: old -> new``) when both sides are short. Otherwise the line shows the path
and the lines below what differs, marked ``-`` and ``+``: of a list that grew or shrank, each element it lost or
gained, whole; of other values, the lines that differ with a little context around them, each value as indented JSON
(a string as its text, one holding a JSON document as that document).
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from preflight import diff
from preflight.node_replacements import node_count
from preflight.render import whole_numbers

ONE_LINE = 100  # characters of ``old -> new`` that still fit on the path's line
CONTEXT = 2  # unchanged lines shown around the lines that differ
INDENT = " " * 10
ABSENT = "(none)"


def impact(stack: str, against: str, change: diff.Impact, current: dict, baseline: dict) -> str:
    names = {r["urn"]: f"{r['type']} {r['name']}" for r in [*baseline["resources"], *current["resources"]]}
    replaced = sum(1 for c in change.changed if c.replace)
    nodes = ", ".join(f"{group['group']} ({node_count(group)})" for group in change.nodes_replaced)
    lines = [
        f"Changes of {stack} against {against}: {len(change.added)} added, {len(change.removed)} removed, "
        f"{len(change.changed)} changed ({replaced} replaced, {len(change.changed) - replaced} in place)"
        + (f"; nodes replaced: {nodes}" if nodes else "")
    ]
    lines += [f"  ! DATA LOSS: {names[loss['urn']]} is {loss['how']}: {loss['lost']} goes with it" for loss in change.losses]
    lines += [f"  ! REFUSED BY EKS: {names[r['urn']]}: {r['why']}" for r in change.refused]
    lines += [
        f"  ! IMPORT FIRST: {names[i['urn']]} ({i['id']}): {i['why']}; `pulumi import` it before `pulumi up`"
        for i in change.imports
    ]
    lines += [f"  + {names[urn]}" for urn in change.added]
    lines += [f"  - {names[urn]}" for urn in change.removed]
    waits = {c.urn: set(c.after) for c in change.changed}
    for c in change.changed:
        how = "+- replace" if c.replace else "~  update in place"
        lines.append(f"  {how}: {names[c.urn]}" + (f" ({c.nodes})" if c.nodes else ""))
        # only the nearest: a resource waited for through another one listed here is not named again
        nearest = [urn for urn in c.after if not any(urn in waits[other] for other in c.after)]
        lines += [f"      after: {names[urn]}" for urn in nearest]
        for path, old, new in c.values:
            lines += value_change(path, old, new)
        lines += [f"      changes or breaks with it: {names[urn]}" for urn in c.dependents]
    lines += [f"  ~  nodes of {names[d['urn']]}: {diff.DRIFT}, as {d['why']}" for d in change.drifts]
    lines += [f"  ~  nodes of group {m['group']} ({names[m['urn']]}): {m['why']}" for m in change.node_images]
    lines.append(_cost_change(change.cost))
    return "\n".join(lines)


def value_change(path: str, old: Any, new: Any) -> list[str]:
    """``path: old -> new``; or the path, then the elements a list lost and gained, or the lines that differ."""
    if len(inline(old)) + len(inline(new)) <= ONE_LINE:
        return [f"      {path}: {inline(old)} -> {inline(new)}"]
    if isinstance(old, list) and isinstance(new, list):  # of another length: equal ones descend into changed_values
        return [f"      {path}:", *_elements(old, new)]
    before, after = _block(old), _block(new)
    shown = [f"      {path}:"]
    for group in difflib.SequenceMatcher(None, before, after, autojunk=False).get_grouped_opcodes(CONTEXT):
        if len(shown) > 1:
            shown.append(f"{INDENT}  ...")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                shown += [f"{INDENT}  {line}" for line in before[i1:i2]]
            else:
                shown += [f"{INDENT}- {line}" for line in before[i1:i2]] + [f"{INDENT}+ {line}" for line in after[j1:j2]]
    return shown


def _elements(old: list, new: list) -> list[str]:
    """The elements only ``old`` has (``- [index]``) and only ``new`` has (``+ [index]``), each whole."""
    before, after = [inline(item) for item in old], [inline(item) for item in new]
    shown = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag != "equal":
            shown += [line for i in range(i1, i2) for line in _element("-", i, old[i])]
            shown += [line for j in range(j1, j2) for line in _element("+", j, new[j])]
    return shown


def _element(sign: str, index: int, value: Any) -> list[str]:
    text = inline(value)
    if len(text) <= 2 * ONE_LINE:
        return [f"{INDENT}{sign} [{index}] {text}"]
    return [f"{INDENT}{sign} [{index}]", *(f"{INDENT}{sign}   {line}" for line in _block(value))]


def inline(value: Any) -> str:
    return ABSENT if value is None else json.dumps(whole_numbers(value), sort_keys=True)


def _block(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            document = json.loads(value)
        except ValueError:
            return value.splitlines() or [""]
        if not isinstance(document, dict | list):
            return [value]
        value = document  # an IAM policy, a kubeconfig: a JSON document held as a string
    return [ABSENT] if value is None else json.dumps(whole_numbers(value), indent=2, sort_keys=True).splitlines()


def _cost_change(cost: dict) -> str:
    def figure(key: str) -> str:
        before, after = cost["before"][key], cost["after"][key]
        if before is None or after is None:
            return "not estimated"
        return f"{before:,.0f} -> {after:,.0f} USD ({after - before:+,.0f})"

    blocks = cost["before"]["prepaidHourlyUsd"], cost["after"]["prepaidHourlyUsd"]
    prepaid = (
        f"; Capacity Blocks prepaid outside the stack {blocks[0]:,.2f} -> {blocks[1]:,.2f} USD/hour of their window"
        if None not in blocks and blocks[0] != blocks[1]
        else ""
    )
    return f"Monthly cost: busy {figure('busyUsd')}, idle {figure('idleUsd')}{prepaid}"
