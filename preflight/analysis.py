"""What a reviewer asks of a plan besides its resources: each Trainium group's nodes (``preflight.node_facts``), the
drains of its default jobs where it runs in a Capacity Block (``preflight.drain_windows``), each team's largest job
(``preflight.team_jobs``), the cost estimate, the deployment's critical path and the time from `pulumi up` to a first
training step."""

from __future__ import annotations

from plan_graph import cost, deployment, first_step, system_fit
from plan_graph.graph import Graph
from preflight.drain_windows import capacity_block_drains, drain_lines
from preflight.node_facts import node_lines, trainium_nodes
from preflight.planfile import PlanFile
from preflight.team_jobs import largest_team_jobs, team_job_lines
from trainium_eks import catalog, tokens
from trainium_eks.wording import counted

DEFAULT_REGION = "us-east-1"


def region_of(plan: dict) -> str:
    """The region of the stack's default AWS provider."""
    for resource in plan["resources"]:
        if resource["type"] == tokens.PROVIDER_AWS and isinstance(resource["inputs"].get("region"), str):
            return resource["inputs"]["region"]
    return DEFAULT_REGION


def annotate(plan: dict, image_gib: float | None = None) -> dict:
    """The plan with ``capacityBlockDrains``, ``cost``, ``deployment``, ``firstStep``, ``systemFit``, ``teamJobs``
    and ``trainiumNodes`` added (as ``plan --json`` and ``check --json`` print them); ``image_gib`` is the training
    image's size, when known. It is written through the plan file's model (``preflight.planfile``), which reads it back."""
    graph = Graph.from_records(plan["resources"])
    schedule = deployment.Schedule(graph).to_json()
    fit = system_fit.system_fit(graph)
    annotated = {
        **plan,
        "capacityBlockDrains": capacity_block_drains(graph, plan["outputs"]),
        "cost": cost.estimate(graph, region_of(plan)).to_json(),
        "deployment": schedule,
        "firstStep": [s.to_json() for s in first_step.estimate(graph, schedule["criticalPathMinutes"], image_gib)],
        "systemFit": None if fit is None else fit.to_json(),
        "teamJobs": largest_team_jobs(plan["outputs"]),
        "trainiumNodes": trainium_nodes(graph),
    }
    return PlanFile.written(annotated).to_json()


def first_steps(plan: dict) -> list[str]:
    """`pulumi up` -> first training step on each Trainium group, cold and warm, term by term."""
    lines = []
    for step in plan.get("firstStep", []):
        lines.append(
            f"Estimated `pulumi up` -> first training step on {step['group']} ({counted(step['nodes'], 'node')}): at least "
            f"{step['coldMinutes']:.1f} min cold, {step['warmMinutes']:.1f} min with the dataset and a warm compile cache"
        )
        for term in step["terms"]:
            figure = "not counted" if term["minutes"] is None else f"{term['minutes']:5.1f} min"
            when = " (cold only)" if term["coldOnly"] else ""
            lines.append(f"    {figure:>11}  {term['what']}{when}: {term['source']}")
        lines.append(f"    not counted: {step['notCounted']}")
    return lines


def _monthly(line: dict, key: str) -> str:
    return f"{line[key] * catalog.HOURS_PER_MONTH:>10,.0f}" if line["priced"] else f"{'not known':>10}"


def cost_lines(estimate: dict, names: dict[str, str]) -> list[str]:
    """The monthly running cost, busy and idle, line by line; then the Capacity Blocks, prepaid outside the stack."""
    unpriced = sum(1 for line in estimate["lines"] if not line["priced"])
    lower_bound = f"; {unpriced} item(s) without a known price counted as 0" if unpriced else ""
    lines = [
        f"Estimated running cost: {estimate['monthlyUsd']:,.0f} USD/month busy ({estimate['hourlyUsd']:,.2f} USD/hour, "
        f"every elastic Trainium pool at maxSize), {estimate['idleMonthlyUsd']:,.0f} USD/month idle (no job waiting) "
        f"({catalog.HOURS_PER_MONTH} h; {estimate['priceSource']}{lower_bound})",
        f"    {'busy':>10}  {'idle':>10}",
        *(
            f"    {_monthly(line, 'hourlyUsd')}  {_monthly(line, 'idleHourlyUsd')} USD/month  {line['description']}  "
            f"({names[line['urn']]})"
            for line in estimate["lines"]
        ),
    ]
    if estimate["prepaid"]:
        lines.append(
            'Prepaid Capacity Blocks, in neither monthly figure (EC2 User Guide, "Capacity Blocks pricing and billing"):'
        )
        lines += [
            f"    {block['hourlyUsd']:>10,.2f} USD/hour of the window ({block['hourlyUsd'] * 24:,.0f} USD a day)  "
            f"{block['description']}  ({names[block['urn']]})"
            for block in estimate["prepaid"]
        ]
    return lines


def summary(plan: dict) -> str:
    """The human-readable lines for an annotated plan."""
    names = {r["urn"]: f"{r['type'].rsplit(':', 1)[-1]} {r['name']}" for r in plan["resources"]}
    schedule = plan["deployment"]
    lines = [*node_lines(plan["trainiumNodes"]), *drain_lines(plan["capacityBlockDrains"]), *team_job_lines(plan["teamJobs"])]
    lines += cost_lines(plan["cost"], names)
    lines.append(f"Estimated `pulumi up` of a new stack: {schedule['criticalPathMinutes']:.1f} min; critical path:")
    lines += [f"    {s['startMinute']:5.1f} -> {s['finishMinute']:5.1f} min  {names[s['urn']]}" for s in schedule["steps"]]
    for wait in schedule["orderingOnlyWaits"]:
        lines.append(f"    ordering only (dependsOn, no data): {names[wait['urn']]} waits for {names[wait['waitsFor']]}")
    lines += first_steps(plan)
    if plan.get("systemFit"):
        lines += system_fit.summary(plan["systemFit"])
    return "\n".join(lines)
