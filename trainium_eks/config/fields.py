"""Field types of the stack configuration: how the CLI's strings decode, and the naming and address rules of
AWS and Kubernetes that a value must follow. Each failed rule reads ``<problem>; <fix>``.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, GetJsonSchemaHandler, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic_core import PydanticCustomError

from trainium_eks.config.errors import RULE_ERROR
from trainium_eks.names import (  # noqa: F401 (re-exported: the stack model reads them as fields.<NAME>)
    CONNECTION_ARN,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    ECR_NAME,
    GITHUB_REPOSITORY,
    LABEL_NAME,
    PRINCIPAL_ARN,
    RESERVATION_ID,
    S3_URL,
    SNS_TOPIC_ARN,
    SUBNET_ID,
    VPC_ID,
)

# The naming rules (whole-string, ASCII patterns) live in trainium_eks.names, shared with the output contract.
# AWS tag values: up to 256 Unicode letters, digits, spaces and _.:/=+-@ (AWS "Tagging AWS resources" guide).
TAG_VALUE_MAX = 256
TAG_PUNCTUATION = set("_.:/=+-@")
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
    return int(raw) if isinstance(raw, str) and re.fullmatch(r"-?[0-9]{1,12}", raw.strip()) else raw


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


@dataclass(frozen=True, eq=False)
class Shown:
    """JSON-schema keywords (``minimum``, ``enum``, ...) stating what a rule enforces, for the generated docs
    (``make docs``); validation stays the rule's, whose message names the key and the fix."""

    keywords: dict[str, Any]

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        return {**handler(core_schema), **self.keywords}


def between(low: int, high: int, fix: str) -> Any:
    return Annotated[
        Integer,
        rule(lambda v: low <= v <= high, f"{{value}} is outside {low}..{high}", fix),
        Shown({"minimum": low, "maximum": high}),
    ]


def one_of(choices: tuple, fix: str = "", *, what: str = "") -> Any:
    """A string from ``choices``; the error calls it ``what`` (e.g. "a Trainium type in the catalog") if given."""
    listed = ", ".join(map(str, choices))
    problem = f"'{{value}}' is not {what}" if what else "'{value}' is not one of " + listed
    return Annotated[
        StrictStr, rule(lambda v: v in choices, problem, fix or f"use one of {listed}"), Shown({"enum": list(choices)})
    ]


def dns_label(max_length: int = 63, fix: str = "use lowercase letters, digits and '-'") -> Any:
    return Annotated[
        StrictStr,
        rule(
            lambda v: bool(DNS_LABEL.match(v)) and len(v) <= max_length,
            f"'{{value}}' is not a DNS label of up to {max_length} characters",
            fix,
        ),
        Shown({"maxLength": max_length}),
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
