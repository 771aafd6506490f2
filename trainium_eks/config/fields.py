"""Field types of the stack configuration: how the CLI's strings decode, and the naming and address rules of
AWS and Kubernetes that a value must follow. Each failed rule reads ``<problem>; <fix>``.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic_core import PydanticCustomError

from trainium_eks.config.errors import RULE_ERROR

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# Kubernetes label names and values: 63 characters at most, alphanumerics at both ends, "-_." between; a key may
# carry a DNS-subdomain prefix and "/" (kubernetes.io, "Labels and Selectors", syntax and character set).
LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# AWS tag values: up to 256 Unicode letters, digits, spaces and _.:/=+-@ (AWS "Tagging AWS resources" guide).
TAG_VALUE_MAX = 256
TAG_PUNCTUATION = set("_.:/=+-@")
# S3 bucket names: 3-63 lowercase letters, digits, dots and hyphens, a letter or digit at each end (S3 User Guide).
S3_URL = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/[^\s]*)?$")
ECR_NAME = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8,17}$")
VPC_ID = re.compile(r"^vpc-[0-9a-f]{8,17}$")
SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}$")
# GitHub: an owner of up to 39 letters, digits and single hyphens; a repository name of letters, digits, ".", "_", "-".
GITHUB_REPOSITORY = re.compile(r"^[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}/[A-Za-z0-9._-]{1,100}$")
# A connection ARN of either service name (CodeStar Connections was renamed CodeConnections; both ARNs are valid).
CONNECTION_ARN = re.compile(r"^arn:aws[a-z-]*:(codeconnections|codestar-connections):[a-z0-9-]+:\d{12}:connection/[0-9a-f-]{36}$")
# SNS topic ARNs; a topic name is 1-256 ASCII letters, digits, hyphens and underscores, ".fifo" ending a FIFO
# topic (SNS API Reference, CreateTopic: Name).
SNS_TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$")
# The ranges RFC 1918 sets aside for private networks, which the Amazon VPC User Guide recommends for a VPC.
PRIVATE_RANGES = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
# Addresses that never reach a public endpoint: private (RFC 1918), shared (RFC 6598), loopback, link-local
# (RFC 3927), and IPv6 unique-local (RFC 4193), link-local and loopback (RFC 4291).
UNROUTED_RANGES = (
    *PRIVATE_RANGES,
    *(ipaddress.ip_network(n) for n in ("100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "fc00::/7", "fe80::/10", "::1/128")),
)


def rule_error(problem: str, fix: str) -> PydanticCustomError:
    return PydanticCustomError(RULE_ERROR, "{problem}; {fix}", {"problem": problem, "fix": fix})


def rule(check: Callable[[Any], bool], problem: str | Callable[[Any], str], fix: str) -> AfterValidator:
    """A validator that fails with ``problem`` (text with {value}, or a function of the value) and ``fix``."""

    def validate(value):
        if not check(value):
            raise rule_error(problem(value) if callable(problem) else problem.format(value=value), fix.format(value=value))
        return value

    return AfterValidator(validate)


# --- How the CLI's config strings decode (every value arrives as a string; structured ones as JSON).


def _integer(raw: Any) -> Any:
    return int(raw) if isinstance(raw, str) and re.fullmatch(r"-?\d{1,12}", raw.strip()) else raw


def _boolean(raw: Any) -> Any:
    # Exactly the strings the Python SDK's Config.get_bool reads (sdk/python/lib/pulumi/config.py, _get_bool).
    return {"true": True, "True": True, "false": False, "False": False}.get(raw, raw) if isinstance(raw, str) else raw


def _structured(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise rule_error("not valid structured data", "write a YAML list or mapping") from None


Integer = Annotated[StrictInt, BeforeValidator(_integer)]
Boolean = Annotated[StrictBool, BeforeValidator(_boolean)]  # a top-level key: the CLI hands every value as a string
JsonBoolean = StrictBool  # inside a list or mapping, which arrives as JSON: true or false, never a string
Number = StrictFloat  # strict: no strings or booleans; whole numbers are accepted
Structured = BeforeValidator(_structured)


def between(low: int, high: int, fix: str) -> Any:
    return Annotated[Integer, rule(lambda v: low <= v <= high, f"{{value}} is outside {low}..{high}", fix)]


def one_of(choices: tuple, fix: str = "", *, what: str = "") -> Any:
    """A string from ``choices``; the error calls it ``what`` (e.g. "a Trainium type in the catalog") if given."""
    listed = ", ".join(map(str, choices))
    problem = f"'{{value}}' is not {what}" if what else "'{value}' is not one of " + listed
    return Annotated[StrictStr, rule(lambda v: v in choices, problem, fix or f"use one of {listed}")]


def dns_label(max_length: int = 63, fix: str = "use lowercase letters, digits and '-'") -> Any:
    return Annotated[
        StrictStr,
        rule(
            lambda v: bool(DNS_LABEL.match(v)) and len(v) <= max_length,
            f"'{{value}}' is not a DNS label of up to {max_length} characters",
            fix,
        ),
    ]


def _tag_value(value: str) -> bool:
    # "letters, numbers, and spaces representable in UTF-8": a space, not a tab, newline or other control character
    return len(value) <= TAG_VALUE_MAX and all(c.isalnum() or c == " " or c in TAG_PUNCTUATION for c in value)


TagValue = Annotated[
    StrictStr,
    rule(lambda v: bool(v.strip()), "empty", "set the team's value"),
    rule(_tag_value, "'{value}' is not a valid AWS tag value", "use up to 256 letters, digits, spaces and _.:/=+-@"),
]


def _label_key(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return bool(LABEL_NAME.match(name)) and (not prefix or (len(prefix) <= 253 and bool(DNS_SUBDOMAIN.match(prefix))))


LabelKey = Annotated[
    StrictStr,
    rule(_label_key, "'{value}' is not a Kubernetes label key", "use [prefix/]name, name up to 63 of A-Z a-z 0-9 -_."),
    rule(
        lambda k: not k.startswith("trainium-eks/"), "uses the platform's reserved prefix", "pick a label outside trainium-eks/"
    ),
]
LabelValue = Annotated[
    StrictStr,
    rule(
        lambda v: v == "" or bool(LABEL_NAME.match(v)),
        "'{value}' is not a Kubernetes label value",
        "use up to 63 of A-Z a-z 0-9 -_.",
    ),
]


def _network(value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(value)
    except ValueError:
        return None


def _reaches_a_public_endpoint(value: str) -> bool:
    network = _network(value)
    if network is None:
        return True  # a malformed CIDR is reported by the CIDR rule
    return not any(network.version == r.version and network.subnet_of(r) for r in UNROUTED_RANGES)


PublicCidr = Annotated[
    StrictStr,
    rule(lambda v: _network(v) is not None, "'{value}' is not a CIDR", "use a CIDR such as 203.0.113.0/24"),
    rule(
        _reaches_a_public_endpoint,
        "'{value}' is a private, shared, loopback or link-local range",
        "list the public ranges your clients reach the API from",
    ),
]


def _vpc_network(value: str) -> bool:
    network = _network(value)
    return isinstance(network, ipaddress.IPv4Network)


VpcCidr = Annotated[
    StrictStr,
    rule(_vpc_network, "'{value}' is not an IPv4 network", "use a CIDR such as 10.0.0.0/16"),  # strict: no host bits
    rule(
        lambda v: 16 <= ipaddress.IPv4Network(v).prefixlen <= 20,
        lambda v: f"/{ipaddress.IPv4Network(v).prefixlen} is outside /16../20",
        "pick a prefix between /16 and /20",
    ),
    rule(
        lambda v: any(ipaddress.IPv4Network(v).subnet_of(r) for r in PRIVATE_RANGES),
        "'{value}' is outside the private ranges",
        "use a range inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16 (RFC 1918)",
    ),
]


def matching(pattern: re.Pattern, problem: str, fix: str) -> Any:
    return Annotated[StrictStr, rule(lambda v: bool(pattern.match(v)), problem, fix)]


def matching_or_empty(pattern: re.Pattern, problem: str, fix: str) -> Any:
    """A string that is empty (the key is off) or matches ``pattern``."""
    return Annotated[StrictStr, rule(lambda v: v == "" or bool(pattern.match(v)), problem, fix)]


S3Url = Annotated[
    StrictStr,
    rule(lambda v: v == "" or bool(S3_URL.match(v)), "'{value}' is not an S3 URL", "use s3://bucket/prefix"),
]
