"""Addresses and ports by meaning, for the rules that read security-group rules and endpoint CIDRs.

CIDRs are parsed as networks, so a set of them is judged by what it covers ("0.0.0.0/1" and "128.0.0.0/1"
together are the IPv4 internet), and ports are ranges (protocol "-1" covers every port, tcp 0-65535 covers 22).
Unknown values are left out: what is known is judged, never guessed.
"""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from plan_graph.graph import Graph, Node, is_unknown, known
from trainium_eks import tokens

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
INTERNET = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
ALL_PROTOCOLS = "all"
# AWS accepts a protocol by name or by number; "-1" and "all" mean every protocol.
PROTOCOL_NAMES = {"-1": ALL_PROTOCOLS, "6": "tcp", "17": "udp", "1": "icmp", "58": "icmpv6"}
# Only these have ports; for ICMP the same fields hold a type and code, so a rule covers the whole protocol.
PORTED_PROTOCOLS = ("tcp", "udp")
RULE_CIDR_LISTS = ("cidrBlocks", "ipv6CidrBlocks")  # inline rules and SecurityGroupRule
RULE_CIDRS = ("cidrIpv4", "cidrIpv6")  # the vpc rule resources
SEPARATE_RULE_TYPES = {
    "ingress": tokens.VPC_SECURITY_GROUP_INGRESS_RULE,
    "egress": tokens.VPC_SECURITY_GROUP_EGRESS_RULE,
}


@dataclass(frozen=True)
class Cidrs:
    """What CIDR inputs say: the networks they name, and a description of each entry that is not a CIDR."""

    networks: tuple[Network, ...] = ()
    malformed: tuple[str, ...] = ()

    def __add__(self, other: Cidrs) -> Cidrs:
        return Cidrs(self.networks + other.networks, self.malformed + other.malformed)


def parse_cidrs(values, field: str) -> Cidrs:
    """A list of CIDR strings (input ``field``) as networks; unknown entries, or an unknown list, are left out."""
    if values is None or is_unknown(values):
        return Cidrs()
    if not isinstance(values, list):
        return Cidrs(malformed=(f"{field} {values!r} (not a list)",))
    networks, malformed = [], []
    for value in values:
        if is_unknown(value):
            continue
        network = _network(value)
        if network is None:
            malformed.append(f"{field} entry {value!r}")
        else:
            networks.append(network)
    return Cidrs(tuple(networks), tuple(malformed))


def _network(value) -> Network | None:
    # ip_network also takes integers and bare addresses; only strings are CIDR inputs.
    if not isinstance(value, str):
        return None
    try:
        return ipaddress.ip_network(value, strict=False)
    except ValueError:
        return None


def internet_covered(networks: Iterable[Network]) -> list[Network]:
    """The internets (0.0.0.0/0, ::/0) that ``networks`` together cover, one address family at a time."""
    networks = list(networks)
    return [
        internet
        for internet in INTERNET
        if list(ipaddress.collapse_addresses(n for n in networks if n.version == internet.version)) == [internet]
    ]


@dataclass(frozen=True)
class PortRange:
    low: int
    high: int

    def covers(self, other: PortRange) -> bool:
        return self.low <= other.low and other.high <= self.high

    def __str__(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


ALL_PORTS = PortRange(0, 65535)


@dataclass(frozen=True)
class Traffic:
    """What a security-group rule lets through: a protocol by name, and its ports (None: not a port range)."""

    protocol: str
    ports: PortRange | None

    def __str__(self) -> str:
        if self.protocol == ALL_PROTOCOLS:
            return "all traffic"
        if self.protocol not in PORTED_PROTOCOLS or self.ports is None:
            return self.protocol
        return f"{self.protocol} {self.ports}"


def protocol_name(value) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer():
        value = int(value)
    name = str(value).lower()
    return PROTOCOL_NAMES.get(name, name)


def _port(value) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer() and 0 <= value <= 65535:
        return int(value)
    return None


def traffic_of(rule: Mapping) -> Traffic | None:
    """The traffic of a security-group rule in any of its shapes (inline, SecurityGroupRule, the vpc rule
    resources), or None while its protocol or ports are unknown."""
    protocol, low, high = rule.get("protocol", rule.get("ipProtocol")), rule.get("fromPort"), rule.get("toPort")
    if not known([protocol, low, high]):
        return None
    name = protocol_name(protocol)
    if name == ALL_PROTOCOLS or name not in PORTED_PROTOCOLS:
        return Traffic(name, ALL_PORTS)
    low, high = _port(low), _port(high)
    return Traffic(name, PortRange(low, high) if low is not None and high is not None and low <= high else None)


def sources_of(rule: Mapping) -> Cidrs:
    """The CIDRs of a security-group rule in any of its shapes (its sources, or its destinations for egress)."""
    cidrs = Cidrs()
    for field in RULE_CIDR_LISTS:
        cidrs += parse_cidrs(rule.get(field), field)
    for field in RULE_CIDRS:
        if rule.get(field) is not None:
            cidrs += parse_cidrs([rule[field]], field)
    return cidrs


@dataclass(frozen=True)
class GroupRule:
    """One rule of a security group: its traffic, whether it names the group itself, and whether it names
    anything else (another group or a CIDR)."""

    traffic: Traffic
    names_itself: bool
    names_others: bool


def group_rules(graph: Graph, group: Node, direction: str) -> list[GroupRule] | None:
    """A security group's rules in one direction ("ingress" or "egress"), inline or as separate vpc rule
    resources; None while the inline rules or a separate rule's traffic are unknown."""
    inline = group.props.get(direction) or []
    if not known(inline):
        return None
    rules = [
        GroupRule(
            traffic_of(r),
            names_itself=r.get("self") is True,
            names_others=bool(r.get("securityGroups") or any(r.get(f) for f in RULE_CIDR_LISTS)),
        )
        for r in (inline if isinstance(inline, list) else [])
        if isinstance(r, dict)
    ]
    for rule in graph.of_type(SEPARATE_RULE_TYPES[direction]):
        if group not in rule.linked("securityGroupId"):
            continue
        traffic = traffic_of(rule.props)
        if traffic is None:
            return None
        referenced = rule.linked("referencedSecurityGroupId")
        others = [r for r in referenced if r is not group] or any(rule.props.get(f) for f in RULE_CIDRS)
        rules.append(GroupRule(traffic, names_itself=group in referenced, names_others=bool(others)))
    return rules


@dataclass(frozen=True)
class Exposure:
    """Traffic that a whole internet may send, and the networks that together let it in."""

    internet: Network
    traffic: Traffic
    networks: tuple[Network, ...]


def internet_exposures(rules: Sequence[tuple[Traffic, Sequence[Network]]]) -> list[Exposure]:
    """Where rules together admit a whole internet, as the widest port ranges. Rules add up per protocol and
    port: tcp 22 from 0.0.0.0/1 in one rule and from 128.0.0.0/1 in another admit the IPv4 internet on tcp 22,
    and a rule on every protocol counts for each protocol. Rules whose ports are not a range are left out."""
    rules = [(traffic, networks) for traffic, networks in rules if traffic.ports is not None]
    everything = [rule for rule in rules if rule[0].protocol == ALL_PROTOCOLS]
    exposures: list[Exposure] = []
    for internet in INTERNET:
        networks = _networks_in(internet, everything)
        if internet_covered(networks):
            exposures.append(Exposure(internet, Traffic(ALL_PROTOCOLS, ALL_PORTS), networks))
            continue  # every protocol and port is open to this internet; nothing narrower to add
        for protocol in sorted({traffic.protocol for traffic, _ in rules} - {ALL_PROTOCOLS}):
            applying = [rule for rule in rules if rule[0].protocol in (protocol, ALL_PROTOCOLS)]
            for piece in _pieces([traffic.ports for traffic, _ in applying]):
                networks = _networks_in(internet, [rule for rule in applying if rule[0].ports.covers(piece)])
                if internet_covered(networks):
                    _add_widening(exposures, Exposure(internet, Traffic(protocol, piece), networks))
    return exposures


def _add_widening(exposures: list[Exposure], exposure: Exposure) -> None:
    """Append ``exposure``, or widen the last one when it continues its port range."""
    last = exposures[-1] if exposures else None
    if (
        last is None
        or (last.internet, last.traffic.protocol) != (exposure.internet, exposure.traffic.protocol)
        or last.traffic.ports.high + 1 != exposure.traffic.ports.low
    ):
        exposures.append(exposure)
        return
    ports = PortRange(last.traffic.ports.low, exposure.traffic.ports.high)
    networks = tuple(dict.fromkeys(last.networks + exposure.networks))
    exposures[-1] = Exposure(exposure.internet, Traffic(exposure.traffic.protocol, ports), networks)


def _networks_in(internet: Network, rules) -> tuple[Network, ...]:
    return tuple(dict.fromkeys(n for _, networks in rules for n in networks if n.version == internet.version))


def _pieces(ranges: Iterable[PortRange]) -> list[PortRange]:
    """The port ranges between every start and end of ``ranges``: each rule covers a piece wholly or not at all."""
    bounds = sorted({bound for r in ranges for bound in (r.low, r.high + 1)})
    return [PortRange(low, next_low - 1) for low, next_low in itertools.pairwise(bounds)]
