"""A Mermaid flowchart of a change (``diff.Impact``): the resources it adds, replaces, removes and changes in place,
and the resources they depend on, with the plans' dependency edges. An arrow points from a resource to one that
depends on it (`pulumi up` creates the first one first); a replaced resource also points to each resource whose
inputs come from it (``diff.Change.dependents``: they change or break with it).

The text is bounded (``MAX_NODES``): the changed resources come first, the most disruptive first, and the rest is
counted. Node ids are ``n<index>`` and the resource name's letters, digits and underscores, so that neither a keyword
(``end``) nor a URN's ``:`` and ``$`` reaches the parser; labels are quoted, with Mermaid's entity codes for what a
quoted label cannot hold: ``#quot;``, ``#35;`` (Mermaid docs, Flowcharts, "Entity codes to escape characters"; mermaid
11.17.2's encodeEntities turns each ``#name;`` into the HTML entity ``&name;``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from preflight import diff

MAX_NODES = 40  # past this, GitHub's rendering is too small to read in a comment
# What each kind of change is drawn as: the label's prefix (the text report's signs) and the classDef style.
MARKS = {
    "removed": ("-", "fill:#eeeeee,stroke:#616161,stroke-width:2px,stroke-dasharray: 5 5,color:#000000"),
    "replaced": ("+-", "fill:#ffd6d6,stroke:#c62828,stroke-width:2px,color:#000000"),
    "added": ("+", "fill:#dcedc8,stroke:#2e7d32,color:#000000"),
    "updated": ("~", "fill:#fff3c4,stroke:#f9a825,color:#000000"),
}
LEGEND = (
    "Legend: `+-` red: replaced (created anew, the old one deleted); `-` grey, dashed: removed; `+` green: added; "
    "`~` amber: changed in place; plain: an unchanged resource that an added or replaced one depends on, or that "
    "takes an input from a replaced one. An arrow points from a resource to one that depends on it."
)
# A quoted label cannot hold '"'; '#…;' is read as an entity code, '<' and '&' as HTML, a backtick as a markdown string.
LABEL_ESCAPES = {'"': "#quot;", "#": "#35;", "&": "#amp;", "<": "#lt;", ">": "#gt;", "`": "#96;"}
LABEL_SPECIAL = re.compile("|".join(re.escape(c) for c in LABEL_ESCAPES) + r"|\s+")
NOT_ID = re.compile(r"[^A-Za-z0-9_]+")


@dataclass(frozen=True)
class Graph:
    text: str  # the flowchart, without the ``` fence
    shown: int  # resources drawn
    omitted: int  # resources left out past MAX_NODES


def label(record: dict, mark: str | None) -> str:
    """``Type name`` of a plan record, prefixed with the change's sign, as the text of a quoted Mermaid label."""
    text = f"{record['type'].rsplit(':', 1)[-1]} {record['name']}"
    if mark is not None:
        text = f"{MARKS[mark][0]} {text}"
    return LABEL_SPECIAL.sub(lambda m: LABEL_ESCAPES.get(m.group(), " "), text)


def node_id(index: int, record: dict) -> str:
    return f"n{index}_{NOT_ID.sub('_', record['name'])[:40]}"


def marked(change: diff.Impact) -> dict[str, str]:
    """Each changed resource's mark, the most disruptive first."""
    marks = {urn: "removed" for urn in change.removed}
    marks |= {c.urn: "replaced" for c in change.changed if c.replace}
    marks |= {urn: "added" for urn in change.added}
    marks |= {c.urn: "updated" for c in change.changed if not c.replace}
    return marks


def change_graph(change: diff.Impact, before: dict, after: dict) -> Graph | None:
    """The flowchart of ``change`` between the plans ``before`` and ``after``; None when nothing changes."""
    marks = marked(change)
    if not marks:
        return None
    records = {r["urn"]: r for r in before["resources"]} | {r["urn"]: r for r in after["resources"]}
    edges = {(dependency, urn) for urn in marks for dependency in records[urn].get("dependencies", []) if dependency in records}
    replacing = {c.urn: c.dependents for c in change.changed if c.replace}
    edges |= {(urn, dependent) for urn, dependents in replacing.items() for dependent in dependents}
    # Unchanged resources are drawn where they tell how a created resource is wired: what an added or replaced one
    # depends on, and what takes an input from a replaced one. Around an in-place change they would only add noise.
    wiring = {a for a, b in edges if marks.get(b) in ("added", "replaced")} | {b for a, b in edges if a in replacing}
    context = sorted(wiring - marks.keys())
    every = [*marks, *context]
    ids = {urn: node_id(index, records[urn]) for index, urn in enumerate(every[:MAX_NODES])}
    lines = ["flowchart LR"]
    lines += [f'  {ids[urn]}["{label(records[urn], marks.get(urn))}"]' for urn in ids]
    lines += [f"  {ids[a]} --> {ids[b]}" for a, b in sorted(edges) if a in ids and b in ids]
    lines += [f"  classDef {mark} {style}" for mark, (_, style) in MARKS.items()]
    for mark in MARKS:
        members = [ids[urn] for urn, m in marks.items() if m == mark and urn in ids]
        if members:
            lines.append(f"  class {','.join(members)} {mark}")
    return Graph("\n".join(lines), len(ids), len(every) - len(ids))
