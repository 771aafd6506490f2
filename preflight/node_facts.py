"""What a plan says of each Trainium group's nodes: their generation, the training stack they are labelled with, the
node image release they boot and its Neuron driver (and whether the stack's runtime initialises on it), and the
private addresses they take. ``trainium_nodes`` computes the facts once; ``plan --json`` carries them as
``trainiumNodes`` and the text (``node_lines``) is printed from that same object, so the two cannot disagree."""

from __future__ import annotations

import ipaddress

from plan_graph.graph import Graph, known
from plan_graph.trainium_groups import TrainiumGroup, trainium_groups
from preflight import planfile
from trainium_eks import hardware, layout, versions
from trainium_eks.config import addresses
from trainium_eks.wording import span


def _training_stack(group: TrainiumGroup) -> planfile.TrainingStack | None:
    """The training stack the group's nodes are labelled with (None: none the platform knows, or unknown)."""
    stack = group.training_stack()
    if stack is None:
        return None
    return planfile.TrainingStack.record(
        name=stack.name,
        generations=tuple(stack.generations),
        backend=stack.backend.name,
        image_tag=stack.image_tag,
        neuron_sdk=stack.runtime.sdk,
        neuron_runtime=stack.runtime.library,
        drivers=stack.runtime.drivers,
    )


def _node_image(group: TrainiumGroup) -> planfile.NodeImage:
    """The image the group boots: how it spells it (None: a preview does not know it yet), the release it pins, that
    release's Neuron driver (None: no source states it) and whether the group's training stack's runtime initialises
    on it (None: not known)."""
    pinned = group.pinned_release()
    release = versions.node_image_release(pinned[0]) if pinned and pinned[0] else None
    stack = group.training_stack()
    driver = release.neuron_driver if release else None
    return planfile.NodeImage.record(
        image=pinned[1] if pinned else None,
        release=f"v{pinned[0]}" if pinned and pinned[0] else None,
        neuron_driver=driver,
        training_runtime_runs_on_it=stack.runtime.runs_on(driver) if stack and driver else None,
    )


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


def _node_addresses(group: TrainiumGroup) -> planfile.NodeAddresses | None:
    """What the group's nodes take from their subnet, counted as the config rule counts it
    (``trainium_eks.config.addresses``): a running node, and one crowded with pods; None while not known."""
    interfaces, most = group.interfaces(), group.max_size
    described = [i for i in interfaces or [] if isinstance(i, dict)]
    if interfaces is None or most is None or not all(known(i.get("interfaceType")) for i in described):
        return None
    # Every interface but an EFA-only one has an address; a node without listed interfaces has its default one.
    interface_ips = sum(1 for i in described if i.get("interfaceType") != hardware.EFA_ONLY_INTERFACE) or 1
    running = addresses.node_addresses(group.spec.name, interface_ips)
    crowded = addresses.node_addresses(group.spec.name, interface_ips, crowded=True)
    subnet = _subnet_addresses(group)
    return planfile.NodeAddresses.record(
        interface_addresses=interface_ips,
        efa_interfaces=sum(1 for i in described if i.get("interfaceType") in hardware.EFA_INTERFACE_TYPES),
        per_running_node=running,
        per_crowded_node=crowded,
        max_size=most,
        at_max_size=running * most,
        crowded_at_max_size=crowded * most,
        subnet_cidr=subnet[0] if subnet else None,
        subnet_usable=subnet[1] if subnet else None,
    )


def trainium_nodes(graph: Graph) -> dict:
    """Each Trainium group's generation, training stack, node image and Neuron driver, and the private addresses its
    nodes take, as the plan file carries them."""
    groups = tuple(
        planfile.TrainiumNodeGroup.record(
            group=group.name,
            resource=group.node.name,
            instance_type=group.spec.name,
            generation=group.spec.generation,
            training_stack=_training_stack(group),
            node_image=_node_image(group),
            addresses=_node_addresses(group),
        )
        for group in trainium_groups(graph)
    )
    return planfile.TrainiumNodes.record(groups=groups).to_json()


def _stack_line(group: dict) -> str:
    stack = group["trainingStack"]
    if stack is None:
        return f"    training stack: none the platform knows (node label {layout.TRAINING_STACK_LABEL})"
    trains = (
        ""
        if group["generation"] in stack["generations"]
        else f"; it does NOT train {group['generation']} (it trains {', '.join(stack['generations'])})"
    )
    return (
        f"    training stack {stack['name']}: {stack['backend']} backend, image :{stack['imageTag']}, Neuron SDK "
        f"{stack['neuronSdk']}, runtime {stack['neuronRuntime']} (drivers {stack['drivers']}){trains}"
    )


def _image_line(group: dict) -> str:
    image, stack = group["nodeImage"], group["trainingStack"]
    if image["image"] is None:
        return "    node image: not known yet (a preview)"
    if image["release"] is None:
        return f"    node image: {image['image']}, no release the platform knows: its Neuron driver is not known"
    shown = f"    node image release {image['release']} ({image['image']}), "
    if image["neuronDriver"] is None:
        return shown + "Neuron driver: no source states it"
    shown += f"Neuron driver aws-neuronx-dkms {image['neuronDriver']}"
    if image["trainingRuntimeRunsOnIt"] is None:
        return shown
    verdict = "runs on it" if image["trainingRuntimeRunsOnIt"] else "does NOT run on it"
    return f"{shown}: {stack['name']}'s runtime {verdict}"


def _address_line(group: dict) -> str:
    taken = group["addresses"]
    if taken is None:
        return "    private IPs: not known yet"
    subnet = f" in subnet {taken['subnetCidr']} ({taken['subnetUsable']:,} usable)" if taken["subnetUsable"] else ""
    return (
        f"    private IPs: {taken['perRunningNode']} per running {group['instanceType']} node (the VPC CNI's interface for "
        f"its pods and a warm one; {taken['interfaceAddresses']} on its launch template's interfaces, "
        f"{taken['efaInterfaces']} EFA devices), "
        f"{taken['perCrowdedNode']} crowded with pods (every interface of its card); "
        f"{span(taken['atMaxSize'], taken['crowdedAtMaxSize'])} at maxSize {taken['maxSize']}{subnet}"
    )


def _crowded_subnets(groups: list[dict]) -> list[str]:
    crowded_by_subnet: dict[tuple[str, int], int] = {}
    for group in groups:
        taken = group["addresses"]
        if taken and taken["subnetUsable"]:
            key = (taken["subnetCidr"], taken["subnetUsable"])
            crowded_by_subnet[key] = crowded_by_subnet.get(key, 0) + taken["crowdedAtMaxSize"]
    return [
        f"Crowded Trainium nodes at maxSize would take {crowded:,} addresses of subnet {cidr}, more than its {usable:,}: "
        "pods past what a running node holds may wait for an address"
        for (cidr, usable), crowded in crowded_by_subnet.items()
        if crowded > usable
    ]


def node_lines(nodes: dict) -> list[str]:
    """For each Trainium group: its generation and resource, its training stack, the node image it boots and whether
    the stack's runtime initialises on its driver (the policy trainium-neuron-driver-compatible holds each group to
    it), and the private addresses its nodes take; then the subnets crowded nodes would exhaust."""
    lines = []
    for group in nodes["groups"]:
        name = group["group"] or group["resource"]
        lines += [
            f"Trainium group {name} ({group['instanceType']}, {group['generation']}; {group['resource']}):",
            _stack_line(group),
            _image_line(group),
            _address_line(group),
        ]
    return lines + _crowded_subnets(nodes["groups"])
