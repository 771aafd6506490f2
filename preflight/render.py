"""Human-readable output: the resource tree the way `pulumi preview` draws it, and a summary line."""

from __future__ import annotations

import json
from collections import defaultdict

from policies.packs import PACKS
from preflight import diff
from preflight.check import CheckResult
from preflight.engine import Plan
from trainium_eks import catalog


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
    return "\n".join(
        lines + trainium_addresses(plan.outputs.get("trainiumNodeGroups"), plan.outputs.get("trainiumPrivateIpsPerNode"))
    )


def trainium_addresses(node_groups, private_ips_per_node) -> list[str]:
    """What each Trainium node takes from the Trainium subnet (the outputs above truncate it): its interfaces' addresses,
    and with the pods it may run up to ``catalog.InstanceType.most_addresses``."""
    if not isinstance(node_groups, list) or not node_groups or not isinstance(private_ips_per_node, dict):
        return []
    lines = ["", "Private IPs the Trainium nodes take from the Trainium subnet (interfaces; with the most pods a node runs):"]
    for group in node_groups:
        per_node, most = int(private_ips_per_node[group["name"]]), int(group["maxSize"])
        spec = catalog.INSTANCE_TYPES.get(group["instanceType"])
        crowded = spec.most_addresses(per_node) if spec else per_node
        lines.append(
            f"    {group['name']}: {per_node} per {group['instanceType']} node "
            f"({int(group['efaInterfacesPerNode'])} EFA devices), up to {crowded} with its pods; "
            f"{per_node * most} to {crowded * most} at maxSize {most}"
        )
    return lines


def _whole(value):
    """The engine's floats as the provider sends them: a whole number without its ``.0``."""
    if isinstance(value, dict):
        return {key: _whole(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole(item) for item in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _short(value) -> str:
    text = json.dumps(_whole(value), sort_keys=True)
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


def impact(stack: str, against: str, change, current: dict, baseline: dict) -> str:
    """Added, removed and changed resources, with each changed input's old and new value, what a replacement takes
    with it and what depends on it, and the monthly cost before and after."""
    names = {r["urn"]: f"{r['type']} {r['name']}" for r in [*baseline["resources"], *current["resources"]]}
    replaced = sum(1 for c in change.changed if c.replace)
    lines = [
        f"Changes of {stack} against {against}: {len(change.added)} added, {len(change.removed)} removed, "
        f"{len(change.changed)} changed ({replaced} replaced, {len(change.changed) - replaced} in place)"
    ]
    lines += [f"  ! DATA LOSS: {names[loss['urn']]} is {loss['how']}: {loss['lost']} goes with it" for loss in change.losses]
    lines += [f"  ! REFUSED BY EKS: {names[r['urn']]}: {r['why']}" for r in change.refused]
    lines += [f"  + {names[urn]}" for urn in change.added]
    lines += [f"  - {names[urn]}" for urn in change.removed]
    for c in change.changed:
        how = "+- replace" if c.replace else "~  update in place"
        lines.append(f"  {how}: {names[c.urn]}" + (f" ({c.nodes})" if c.nodes else ""))
        lines += [f"      {path}: {_short(old)} -> {_short(new)}" for path, old, new in c.values]
        lines += [f"      changes or breaks with it: {names[urn]}" for urn in c.dependents]
    lines += [f"  ~  nodes of {names[d['urn']]}: {diff.DRIFT}, as {d['why']}" for d in change.drifts]
    lines.append(_cost_change(change.cost))
    return "\n".join(lines)


def _cost_change(cost: dict) -> str:
    def figure(key: str) -> str:
        before, after = cost["before"][key], cost["after"][key]
        if before is None or after is None:
            return "not estimated"
        return f"{before:,.0f} -> {after:,.0f} USD ({after - before:+,.0f})"

    return f"Monthly cost: busy {figure('busyUsd')}, idle {figure('idleUsd')}"
