"""Human-readable output: the resource tree the way `pulumi preview` draws it, and a summary line."""

from __future__ import annotations

import json
from collections import defaultdict

from policies.packs import PACKS
from preflight.check import CheckResult
from preflight.engine import Plan


def tree(plan: Plan) -> str:
    children = defaultdict(list)
    for resource in plan.resources:
        children[resource.parent].append(resource)
    for siblings in children.values():
        siblings.sort(key=lambda r: (r.type, r.name))

    mode = "preview of a new stack" if plan.preview else "evaluation under mocks"
    rows: list[tuple[str, str, str]] = []

    def walk(parent: str | None, prefix: str) -> None:
        kids = children.get(parent, [])
        for i, resource in enumerate(kids):
            last = i == len(kids) - 1
            branch = "" if parent is None else ("└─ " if last else "├─ ")
            extra = ", protected" if resource.protect else ""
            rows.append((prefix + branch + resource.type, resource.name, "create" + extra))
            walk(resource.urn, prefix + ("" if parent is None else ("   " if last else "│  ")))

    walk(None, "")
    type_width = max(len(r[0]) for r in rows) + 2
    name_width = max(len(r[1]) for r in rows) + 2
    lines = [f"Previewing {plan.project}/{plan.stack} ({mode})", ""]
    lines.append(f"     {'Type':<{type_width}}{'Name':<{name_width}}Plan")
    lines += [f" +   {t:<{type_width}}{n:<{name_width}}{p}" for t, n, p in rows]
    custom = sum(1 for r in plan.resources if r.custom)
    lines += [
        "",
        "Resources:",
        f"    + {len(plan.resources)} to create ({custom} custom, {len(plan.resources) - custom} components)",
    ]
    lines += ["", "Outputs:"]
    width = max(map(len, plan.outputs), default=0) + 2
    for key, value in sorted(plan.outputs.items()):
        shown = value if isinstance(value, str) else _short(value)
        lines.append(f"    {key + ':':<{width}}{shown}")
    return "\n".join(lines)


def whole_numbers(value):
    """The engine's floats as the provider sends them: a whole number without its ``.0``."""
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _short(value) -> str:
    text = json.dumps(whole_numbers(value), sort_keys=True)
    return text if len(text) <= 100 else text[:97] + "..."


def policy_report(plan: dict, result: CheckResult) -> str:
    """Violations grouped by pack, then by resource."""
    names = {r["urn"]: f"{r['type']} {r['name']}" for r in plan["resources"]}
    policies = sum(len(p.policies) for p in PACKS)
    lines = [f"Policy check of {plan['project']}/{plan['stack']}: {len(PACKS)} packs, {policies} policies"]
    for pack in PACKS:
        found = [v for v in result.violations if v.pack == pack.name]
        lines.append(f"  {pack.name}@{pack.version}: " + (f"{len(found)} finding(s)" if found else "passed"))
        by_resource = defaultdict(list)
        for violation in found:
            by_resource[violation.urn].append(violation)
        for urn, violations in by_resource.items():
            lines.append(f"    {names.get(urn, urn or 'stack')}")
            lines += [f"      [{v.enforcement_level}] {v.policy}: {v.message}" for v in violations]
    for remediation in result.remediations:
        lines.append(f"  remediated by {remediation.policy}: {names.get(remediation.urn, remediation.urn)}")
    mandatory = len(result.mandatory)
    lines.append(f"Result: {mandatory} mandatory, {len(result.violations) - mandatory} advisory or other finding(s)")
    return "\n".join(lines)
