"""Trainium topology rules: what distributed training on Trainium needs from the infrastructure.

Each function takes the stack's resource graph (or one resource) and the policy's config, and yields
violations. Values unknown during preview are skipped, never guessed: a rule judges what is known.
"""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph.graph import Graph, Node, dig, is_unknown, known
from plan_graph.trainium_groups import (
    SECURITY_GROUP,
    TrainiumGroup,
    subnet_az_id,
    tolerates,
    trainium_groups,
)
from policies.rules import Violation, describe
from policies.rules.network import ALL_PROTOCOLS, GroupRule, PortRange, group_rules
from trainium_eks import hardware, layout, tokens

FSX = tokens.FSX_LUSTRE_FILE_SYSTEM
HELM_RELEASE_TYPES = (tokens.HELM_RELEASE, tokens.HELM_CHART)
NEURON_CHART = "neuron-helm-chart"
EFA_CHART = "aws-efa-k8s-device-plugin"
LUSTRE_PORT_RANGES = (PortRange(988, 988), PortRange(1018, 1023))
RESERVATION_AZ_TAG = layout.CAPACITY_RESERVATION_AZ_TAG


def node_group_single_az(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        count, name = group.subnet_count(), describe(group.node)
        if group.selects_subnets_by_tag():
            yield Violation(
                group.node.urn,
                f"{name} selects its subnets by tag, so its nodes may land in any AZ a tagged subnet is in; select "
                "exactly one subnet, the Trainium subnet, by ID",
            )
        elif count is not None and count != 1:
            yield Violation(
                group.node.urn,
                f"{name} spans {count} subnets; give it exactly one subnet in the Trainium AZ "
                "so that its placement group, EFA traffic and FSx stay in one AZ",
            )
        elif len(group.az_ids()) > 1:
            yield Violation(group.node.urn, f"{name} uses subnets in {', '.join(sorted(group.az_ids()))}; keep it in one AZ")


EFA_LAYOUT_FIELDS = ("interfaceType", "networkCardIndex", "deviceIndex")


def _efa_interfaces(group: TrainiumGroup) -> list | None:
    """The node template's interfaces, or None when the template or their layout is unknown (security
    groups inside them may be unknown in a preview; the layout rarely is)."""
    if group.template is None:
        return None
    interfaces = group.interfaces()
    if interfaces is None or not all(known([i.get(f) for f in EFA_LAYOUT_FIELDS]) for i in interfaces if isinstance(i, dict)):
        return None
    return interfaces


def _no_template(group: TrainiumGroup) -> str:
    kind = "EC2NodeClass" if group.elastic else "launch template"
    return f"{describe(group.node)} has no {kind}"


def _index(value, default: int) -> int | None:
    """A network card or device index as EC2 reads it (a whole number; unset: ``default``), else None."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not float(value).is_integer():
        return None
    return int(value)


def _numbers(values) -> str:
    """``0, 2, 5-7``: whole numbers in order, runs joined."""
    runs: list[list[int]] = []
    for value in sorted(values):
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def _places(slots) -> str:
    """``network card 0 device index 1 and network cards 1-15 device index 0``."""
    by_device: dict[int, list[int]] = {}
    for card, device in slots:
        by_device.setdefault(device, []).append(card)
    return " and ".join(
        f"network card{'s' if len(cards) > 1 else ''} {_numbers(cards)} device index {device}"
        for device, cards in sorted(by_device.items(), key=lambda item: (min(item[1]), item[0]))
    )


def _layout_problems(group: TrainiumGroup, interfaces: list) -> list[str]:
    """How the interfaces differ from the catalog's layout for the type, each kind of difference once."""
    cards = group.spec.network_cards
    problems, found = [], {}
    for position, interface in enumerate(interfaces):
        card = _index(interface.get("networkCardIndex"), 0) if isinstance(interface, dict) else None
        device = _index(interface.get("deviceIndex"), -1) if isinstance(interface, dict) else None
        if card is None or device is None:
            problems.append(f"interface {position} is not an object with whole networkCardIndex and deviceIndex")
            continue
        if (card, device) in found:
            problems.append(f"attaches two interfaces at network card {card} device index {device}")
        # EC2 takes an interface without a type as a plain ENA interface.
        kind = interface.get("interfaceType") or hardware.ENA_INTERFACE
        found[(card, device)] = kind if isinstance(kind, str) else repr(kind)
    efa_cards = {card for (card, _), kind in found.items() if kind in hardware.EFA_INTERFACE_TYPES}
    if efa_cards != set(range(cards)):
        problems.append(f"attaches EFA on network cards {_numbers(efa_cards) or 'none'} of the {cards} (0-{cards - 1})")
    expected = {(s.network_card_index, s.device_index): s.interface_type for s in group.spec.efa_layout()}
    differences: dict[tuple, list] = {}
    for slot in sorted(found.keys() | expected.keys()):
        if found.get(slot) != expected.get(slot):
            differences.setdefault((found.get(slot), expected.get(slot)), []).append(slot)
    for (has, wanted), slots in differences.items():
        problems.append(
            f"has {_kind(has)} at {_places(slots)} where the hardware catalog's layout for {group.spec.name} (EC2's "
            f"recommended one) has {_kind(wanted)}"
        )
    return problems


def efa_interface_per_network_card(graph: Graph, config: dict) -> Iterator[Violation]:
    """One finding per node template, naming every place its interfaces leave the catalog's layout."""
    for group in trainium_groups(graph):
        if not group.spec.supports_efa:
            continue
        cards = group.spec.network_cards
        if group.template is None:
            yield Violation(
                group.node.urn,
                f"{_no_template(group)}, so its {cards} EFA interfaces cannot be attached; "
                "give it one with one EFA interface per network card",
            )
            continue
        interfaces = _efa_interfaces(group)
        problems = _layout_problems(group, interfaces) if interfaces is not None else []
        if problems:
            yield Violation(
                group.template.urn,
                f"{describe(group.template)} {'; '.join(problems)}; attach one EFA interface per network card "
                f"0-{cards - 1} in the catalog's layout",
            )


def _kind(interface_type: str | None) -> str:
    return f"'{interface_type}'" if interface_type else "no interface"


def cluster_placement_group(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        if not group.spec.supports_efa or group.max_size == 1 or group.template is None:
            continue
        template = group.template
        placement = group.placement_groups()
        if not group.placement_group_name() and not placement:
            where = "placementGroupSelector" if group.elastic else "placement.groupName"
            yield Violation(
                template.urn,
                f"{describe(template)} launches multi-node {group.spec.name} nodes outside a "
                f"placement group; set {where} to a cluster placement group",
            )
        for pg in placement:
            strategy = pg.props.get("strategy")
            if not is_unknown(strategy) and strategy != "cluster":
                yield Violation(pg.urn, f"{describe(pg)} uses strategy '{strategy}'; EFA collectives need strategy 'cluster'")


def _covers(rule: GroupRule, ports: PortRange) -> bool:
    traffic = rule.traffic
    return traffic.protocol in (ALL_PROTOCOLS, "tcp") and traffic.ports is not None and traffic.ports.covers(ports)


def _self_all_traffic(rules: list[GroupRule]) -> bool:
    return any(r.names_itself and r.traffic.protocol == ALL_PROTOCOLS for r in rules)


def efa_security_group_self_traffic(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        if not group.spec.supports_efa or group.template is None:
            continue
        rules = [(group_rules(graph, sg, "ingress"), group_rules(graph, sg, "egress")) for sg in group.security_groups()]
        if any(ingress is None or egress is None for ingress, egress in rules):
            continue
        if not any(_self_all_traffic(ingress) and _self_all_traffic(egress) for ingress, egress in rules):
            yield Violation(
                group.template.urn,
                f"{describe(group.template)}: none of its interfaces' security groups allows all traffic to and "
                "from itself; EFA needs a group with self-referencing all-protocol ingress and egress rules",
            )


def az_offers_instance_type(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        region = group.region
        if region and group.in_capacity_block() and region not in group.spec.capacity_block_regions:
            yield Violation(
                group.node.urn,
                f"{describe(group.node)}: runs in a Capacity Block, but EC2 sells no Capacity Blocks of {group.spec.name} "
                f"in {region} per the hardware catalog; target an On-Demand Capacity Reservation instead",
            )
        for az_id in sorted(group.az_ids()):
            if region and not group.spec.offered_in(region, az_id, capacity_block=group.in_capacity_block()):
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


def capacity_reservation_in_trainium_az(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        template = group.template
        if template is None or not group.reservation_target():
            continue
        reservation_az = group.reservation_fact(RESERVATION_AZ_TAG)
        if is_unknown(reservation_az):
            continue
        where = "annotation" if group.elastic else "tag"
        if not reservation_az:
            yield Violation(
                template.urn,
                f"{describe(template)} targets a capacity reservation without the "
                f"{RESERVATION_AZ_TAG} {where}; add the reservation's AZ ID so its AZ can be checked",
            )
        elif group.az_ids() and reservation_az not in group.az_ids():
            yield Violation(
                template.urn,
                f"{describe(template)} targets a reservation in {reservation_az} but "
                f"{describe(group.node)} is in {', '.join(sorted(group.az_ids()))}; use a reservation in the "
                "Trainium AZ",
            )
