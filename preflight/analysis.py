"""What a reviewer asks of a plan besides its resources: the cost estimate, the deployment's critical path and the
time from `pulumi up` to a first training step."""

from __future__ import annotations

from trainium_eks import catalog, cost, deployment, first_step, tokens, versions
from trainium_eks.graph import Graph
from trainium_eks.trainium_groups import trainium_groups

DEFAULT_REGION = "us-east-1"


def region_of(plan: dict) -> str:
    """The region of the stack's default AWS provider."""
    for resource in plan["resources"]:
        if resource["type"] == tokens.PROVIDER_AWS and isinstance(resource["inputs"].get("region"), str):
            return resource["inputs"]["region"]
    return DEFAULT_REGION


def annotate(plan: dict, image_gib: float | None = None) -> dict:
    """The plan with ``cost``, ``deployment`` and ``firstStep`` added (as ``plan --json`` and ``check --json`` print
    them); ``image_gib`` is the training image's size, when known."""
    graph = Graph.from_records(plan["resources"])
    schedule = deployment.Schedule(graph).to_json()
    return {
        **plan,
        "cost": cost.estimate(graph, region_of(plan)).to_json(),
        "deployment": schedule,
        "firstStep": [s.to_json() for s in first_step.estimate(graph, schedule["criticalPathMinutes"], image_gib)],
    }


def first_steps(plan: dict) -> list[str]:
    """`pulumi up` -> first training step on each Trainium group, cold and warm, term by term."""
    lines = []
    for step in plan.get("firstStep", []):
        lines.append(
            f"Estimated `pulumi up` -> first training step on {step['group']} ({step['nodes']} nodes): at least "
            f"{step['coldMinutes']:.1f} min cold, {step['warmMinutes']:.1f} min with the dataset and a warm compile cache"
        )
        for term in step["terms"]:
            figure = "not counted" if term["minutes"] is None else f"{term['minutes']:5.1f} min"
            when = " (cold only)" if term["coldOnly"] else ""
            lines.append(f"    {figure:>11}  {term['what']}{when}: {term['source']}")
        lines.append(f"    not counted: {step['notCounted']}")
    return lines


def node_images(plan: dict) -> list[str]:
    """The node image release each Trainium group boots, its Neuron driver, and whether the training image's runtime
    initialises on it (the policy trainium-neuron-driver-compatible holds the stack to it)."""
    runtime = versions.TRAINING_RUNTIME
    lines = []
    for group in trainium_groups(Graph.from_records(plan["resources"])):
        pinned = group.pinned_release()
        release = versions.node_image_release(pinned[0]) if pinned and pinned[0] else None
        if release is None:
            shown = "an image whose Neuron driver is not recorded" if pinned else "an image the preview does not know yet"
        else:
            verdict = "runs on it" if runtime.runs_on(release.neuron_driver) else "does NOT run on it"
            shown = (
                f"node image release {release.tag}, Neuron driver aws-neuronx-dkms {release.neuron_driver}: the training "
                f"image's runtime {runtime.library} (drivers {runtime.drivers}) {verdict}"
            )
        lines.append(f"Node image of {group.node.name}: {shown}")
    return lines


def summary(plan: dict) -> str:
    """The human-readable lines for an annotated plan."""
    names = {r["urn"]: f"{r['type'].rsplit(':', 1)[-1]} {r['name']}" for r in plan["resources"]}
    estimate, schedule = plan["cost"], plan["deployment"]
    lines = [
        *node_images(plan),
        f"Estimated cost: {estimate['monthlyUsd']:,.0f} USD/month busy ({estimate['hourlyUsd']:,.2f} USD/hour, every "
        f"elastic Trainium pool at maxSize), {estimate['idleMonthlyUsd']:,.0f} USD/month idle (no job waiting) "
        f"({catalog.HOURS_PER_MONTH} h; {estimate['priceSource']})",
        f"    {'busy':>10}  {'idle':>10}",
    ]
    lines += [
        f"    {line['hourlyUsd'] * catalog.HOURS_PER_MONTH:>10,.0f}  {line['idleHourlyUsd'] * catalog.HOURS_PER_MONTH:>10,.0f}"
        f" USD/month  {line['description']}  ({names[line['urn']]})"
        for line in estimate["lines"]
    ]
    lines.append(f"Estimated `pulumi up` of a new stack: {schedule['criticalPathMinutes']:.1f} min; critical path:")
    lines += [f"    {s['startMinute']:5.1f} -> {s['finishMinute']:5.1f} min  {names[s['urn']]}" for s in schedule["steps"]]
    for wait in schedule["orderingOnlyWaits"]:
        lines.append(f"    ordering only (dependsOn, no data): {names[wait['urn']]} waits for {names[wait['waitsFor']]}")
    lines += first_steps(plan)
    return "\n".join(lines)
