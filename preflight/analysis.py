"""What a reviewer asks of a plan besides its resources: the cost estimate, the deployment's critical path and the
time from `pulumi up` to a first training step."""

from __future__ import annotations

import ipaddress

from trainium_eks import catalog, cost, deployment, first_step, layout, system_fit, tokens, versions
from trainium_eks.config import addresses
from trainium_eks.graph import Graph, dig, known
from trainium_eks.trainium_groups import TrainiumGroup, trainium_groups

DEFAULT_REGION = "us-east-1"


def region_of(plan: dict) -> str:
    """The region of the stack's default AWS provider."""
    for resource in plan["resources"]:
        if resource["type"] == tokens.PROVIDER_AWS and isinstance(resource["inputs"].get("region"), str):
            return resource["inputs"]["region"]
    return DEFAULT_REGION


def annotate(plan: dict, image_gib: float | None = None) -> dict:
    """The plan with ``cost``, ``deployment``, ``firstStep``, ``systemFit`` and ``trainiumNodes`` added (as
    ``plan --json`` and ``check --json`` print them); ``image_gib`` is the training image's size, when known."""
    graph = Graph.from_records(plan["resources"])
    schedule = deployment.Schedule(graph).to_json()
    fit = system_fit.system_fit(graph)
    return {
        **plan,
        "cost": cost.estimate(graph, region_of(plan)).to_json(),
        "deployment": schedule,
        "firstStep": [s.to_json() for s in first_step.estimate(graph, schedule["criticalPathMinutes"], image_gib)],
        "systemFit": None if fit is None else fit.to_json(),
        "trainiumNodes": trainium_nodes(graph),
    }


def _node_image(group: TrainiumGroup) -> dict:
    """The image the group boots: how it spells it (None: a preview does not know it yet), the release it pins, that
    release's Neuron driver (None: not recorded) and whether the training image's runtime initialises on it."""
    pinned = group.pinned_release()
    release = versions.node_image_release(pinned[0]) if pinned and pinned[0] else None
    return {
        "image": pinned[1] if pinned else None,
        "release": f"v{pinned[0]}" if pinned and pinned[0] else None,
        "neuronDriver": release.neuron_driver if release else None,
        "trainingRuntimeRunsOnIt": versions.TRAINING_RUNTIME.runs_on(release.neuron_driver) if release else None,
    }


def _subnet_addresses(group: TrainiumGroup) -> tuple[str, int] | None:
    """The CIDR and usable addresses of the one subnet the plan creates for the group (None: an existing VPC's, or
    not known)."""
    cidrs = [subnet.props.get("cidrBlock") for subnet in group.subnets()]
    if not cidrs or not isinstance(cidrs[0], str) or any(c != cidrs[0] for c in cidrs):
        return None
    try:
        return cidrs[0], addresses.usable_addresses(ipaddress.IPv4Network(cidrs[0]).prefixlen)
    except ValueError:  # unknown in a preview, or not a CIDR in a hand-edited plan file
        return None


def _node_addresses(group: TrainiumGroup) -> dict | None:
    """What the group's nodes take from their subnet, counted as the config rule counts it
    (``trainium_eks.config.addresses``): a running node, and one crowded with pods; None while not known."""
    interfaces, most = group.interfaces(), group.max_size
    described = [i for i in interfaces or [] if isinstance(i, dict)]
    if interfaces is None or most is None or not all(known(i.get("interfaceType")) for i in described):
        return None
    # Every interface but an EFA-only one has an address; a node without listed interfaces has its default one.
    interface_ips = sum(1 for i in described if i.get("interfaceType") != catalog.EFA_ONLY_INTERFACE) or 1
    running = addresses.node_addresses(group.spec.name, interface_ips)
    crowded = addresses.node_addresses(group.spec.name, interface_ips, crowded=True)
    subnet = _subnet_addresses(group)
    return {
        "interfaceAddresses": interface_ips,
        "efaInterfaces": sum(1 for i in described if i.get("interfaceType") in catalog.EFA_INTERFACE_TYPES),
        "perRunningNode": running,
        "perCrowdedNode": crowded,
        "maxSize": most,
        "atMaxSize": running * most,
        "crowdedAtMaxSize": crowded * most,
        "subnetCidr": subnet[0] if subnet else None,
        "subnetUsable": subnet[1] if subnet else None,
    }


def trainium_nodes(graph: Graph) -> dict:
    """Each Trainium group's node image and Neuron driver, and the private addresses its nodes take: the facts the
    text prints (``node_lines``), computed once so that ``plan`` and ``plan --json`` cannot disagree."""
    runtime = versions.TRAINING_RUNTIME
    groups = []
    for group in trainium_groups(graph):
        labels = dig(group.node.props, *(("spec", "template", "metadata", "labels") if group.elastic else ("labels",)))
        name = labels.get(layout.NODE_GROUP_LABEL) if isinstance(labels, dict) else None
        groups.append(
            {
                "group": name if isinstance(name, str) else None,
                "resource": group.node.name,
                "instanceType": group.spec.name,
                "nodeImage": _node_image(group),
                "addresses": _node_addresses(group),
            }
        )
    return {"trainingRuntime": {"library": runtime.library, "drivers": runtime.drivers}, "groups": groups}


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


def _image_line(group: dict, runtime: dict) -> str:
    image = group["nodeImage"]
    if image["image"] is None:
        shown = "an image the preview does not know yet"
    elif image["neuronDriver"] is None:
        shown = f"an image whose Neuron driver is not recorded ({image['image']})"
    else:
        verdict = "runs on it" if image["trainingRuntimeRunsOnIt"] else "does NOT run on it"
        shown = (
            f"node image release {image['release']}, Neuron driver aws-neuronx-dkms {image['neuronDriver']}: the training "
            f"image's runtime {runtime['library']} (drivers {runtime['drivers']}) {verdict}"
        )
    return f"Node image of {group['resource']}: {shown}"


def _address_lines(groups: list[dict]) -> list[str]:
    lines = []
    crowded_by_subnet: dict[tuple[str, int], int] = {}
    for group in groups:
        taken = group["addresses"]
        if taken is None:
            lines.append(f"Private IPs of {group['resource']}: not known yet")
            continue
        subnet = f" in subnet {taken['subnetCidr']} ({taken['subnetUsable']:,} usable)" if taken["subnetUsable"] else ""
        lines.append(
            f"Private IPs of {group['resource']}: {taken['perRunningNode']} per running {group['instanceType']} node "
            f"(the VPC CNI's interface for its pods and a warm one; {taken['interfaceAddresses']} on its launch "
            f"template's interfaces, {taken['efaInterfaces']} EFA devices), {taken['perCrowdedNode']} crowded with pods "
            f"(every interface of its card); {taken['atMaxSize']:,} to {taken['crowdedAtMaxSize']:,} at maxSize "
            f"{taken['maxSize']}{subnet}"
        )
        if taken["subnetUsable"]:
            key = (taken["subnetCidr"], taken["subnetUsable"])
            crowded_by_subnet[key] = crowded_by_subnet.get(key, 0) + taken["crowdedAtMaxSize"]
    for (cidr, usable), crowded in crowded_by_subnet.items():
        if crowded > usable:
            lines.append(
                f"    crowded nodes at maxSize would take {crowded:,} of subnet {cidr}, more than its {usable:,}: pods "
                "past what a running node holds may wait for an address"
            )
    return lines


def node_lines(nodes: dict) -> list[str]:
    """Each Trainium group's node image, and whether the training image's runtime initialises on it (the policy
    trainium-neuron-driver-compatible holds the stack to it), then the private addresses its nodes take."""
    groups = nodes["groups"]
    return [*(_image_line(g, nodes["trainingRuntime"]) for g in groups), *_address_lines(groups)]


def summary(plan: dict) -> str:
    """The human-readable lines for an annotated plan."""
    names = {r["urn"]: f"{r['type'].rsplit(':', 1)[-1]} {r['name']}" for r in plan["resources"]}
    estimate, schedule = plan["cost"], plan["deployment"]
    lines = [
        *node_lines(plan["trainiumNodes"]),
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
    if plan.get("systemFit"):
        lines += system_fit.summary(plan["systemFit"])
    return "\n".join(lines)
