"""Scheduling rules: Volcano queues within the provisioned Neuron capacity, and etcd for torch's rendezvous.

A queue's capability is compared with what the Trainium groups of either kind provide at their maximum size.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from plan_graph.graph import Graph, Node, dig, known
from plan_graph.trainium_groups import TrainiumGroup, trainium_groups
from policies.rules import Violation, describe, listed, shown
from trainium_eks import hardware, shares, tokens
from trainium_eks.quantities import quantity

QUEUE = tokens.VOLCANO_QUEUE
ETCD_IMAGE = re.compile(r"(\A|/)etcd(:|@|\Z)")
ETCD_PINNED_3_5 = re.compile(r":v3\.5\.\d+\Z", re.ASCII)
WORKLOAD_TYPES = (
    tokens.K8S_STATEFUL_SET,
    tokens.K8S_DEPLOYMENT,
    tokens.K8S_DAEMON_SET,
    tokens.K8S_POD,
    tokens.K8S_JOB,
)


def _efa_count(group: TrainiumGroup) -> int | None:
    if group.template is None:
        return 0
    interfaces = group.interfaces()
    described = [i for i in interfaces or [] if isinstance(i, dict)]  # what is no object attaches nothing
    if interfaces is None or not all(known(i.get("interfaceType")) for i in described):
        return None  # security groups inside the interfaces may be unknown in a preview; their types rarely are
    return sum(1 for i in described if i.get("interfaceType") in hardware.EFA_INTERFACE_TYPES)


def plan_fleet(graph: Graph) -> tuple[shares.GroupNodes, ...] | None:
    """The plan's Trainium groups as the share model sees them (``trainium_eks.shares``): maximum size and what one node
    advertises; None while a preview does not know a size or the nodes' interfaces."""
    fleet = []
    for group in trainium_groups(graph):
        efa = _efa_count(group)
        if group.max_size is None or efa is None:
            return None
        per_node = shares.node_resources(group.spec.neuron_devices, group.spec.neuron_cores, efa)
        fleet.append(shares.GroupNodes(group.name or group.node.name, group.spec.name, group.max_size, per_node))
    return tuple(fleet)


def provisioned_capacity(graph: Graph) -> dict[str, int] | None:
    """Neuron devices, NeuronCores and EFA interfaces at the node groups' maximum sizes (None if unknown)."""
    fleet = plan_fleet(graph)
    return None if fleet is None else shares.fleet_capacity(fleet)


def volcano_queue_within_capacity(graph: Graph, config: dict) -> Iterator[Violation]:
    groups = trainium_groups(graph)
    queues = graph.of_type(QUEUE)
    if groups and not queues:
        yield Violation(
            groups[0].node.urn,
            "Trainium node groups exist but no Volcano Queue does; create a queue for "
            "training jobs (scheduling.volcano.sh/v1beta1 Queue)",
        )
    capacity = provisioned_capacity(graph)
    if capacity is None:
        return
    for queue in queues:
        capability = dig(queue.props, "spec", "capability", default={}) or {}
        if not known(capability):
            continue
        if not isinstance(capability, dict):
            yield Violation(queue.urn, f"{describe(queue)} has a capability {capability!r} that is no map of quantities")
            continue
        for resource, limit in capacity.items():
            asked = capability.get(resource)
            amount = quantity(asked)
            if asked is not None and amount is None:
                yield Violation(
                    queue.urn,
                    f"{describe(queue)} allows {asked!r} {resource}, which is no Kubernetes quantity; write a number "
                    "such as 16 (or 16k, 1Ki, 1e3)",
                )
            elif amount is not None and amount > limit:
                yield Violation(
                    queue.urn,
                    f"{describe(queue)} allows {shown(float(amount))} {resource} but the node groups "
                    f"provide {limit} at their maximum size; lower the capability or raise maxSize",
                )


def etcd_pinned_with_v2_api(node: Node, config: dict) -> Iterator[Violation]:
    pod = dig(node.props, "spec", "template", "spec") if node.type != tokens.K8S_POD else node.props.get("spec")
    if not isinstance(pod, dict):
        return
    for container in pod.get("containers") if isinstance(pod.get("containers"), list) else []:
        if not isinstance(container, dict):
            continue
        image = str(container.get("image", ""))
        if not ETCD_IMAGE.search(image):
            continue
        if not ETCD_PINNED_3_5.search(image):
            yield Violation(
                node.urn,
                f"{describe(node)} runs etcd image '{image}'; pin an exact v3.5.x tag (3.6 removed "
                "the v2 API that torch's etcd rendezvous uses)",
            )
        flags = [*listed(container.get("command")), *listed(container.get("args"))]
        variables = [e for e in listed(container.get("env")) if isinstance(e, dict) and isinstance(e.get("name"), str)]
        env = {e["name"]: e.get("value") for e in variables}
        if "--enable-v2=true" not in flags and "--enable-v2" not in flags and env.get("ETCD_ENABLE_V2") != "true":
            yield Violation(node.urn, f"{describe(node)} runs etcd without the v2 API; add --enable-v2=true")
