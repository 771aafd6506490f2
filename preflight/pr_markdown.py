"""`preflight diff --format markdown`: the change report of one stack, made for a pull-request comment.

A heading with the stack and the verdict (``applies``, ``DATA LOSS``, ``REFUSED BY EKS``: the lines behind the exit
statuses 3 and 4); the count of the resources added, replaced, removed and changed in place, and the node groups whose
nodes go (``preflight.node_replacements``); each DATA LOSS and REFUSED BY EKS line with its resource; tables of the
resources added, replaced (with the resources that change or break with them), removed and changed in place, each
changed input with its values before and after (past ``COLLAPSE_AFTER`` rows, in a collapsed ``<details>`` block);
how each group's nodes are replaced; the policy violations of the new plan, found as `preflight check` finds them; the
monthly cost and the deploy time before and after; and a Mermaid flowchart of the change (``preflight.mermaid``), which
GitHub renders in comments (GitHub Docs, "Creating diagrams"; github/roadmap#372: "wherever Markdown is supported
(e.g., issues ...)").

Every name and value from a plan is written in a code span (``code``), so that neither ``|`` nor ``<`` nor a backtick
in it ends a table cell, opens an HTML tag or closes the span early. A value is written as the text report writes it
(JSON on one line; a secret, as the plan marks it, ``[secret]``: ``preflight.input_paths``), and a long one shortened
(``shortened``).
"""

from __future__ import annotations

import os
import re
from typing import Any

from policies.packs import PACKS
from preflight import diff, mermaid
from preflight.check import CheckResult
from preflight.impact_report import ABSENT, inline
from preflight.node_replacements import node_count
from trainium_eks import catalog

COLLAPSE_AFTER = 5  # rows a table shows open; a longer one is collapsed under its count
SHOWN_IN_CELL = 4  # changed inputs, or resources changing with a replacement, named in a cell; the rest are counted
VALUE_CHARACTERS = 60  # the most of a value a cell shows
VALUE_CONTEXT = 10  # characters a shortened value keeps before where it first differs from the other side
ELLIPSIS = "\u2026"  # where a shortened value is cut
DATA_LOSS, REFUSED = "DATA LOSS", "REFUSED BY EKS"
UNPRICED, NO_BLOCK = "not estimated", "none"  # what diff.monthly_cost's None means for a figure


def verdict(change: diff.Impact) -> str:
    """What `pulumi up` of the change does, in the words of the text report's ``!`` lines."""
    found = [word for word, lines in ((DATA_LOSS, change.losses), (REFUSED, change.refused)) if lines]
    return " and ".join(found) if found else "applies"


def code(text: str, *, in_table: bool = True) -> str:
    """``text`` as an inline code span on one line: a fence longer than any backtick run in it, padded where it starts
    or ends with a backtick (CommonMark, "Code spans"); in a table, ``|`` escaped, which GFM reads before the span
    (GFM spec, "Tables")."""
    text = re.sub(r"\s+", " ", text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    span = f"{fence}{padded}{fence}"
    return span.replace("|", "\\|") if in_table else span


def text_cell(text: str) -> str:
    """Prose from a policy or the engine in a table cell: on one line, with what markdown or HTML would read escaped."""
    return re.sub(r"([\\`*_\[\]<>|~&])", r"\\\1", re.sub(r"\s+", " ", text))


def section(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    """A table under its title and row count; past ``COLLAPSE_AFTER`` rows, collapsed under them."""
    if not rows:
        return []
    table = [f"| {' | '.join(header)} |", f"|{'---|' * len(header)}", *(f"| {' | '.join(row)} |" for row in rows)]
    heading = f"{title} ({len(rows)})"
    if len(rows) <= COLLAPSE_AFTER:
        return [f"**{heading}**", "", *table, ""]
    # a blank line after <summary> lets GitHub render the markdown inside the block
    return ["<details>", f"<summary><b>{heading}</b></summary>", "", *table, "", "</details>", ""]


def _counted(shown: list[str], separator: str) -> str:
    """The first ``SHOWN_IN_CELL`` of ``shown``, and how many more there are."""
    more = len(shown) - SHOWN_IN_CELL
    return separator.join(shown[:SHOWN_IN_CELL]) + (f"{separator}and {more} more" if more > 0 else "")


def shortened(before: str, after: str) -> tuple[str, str]:
    """The two sides of a change, each at most ``VALUE_CHARACTERS`` long: a longer one starts ``VALUE_CONTEXT``
    characters before where the two first differ (so that two long values that differ late still read apart) and ends
    where it fits, each cut marked with an ellipsis."""
    differs_at = len(os.path.commonprefix([before, after]))
    return _cut(before, differs_at), _cut(after, differs_at)


def _cut(text: str, differs_at: int) -> str:
    if len(text) <= VALUE_CHARACTERS:
        return text
    start = max(0, differs_at - VALUE_CONTEXT)
    text = f"{ELLIPSIS}{text[start:]}" if start else text
    return text if len(text) <= VALUE_CHARACTERS else f"{text[: VALUE_CHARACTERS - 1]}{ELLIPSIS}"


def value_change(path: str, old: Any, new: Any) -> str:
    """``path: old -> new``, each value as the text report writes it, shortened, in a code span (an absent one as
    ``(none)``)."""
    shown = shortened(inline(old), inline(new))
    before, after = (ABSENT if value is None else code(text) for value, text in zip((old, new), shown, strict=True))
    return f"{code(path)}: {before} -> {after}"


def _inputs(change: diff.Change) -> str:
    # one input a line: GitHub renders <br> in a table cell, and nothing from the plan is outside a code span
    return _counted([value_change(*value) for value in change.values], "<br>")


def resource_sections(change: diff.Impact, names: dict[str, tuple[str, str]]) -> list[str]:
    def resource(urn: str) -> list[str]:
        kind, name = names[urn]
        return [code(name), code(kind)]

    def dependents(c: diff.Change) -> str:
        # the type's last part names the kind of a dependent well enough beside its name (as the Mermaid graph does)
        shown = [code(f"{names[urn][0].rsplit(':', 1)[-1]} {names[urn][1]}") for urn in c.dependents]
        return _counted(shown, ", ") or "none"

    replaced = [c for c in change.changed if c.replace]
    updated = [c for c in change.changed if not c.replace]
    return [
        *section(
            "Replaced",
            ["Resource", "Type", "Changed inputs", "Changes or breaks with it"],
            [[*resource(c.urn), _inputs(c), dependents(c)] for c in replaced],
        ),
        *section("Removed", ["Resource", "Type"], [resource(urn) for urn in change.removed]),
        *section("Added", ["Resource", "Type"], [resource(urn) for urn in change.added]),
        *section(
            "Changed in place",
            ["Resource", "Type", "Changed inputs", "Its nodes"],
            [[*resource(c.urn), _inputs(c), text_cell(c.nodes or "kept")] for c in updated],
        ),
    ]


def nodes_headline(change: diff.Impact) -> str:
    """The node groups whose nodes go, with how many nodes each, as the headline's last clause."""
    groups = [f"{code(g['group'], in_table=False)} ({node_count(g)})" for g in change.nodes_replaced]
    return f"; nodes replaced: {', '.join(groups)}" if groups else ""


def node_moves(change: diff.Impact, names: dict[str, tuple[str, str]]) -> list[str]:
    """How each group's nodes are replaced, then the version or node image moves that replace nodes though their
    resources change in place (as the text report's ``nodes of`` lines)."""
    moves = [
        f"- group {code(g['group'], in_table=False)} ({code(' '.join(names[g['urn']]), in_table=False)}), "
        f"{node_count(g)}: {g['how']}"
        for g in change.nodes_replaced
    ]
    moves += [f"- nodes of {code(' '.join(names[d['urn']]), in_table=False)}: {diff.DRIFT}, as {d['why']}" for d in change.drifts]
    moves += [
        f"- nodes of group {code(m['group'], in_table=False)} ({code(' '.join(names[m['urn']]), in_table=False)}): {m['why']}"
        for m in change.node_images
    ]
    return ["**Nodes replaced**", "", *moves, ""] if moves else []


def _resource_cell(urn: str, names: dict[str, tuple[str, str]]) -> str:
    return code(" ".join(names[urn])) if urn in names else "the stack"  # a stack policy's finding has no resource


def policy_section(stack: str, findings: CheckResult, names: dict[str, tuple[str, str]]) -> list[str]:
    policies = sum(len(pack.policies) for pack in PACKS)
    mandatory = len(findings.mandatory)
    lines = [
        f"**Policy check of the new plan**: {len(PACKS)} packs, {policies} policies, with `policies/config/{stack}.json`: "
        + (
            f"{mandatory} mandatory, {len(findings.violations) - mandatory} other violation(s)"
            + (" (`preflight check` exits 1 on a mandatory one)" if mandatory else "")
            if findings.violations
            else "no violation"
        ),
        "",
    ]
    rows = [
        [v.enforcement_level, code(v.pack), code(v.policy), _resource_cell(v.urn, names), text_cell(v.message)]
        for v in findings.violations
    ]
    return lines + section("Policy violations", ["Level", "Pack", "Policy", "Resource", "Message"], rows)


def _figure(value: float | None, unit: str, places: int, absent: str) -> str:
    return absent if value is None else f"{value:,.{places}f} {unit}"


def _difference(before: float | None, after: float | None, places: int) -> str:
    return "" if before is None or after is None else f"{after - before:+,.{places}f}"


def cost_and_time(change: diff.Impact, before: dict, after: dict) -> list[str]:
    """The monthly cost (busy, idle), the Capacity Blocks prepaid apart, and a new stack's deploy time, before and after."""
    rows = [
        (f"Monthly cost, busy (every elastic pool at maxSize, {catalog.HOURS_PER_MONTH} h)", "busyUsd", "USD", 0, UNPRICED),
        ("Monthly cost, idle (no job waiting)", "idleUsd", "USD", 0, UNPRICED),
        ("Capacity Blocks, prepaid outside the stack", "prepaidHourlyUsd", "USD/hour of their window", 2, NO_BLOCK),
    ]
    lines = ["**Cost and deploy time**", "", "| | Before | After | Change |", "|---|---|---|---|"]
    for title, key, unit, places, absent in rows:
        old, new = change.cost["before"][key], change.cost["after"][key]
        if absent == NO_BLOCK and not old and not new:
            continue  # no Capacity Block on either side
        shown = [_figure(value, unit, places, absent) for value in (old, new)]
        lines.append(f"| {title} | {shown[0]} | {shown[1]} | {_difference(old, new, places)} |")
    minutes = before["deployment"]["criticalPathMinutes"], after["deployment"]["criticalPathMinutes"]
    lines.append(
        "| `pulumi up` of a new stack (its critical path) | "
        f"{minutes[0]:.1f} min | {minutes[1]:.1f} min | {_difference(*minutes, 1)} |"
    )
    return [*lines, ""]


def graph_section(change: diff.Impact, before: dict, after: dict) -> list[str]:
    graph = mermaid.change_graph(change, before, after)
    if graph is None:
        return []
    lines = ["**What changes, and what it depends on**", "", "```mermaid", graph.text, "```", "", mermaid.LEGEND]
    if graph.omitted:
        lines.append(f"The graph shows {graph.shown} resources, and {graph.omitted} more are left out.")
    return [*lines, ""]


def report(stack: str, against: str, change: diff.Impact, after: dict, before: dict, findings: CheckResult) -> str:
    """The markdown of the change from the plan ``before`` to ``after`` (both annotated, as `plan --json` prints them)
    with the policy ``findings`` of ``after``."""
    names = {r["urn"]: (r["type"], r["name"]) for r in [*before["resources"], *after["resources"]]}
    replaced = sum(1 for c in change.changed if c.replace)
    lines = [
        f"### {stack}: {verdict(change)}",
        "",
        f"Against {code(against, in_table=False)}: {len(change.added)} added, {replaced} replaced, "
        f"{len(change.removed)} removed, {len(change.changed) - replaced} changed in place{nodes_headline(change)}.",
        "",
    ]
    flagged = [
        *(
            f"- **{DATA_LOSS}**: {code(' '.join(names[loss['urn']]), in_table=False)} is {loss['how']}: {loss['lost']} "
            "goes with it"
            for loss in change.losses
        ),
        *(f"- **{REFUSED}**: {code(' '.join(names[r['urn']]), in_table=False)}: {r['why']}" for r in change.refused),
        *(
            f"- **IMPORT FIRST**: {code(' '.join(names[i['urn']]), in_table=False)} ({code(i['id'], in_table=False)}): "
            f"{i['why']}; `pulumi import` it before `pulumi up`"
            for i in change.imports
        ),
    ]
    lines += [*flagged, ""] if flagged else []
    lines += resource_sections(change, names)
    lines += node_moves(change, names)
    lines += policy_section(stack, findings, names)
    lines += cost_and_time(change, before, after)
    lines += graph_section(change, before, after)
    return "\n".join(lines).rstrip() + "\n"
