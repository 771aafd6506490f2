"""Run the policy packs over a plan the way the Pulumi engine runs analyzers.

Each pack is served in-process by the policy SDK's own analyzer servicer (the object ``PolicyPack`` exposes
over gRPC), configured as the CLI configures it: schema defaults, then the stack's
``policies/config/<stack>.json`` (``--policy-pack-config``), validated against each policy's schema. Then, as
the engine does, every resource is remediated (policies at level ``remediate``), analysed with its inputs
and provider, and finally the whole stack is analysed with parents, dependencies and property dependencies.
Values unknown in a preview reach the policies as the engine's unknown sentinels.

Differences from a real preview: stack policies see inputs (the engine gives them outputs, which equal the
inputs plus computed values), and the children of remote components and Helm charts are not in the graph.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from google.protobuf import json_format, struct_pb2
from pulumi_policy import EnforcementLevel

from plan_graph.graph import UNKNOWN as UNKNOWN_SENTINEL
from policies.packs import PACKS, Pack
from preflight import planfile, stackfile
from preflight.engine import UNKNOWN
from trainium_eks.sdk_internals import PolicyAnalyzerServicer, analyzer_pb2, shared_property_decoding

CONFIG_DIR = stackfile.policy_config_directory()  # policies/config
LEVELS = {
    analyzer_pb2.ADVISORY: "advisory",
    analyzer_pb2.MANDATORY: "mandatory",
    analyzer_pb2.DISABLED: "disabled",
    analyzer_pb2.REMEDIATE: "remediate",
}
PROTO_LEVELS = {name: value for value, name in LEVELS.items()}


class PolicyConfigError(Exception):
    """A policy config file that the CLI would reject; the message is one line."""


@dataclass(frozen=True)
class Finding:
    pack: str
    policy: str
    enforcement_level: str
    urn: str
    message: str

    def to_json(self) -> dict:
        return {
            "pack": self.pack,
            "policy": self.policy,
            "enforcementLevel": self.enforcement_level,
            "urn": self.urn,
            "message": self.message,
        }


@dataclass
class CheckResult:
    violations: list[Finding] = field(default_factory=list)
    remediations: list[Finding] = field(default_factory=list)

    @property
    def mandatory(self) -> list[Finding]:
        return [v for v in self.violations if v.enforcement_level == "mandatory"]


def load_policy_config(stack: str, path: Path | None = None) -> dict:
    """The stack's ``--policy-pack-config`` file. Every stack has one (``{}`` keeps every policy at its defaults): CI
    passes it to ``pulumi preview``, which stops on a missing file, and a misspelt policy name in it is refused, as the
    policy it meant would run at its default level unnoticed."""
    path = CONFIG_DIR / f"{stackfile.check_stack_name(stack)}.json" if path is None else path
    if not path.exists():
        raise PolicyConfigError(f"{path}: not found; add it, with {{}} to keep every policy at its defaults")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise PolicyConfigError(f"{path}: invalid JSON at line {error.lineno}; fix it there") from None
    except (OSError, UnicodeDecodeError, RecursionError) as error:
        reason = type(error).__name__ if isinstance(error, RecursionError) else error
        raise PolicyConfigError(f"{path}: not a readable JSON file ({reason}); fix or remove it") from None
    if not isinstance(config, dict):
        raise PolicyConfigError(f"{path}: expected an object of policy names")
    known = {policy.name for pack in PACKS for policy in pack.policies}
    for name in config:
        if name != "all" and name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean '{close[0]}'?" if close else "name a policy of docs/policies.md, or 'all'"
            raise PolicyConfigError(f"{path}: '{name}' is no policy of the packs; {hint}")
    return config


def reconcile(pack: Pack, config: dict, source: str) -> dict[str, tuple[str, dict]]:
    """What the CLI sends the pack: (enforcement level, properties) per policy, defaults filled in and validated."""
    result = {}
    for policy in pack.policies:
        schema = policy.config_schema.properties if policy.config_schema else {}
        level = (policy.enforcement_level or pack.enforcement_level).value
        result[policy.name] = (level, {k: v["default"] for k, v in schema.items() if "default" in v})
    levels = {level.value for level in EnforcementLevel}
    for name, given in config.items():
        if isinstance(given, str):
            given = {"enforcementLevel": given}
        if not isinstance(given, dict):
            raise PolicyConfigError(f"{source}: {name}: must be an enforcement level or an object")
        given = dict(given)
        level = given.pop("enforcementLevel", None)
        if level is not None and level not in levels:
            raise PolicyConfigError(f"{source}: {name}: '{level}' is not an enforcement level ({', '.join(sorted(levels))})")
        if name == "all":
            result = {k: (v[0] if level is None else level, v[1]) for k, v in result.items()}
        elif name in result:
            current_level, properties = result[name]
            result[name] = (current_level if level is None else level, {**properties, **given})
    for policy in pack.policies:
        if policy.config_schema:
            schema = {"type": "object", "properties": policy.config_schema.properties, "additionalProperties": False}
            try:
                jsonschema.validate(result[policy.name][1], schema)
            except jsonschema.ValidationError as error:
                where = ".".join(map(str, error.path)) or "config"
                raise PolicyConfigError(f"{source}: {policy.name}.{where}: {error.message}") from None
    return result


def _wire(value: Any) -> Any:
    """Plan values back to what the engine sends: "[unknown]" becomes the unknown sentinel."""
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return UNKNOWN_SENTINEL if value == UNKNOWN else value


def _struct(props: dict) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(_wire(props))
    return struct


class PackRun:
    """One pack's analyzer, configured for a stack."""

    def __init__(self, pack: Pack, config: dict[str, tuple[str, dict]]):
        self.pack = pack
        self.servicer = PolicyAnalyzerServicer(pack.name, pack.version, list(pack.policies), pack.enforcement_level)
        policy_config = {}
        for name, (level, properties) in config.items():
            struct = struct_pb2.Struct()
            struct.update(properties)
            policy_config[name] = analyzer_pb2.PolicyConfig(enforcementLevel=PROTO_LEVELS[level], properties=struct)
        self.servicer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig=policy_config), None)
        self.remediating = any(level == "remediate" for level, _ in config.values())

    def _finding(self, diagnostic, urn: str) -> Finding:
        message = diagnostic.message
        if message.startswith(diagnostic.description + "\n"):
            message = message[len(diagnostic.description) + 1 :]
        return Finding(self.pack.name, diagnostic.policyName, LEVELS[diagnostic.enforcementLevel], diagnostic.urn or urn, message)

    def remediate(self, request: analyzer_pb2.AnalyzeRequest, result: CheckResult) -> dict | None:
        if not self.remediating:
            return None
        response = self.servicer.Remediate(request, None)
        props = None
        for remediation in response.remediations:
            if remediation.HasField("properties"):
                props = json_format.MessageToDict(remediation.properties)
                result.remediations.append(
                    Finding(self.pack.name, remediation.policyName, "remediate", request.urn, remediation.description)
                )
        return props

    def analyze(self, request: analyzer_pb2.AnalyzeRequest, result: CheckResult) -> None:
        for diagnostic in self.servicer.Analyze(request, None).diagnostics:
            result.violations.append(self._finding(diagnostic, request.urn))

    def analyze_stack(self, resources: list[analyzer_pb2.AnalyzerResource], result: CheckResult) -> None:
        response = self.servicer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources), None)
        for diagnostic in response.diagnostics:
            result.violations.append(self._finding(diagnostic, ""))


def _provider(resource: dict, by_urn: dict[str, dict]) -> analyzer_pb2.AnalyzerProviderResource | None:
    provider = by_urn.get(resource.get("provider") or "")
    if provider is None:
        return None
    return analyzer_pb2.AnalyzerProviderResource(
        type=provider["type"], properties=_struct(provider["inputs"]), urn=provider["urn"], name=provider["name"]
    )


def check_plan(plan: dict, policy_config: dict, source: str) -> CheckResult:
    """Run every pack over ``plan`` (the ``preflight plan --json`` object) with the stack's policy config."""
    runs = [PackRun(pack, reconcile(pack, policy_config, source)) for pack in PACKS]
    with shared_property_decoding():  # each resource decoded once for all policies, not once per policy
        result = CheckResult()
        by_urn = {r["urn"]: r for r in plan["resources"]}
        analyzed = []
        for resource in plan["resources"]:
            options = analyzer_pb2.AnalyzerResourceOptions(
                protect=bool(resource.get("protect")), parent=resource.get("parent") or ""
            )
            provider = _provider(resource, by_urn)

            def request_for(inputs: dict, resource=resource, options=options, provider=provider) -> analyzer_pb2.AnalyzeRequest:
                return analyzer_pb2.AnalyzeRequest(
                    type=resource["type"],
                    properties=_struct(inputs),
                    urn=resource["urn"],
                    name=resource["name"],
                    options=options,
                    provider=provider,
                )

            inputs = resource["inputs"]
            for run in runs:  # remediations run first and feed what is analysed, as in the engine
                inputs = run.remediate(request_for(inputs), result) or inputs
            request = request_for(inputs)
            for run in runs:
                run.analyze(request, result)
            analyzed.append(
                analyzer_pb2.AnalyzerResource(
                    type=resource["type"],
                    properties=request.properties,
                    urn=resource["urn"],
                    name=resource["name"],
                    options=options,
                    provider=request.provider if request.HasField("provider") else None,
                    parent=resource.get("parent") or "",
                    dependencies=resource.get("dependencies", []),
                    propertyDependencies={
                        prop: analyzer_pb2.AnalyzerPropertyDependencies(urns=urns)
                        for prop, urns in resource.get("propertyDependencies", {}).items()
                    },
                )
            )
        for run in runs:
            run.analyze_stack(analyzed, result)
    result.violations.sort(key=lambda f: (f.pack, f.urn, f.policy, f.message))
    return result


def check_plan_file(path: Path, stack: str | None = None) -> tuple[dict, CheckResult]:
    """Check a saved plan (``preflight plan --json`` output) with the policy config of the stack it records; ``stack``,
    if given, must be that stack: another stack's policy config would judge this plan by limits set for another."""
    plan = planfile.read(path).to_plan()
    if stack is not None and stackfile.check_stack_name(stack) != plan["stack"]:
        raise planfile.PlanFileError(
            f"{path}: a plan of stack '{plan['stack']}', not '{stack}'; check it as {plan['stack']} (leave STACK out), "
            f"or check {stack}'s own plan"
        )
    return plan, check_plan(plan, load_policy_config(plan["stack"]), f"policies/config/{plan['stack']}.json")
