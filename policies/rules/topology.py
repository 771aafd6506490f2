"""Trainium topology rules: what distributed training on Trainium needs from the infrastructure.

Each function takes the stack's resource graph (or one resource) and the policy's config, and yields
violations. Values unknown during preview are skipped, never guessed: a rule judges what is known.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from policies.rules import Violation, describe
from policies.rules.network import ALL_PROTOCOLS, GroupRule, PortRange, group_rules
from policies.rules.trainium import (
    PLACEMENT_GROUP,
    SECURITY_GROUP,
    TrainiumGroup,
    subnet_az_id,
    tolerates,
    trainium_groups,
)
from trainium_eks import catalog, layout, tokens
from trainium_eks.graph import Graph, Node, dig, is_unknown, known

FSX = tokens.FSX_LUSTRE_FILE_SYSTEM
HELM_RELEASE_TYPES = (tokens.HELM_RELEASE, tokens.HELM_CHART)
QUEUE = tokens.VOLCANO_QUEUE
NEURON_AMI_TYPES = ("AL2023_x86_64_NEURON",)
NEURON_CHART = "neuron-helm-chart"
EFA_CHART = "aws-efa-k8s-device-plugin"
LUSTRE_PORT_RANGES = (PortRange(988, 988), PortRange(1018, 1023))
ETCD_IMAGE = re.compile(r"(^|/)etcd(:|@|$)")
ETCD_PINNED_3_5 = re.compile(r":v3\.5\.\d+$")
RESERVATION_AZ_TAG = layout.CAPACITY_RESERVATION_AZ_TAG
WORKLOAD_TYPES = (
    tokens.K8S_STATEFUL_SET,
    tokens.K8S_DEPLOYMENT,
    tokens.K8S_DAEMON_SET,
    tokens.K8S_POD,
    tokens.K8S_JOB,
)


def node_group_single_az(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        subnet_ids = group.node.props.get("subnetIds")
        if isinstance(subnet_ids, list) and len(subnet_ids) != 1:
            yield Violation(
                group.node.urn,
                f"{describe(group.node)} spans {len(subnet_ids)} subnets; give it exactly one subnet in the Trainium AZ "
                "so that its placement group, EFA traffic and FSx stay in one AZ",
            )
        elif len(group.az_ids()) > 1:
            yield Violation(
                group.node.urn,
                f"{describe(group.node)} uses subnets in {', '.join(sorted(group.az_ids()))}; keep it in one AZ",
            )


EFA_LAYOUT_FIELDS = ("interfaceType", "networkCardIndex", "deviceIndex")


def _efa_interfaces(group: TrainiumGroup) -> list | None:
    """The launch template's interfaces, or None when the template or their layout is unknown (security
    groups inside them may be unknown in a preview; the layout rarely is)."""
    if group.launch_template is None:
        return None
    interfaces = group.launch_template.props.get("networkInterfaces", [])
    if not isinstance(interfaces, list) or not all(known([i.get(f) for f in EFA_LAYOUT_FIELDS]) for i in interfaces):
        return None
    return interfaces


def efa_interface_per_network_card(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        if not group.spec.supports_efa:
            continue
        name, cards = describe(group.node), group.spec.network_cards
        if group.launch_template is None:
            yield Violation(
                group.node.urn,
                f"{name} has no launch template, so its {cards} EFA interfaces cannot be attached; "
                "give it a launch template with one EFA interface per network card",
            )
            continue
        interfaces = _efa_interfaces(group)
        if interfaces is None:
            continue
        template = describe(group.launch_template)
        # EC2 takes an interface without a type as a plain ENA interface.
        found = {
            (int(i.get("networkCardIndex", 0)), int(i.get("deviceIndex", -1))): i.get("interfaceType") or catalog.ENA_INTERFACE
            for i in interfaces
        }
        if len(found) < len(interfaces):
            yield Violation(group.launch_template.urn, f"{template} attaches two interfaces at one network card and device index")
        efa_cards = sorted({card for (card, _), kind in found.items() if kind in catalog.EFA_INTERFACE_TYPES})
        if efa_cards != list(range(cards)):
            yield Violation(
                group.launch_template.urn,
                f"{template} attaches EFA on network cards {efa_cards} but {group.spec.name} has {cards} cards; "
                f"attach one EFA interface per card 0..{cards - 1}",
            )
        expected = {(s.network_card_index, s.device_index): s.interface_type for s in group.spec.efa_layout()}
        for card, device in sorted(found.keys() | expected.keys()):
            if found.get((card, device)) != expected.get((card, device)):
                yield Violation(
                    group.launch_template.urn,
                    f"{template} has {_kind(found.get((card, device)))} at network card {card} device index {device} "
                    f"where the hardware catalog's layout for {group.spec.name} (EC2's recommended one) has "
                    f"{_kind(expected.get((card, device)))}",
                )


def _kind(interface_type: str | None) -> str:
    return f"'{interface_type}'" if interface_type else "no interface"


def cluster_placement_group(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        if not group.spec.supports_efa or group.max_size == 1 or group.launch_template is None:
            continue
        template = group.launch_template
        placement = template.linked("placement", PLACEMENT_GROUP)
        if not dig(template.props, "placement", "groupName") and not placement:
            yield Violation(
                template.urn,
                f"{describe(template)} launches multi-node {group.spec.name} nodes outside a "
                "placement group; set placement.groupName to a cluster placement group",
            )
        for pg in placement:
            strategy = pg.props.get("strategy")
            if not is_unknown(strategy) and strategy != "cluster":
                yield Violation(pg.urn, f"{describe(pg)} uses strategy '{strategy}'; EFA collectives need strategy 'cluster'")


def neuron_ami(node: Node, config: dict) -> Iterator[Violation]:
    (group,) = trainium_groups(Graph([node, *node.linked("launchTemplate")])) or (None,)
    if group is None:
        return
    ami_type = node.props.get("amiType")
    if is_unknown(ami_type):
        return
    if ami_type not in NEURON_AMI_TYPES:
        yield Violation(
            node.urn,
            f"{describe(node)} runs {group.spec.name} on AMI type '{ami_type}'; use "
            f"{NEURON_AMI_TYPES[0]} (EKS-optimised AL2023 with the Neuron and EFA drivers)",
        )


def _covers(rule: GroupRule, ports: PortRange) -> bool:
    traffic = rule.traffic
    return traffic.protocol in (ALL_PROTOCOLS, "tcp") and traffic.ports is not None and traffic.ports.covers(ports)


def _self_all_traffic(rules: list[GroupRule]) -> bool:
    return any(r.names_itself and r.traffic.protocol == ALL_PROTOCOLS for r in rules)


def efa_security_group_self_traffic(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        if not group.spec.supports_efa or group.launch_template is None:
            continue
        groups = group.launch_template.linked("networkInterfaces", SECURITY_GROUP)
        rules = [(group_rules(graph, sg, "ingress"), group_rules(graph, sg, "egress")) for sg in groups]
        if any(ingress is None or egress is None for ingress, egress in rules):
            continue
        if not any(_self_all_traffic(ingress) and _self_all_traffic(egress) for ingress, egress in rules):
            yield Violation(
                group.launch_template.urn,
                f"{describe(group.launch_template)}: none of its interfaces' security groups allows all traffic to and "
                "from itself; EFA needs a group with self-referencing all-protocol ingress and egress rules",
            )


def az_offers_instance_type(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        region = group.node.region
        for az_id in sorted(group.az_ids()):
            if region and not group.spec.offered_in(region, az_id):
                offered = ", ".join(group.spec.az_ids.get(region, ())) or "no AZ"
                yield Violation(
                    group.node.urn,
                    f"{describe(group.node)}: {az_id} ({region}) does not offer "
                    f"{group.spec.name} per the hardware catalog (offered in {offered}); move the Trainium subnet",
                )


def fsx_in_trainium_az(graph: Graph, config: dict) -> Iterator[Violation]:
    trainium_azs = set().union(*(g.az_ids() for g in trainium_groups(graph)))
    if not trainium_azs:
        return
    for fsx in graph.of_type(FSX):
        azs = {az for az in (subnet_az_id(s) for s in fsx.linked("subnetIds")) if az}
        if azs and not azs <= trainium_azs:
            yield Violation(
                fsx.urn,
                f"{describe(fsx)} is in {', '.join(sorted(azs))} but the Trainium nodes are in "
                f"{', '.join(sorted(trainium_azs))}; put the file system in the Trainium subnet",
            )


def fsx_lustre_ports(graph: Graph, config: dict) -> Iterator[Violation]:
    for fsx in graph.of_type(FSX):
        per_group = [group_rules(graph, sg, "ingress") for sg in fsx.linked("securityGroupIds", SECURITY_GROUP)]
        if None in per_group:
            continue
        rules = [r for rules_of_group in per_group for r in rules_of_group]
        for ports in LUSTRE_PORT_RANGES:
            covering = [r for r in rules if _covers(r, ports)]
            if not any(r.names_itself for r in covering):
                yield Violation(
                    fsx.urn,
                    f"{describe(fsx)}: its security groups do not allow TCP {ports} between the file "
                    "system's own servers; add a self-referencing ingress rule",
                )
            if not any(r.names_others for r in covering):
                yield Violation(
                    fsx.urn,
                    f"{describe(fsx)}: its security groups do not allow TCP {ports} from the nodes; "
                    "add an ingress rule from the cluster security group",
                )


def _releases_of(graph: Graph, chart: str) -> list[Node]:
    return [r for r in graph.of_type(*HELM_RELEASE_TYPES) if str(r.props.get("chart", "")).rstrip("/").endswith(chart)]


def device_plugins_present(graph: Graph, config: dict) -> Iterator[Violation]:
    groups = trainium_groups(graph)
    if not groups:
        return
    taints = [t for g in groups for t in g.taints()]
    for chart, tolerations_path in ((NEURON_CHART, ("devicePlugin", "tolerations")), (EFA_CHART, ("tolerations",))):
        releases = _releases_of(graph, chart)
        if not releases:
            yield Violation(
                groups[0].node.urn,
                f"Trainium node groups exist but no Helm release of {chart} does; "
                f"install the {'Neuron' if chart == NEURON_CHART else 'EFA'} device plugin",
            )
        for release in releases:
            tolerations = dig(release.props, "values", *tolerations_path, default=[])
            if not known(tolerations):
                continue
            for taint in taints:
                if not tolerates(tolerations, taint):
                    yield Violation(
                        release.urn,
                        f"{describe(release)} does not tolerate the Trainium taint "
                        f"{taint.get('key')}={taint.get('value')}:{taint.get('effect')}, so its DaemonSet "
                        f"cannot run on Trainium nodes; add a toleration for {taint.get('key')}",
                    )


def provisioned_capacity(graph: Graph) -> dict[str, int] | None:
    """Neuron devices, NeuronCores and EFA interfaces at the node groups' maximum sizes (None if unknown)."""
    totals = {layout.NEURON_DEVICE_RESOURCE: 0, layout.NEURON_CORE_RESOURCE: 0, layout.EFA_RESOURCE: 0}
    for group in trainium_groups(graph):
        interfaces = _efa_interfaces(group) if group.launch_template is not None else []
        if group.max_size is None or interfaces is None:
            return None
        efa = sum(1 for i in interfaces if i.get("interfaceType") in catalog.EFA_INTERFACE_TYPES)
        totals[layout.NEURON_DEVICE_RESOURCE] += group.max_size * group.spec.neuron_devices
        totals[layout.NEURON_CORE_RESOURCE] += group.max_size * group.spec.neuron_cores
        totals[layout.EFA_RESOURCE] += group.max_size * efa
    return totals


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
        for resource, limit in capacity.items():
            asked = capability.get(resource)
            if asked is not None and _quantity(asked) > limit:
                yield Violation(
                    queue.urn,
                    f"{describe(queue)} allows {_quantity(asked)} {resource} but the node groups "
                    f"provide {limit} at their maximum size; lower the capability or raise maxSize",
                )


def _quantity(value) -> int:
    return int(float(value))


def etcd_pinned_with_v2_api(node: Node, config: dict) -> Iterator[Violation]:
    pod = dig(node.props, "spec", "template", "spec") if node.type != tokens.K8S_POD else node.props.get("spec")
    if not isinstance(pod, dict):
        return
    for container in pod.get("containers", []) if known(pod.get("containers")) else []:
        image = str(container.get("image", ""))
        if not ETCD_IMAGE.search(image):
            continue
        if not ETCD_PINNED_3_5.search(image):
            yield Violation(
                node.urn,
                f"{describe(node)} runs etcd image '{image}'; pin an exact v3.5.x tag (3.6 removed "
                "the v2 API that torch's etcd rendezvous uses)",
            )
        flags = [*container.get("command", []), *container.get("args", [])]
        env = {e.get("name"): e.get("value") for e in container.get("env", [])}
        if "--enable-v2=true" not in flags and "--enable-v2" not in flags and env.get("ETCD_ENABLE_V2") != "true":
            yield Violation(node.urn, f"{describe(node)} runs etcd without the v2 API; add --enable-v2=true")


def capacity_reservation_in_trainium_az(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        template = group.launch_template
        if template is None or not dig(template.props, "capacityReservationSpecification", "capacityReservationTarget"):
            continue
        reservation_az = dig(template.props, "tags", RESERVATION_AZ_TAG)
        if is_unknown(reservation_az):
            continue
        if not reservation_az:
            yield Violation(
                template.urn,
                f"{describe(template)} targets a capacity reservation without the "
                f"{RESERVATION_AZ_TAG} tag; tag it with the reservation's AZ ID so its AZ can be checked",
            )
        elif group.az_ids() and reservation_az not in group.az_ids():
            yield Violation(
                template.urn,
                f"{describe(template)} targets a reservation in {reservation_az} but "
                f"{describe(group.node)} is in {', '.join(sorted(group.az_ids()))}; use a reservation in the "
                "Trainium AZ",
            )
