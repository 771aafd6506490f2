"""Adapters from the pure rules in ``policies/rules`` to pulumi_policy policies.

A resource policy receives one resource's inputs, a stack policy the whole graph with parents, dependencies
and property dependencies. The adapters turn the SDK's unknown-checking proxies into plain dicts in which
unknown values are the engine's sentinels, so a rule judges what is known instead of failing on what is not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    PolicyConfigSchema,
    ResourceValidationPolicy,
    Severity,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from plan_graph.graph import Graph, Node
from policies.rules import Violation
from trainium_eks import sdk_internals

ResourceRule = Callable[[Node, dict], Iterable[Violation]]
StackRule = Callable[[Graph, dict], Iterable[Violation]]


SCALARS = (str, int, float, bool, type(None))


def plain(value: Any) -> Any:
    """A policy SDK proxy as plain dicts and lists, in which each unknown value is its sentinel."""
    if type(value) in SCALARS:
        return value
    value = sdk_internals.proxy_target(value)  # the unknown-checking proxies, read without an exception per unknown
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, Mapping):  # the SDK's other wrappers (a remediation's secrets proxy), read item by item
        return {key: _read(value, key) for key in value}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_read(value, index) for index in range(len(value))]
    return value


def _read(container: Any, key: Any) -> Any:
    try:
        return plain(container[key])
    except UnknownValueError as unknown:
        return unknown.unknown_type_sentinel


def _node(resource) -> Node:
    provider = getattr(resource, "provider", None)
    return Node(
        urn=resource.urn,
        type=resource.resource_type,
        name=resource.name,
        props=plain(resource.props),
        protect=bool(getattr(resource.opts, "protect", False)),
        provider_props=plain(provider.props) if provider is not None else {},
    )


def graph_of(resources) -> Graph:
    """The stack policy's ``PolicyResource`` list as a plain graph."""
    nodes = {id(r): _node(r) for r in resources}
    for resource in resources:
        node = nodes[id(resource)]
        node.parent = nodes.get(id(resource.parent)) if resource.parent is not None else None
        node.dependencies = [nodes[id(d)] for d in resource.dependencies if id(d) in nodes]
        node.property_dependencies = {
            prop: [nodes[id(d)] for d in deps if id(d) in nodes] for prop, deps in resource.property_dependencies.items()
        }
    return Graph(nodes.values())


def _schema(properties: dict | None) -> PolicyConfigSchema | None:
    return PolicyConfigSchema(properties=properties) if properties else None


def resource_policy(
    name: str,
    description: str,
    severity: Severity,
    rule: ResourceRule,
    types: Sequence[str],
    *,
    config: dict | None = None,
    remediation: Callable[[Node, dict], dict | None] | None = None,
) -> ResourceValidationPolicy:
    def validate(args, report_violation):
        if args.resource_type in types:
            for violation in rule(_node(args), dict(args.get_config())):
                report_violation(violation.message, None)

    def remediate(args):
        if args.resource_type in types:
            return remediation(_node(args), dict(args.get_config()))
        return None

    return ResourceValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        remediate=remediate if remediation else None,
        config_schema=_schema(config),
        severity=severity,
    )


def stack_policy(
    name: str, description: str, severity: Severity, rule: StackRule, *, config: dict | None = None
) -> StackValidationPolicy:
    def validate(args, report_violation):
        for violation in rule(graph_of(args.resources), dict(args.get_config())):
            report_violation(violation.message, violation.urn)

    return StackValidationPolicy(
        name=name, description=description, validate=validate, config_schema=_schema(config), severity=severity
    )
