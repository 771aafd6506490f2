"""Evaluate the program for one stack offline and record the resource graph the engine would see.

The program (``__main__.py``) runs unchanged under the Python SDK's mocks. A recording monitor captures every
registration as the engine receives it: URN (in the engine's format), type, parent, provider, options,
dependencies, property dependencies, the input paths whose changes it ignores (``ignoreChanges``) and the wire
inputs (camelCase keys, numbers as floats). Secrets print as ``[secret]``, unknowns (preview) as ``[unknown]``,
resource references as the engine marshals them for analyzers (a custom resource as its ID, a component as its URN).
"""

from __future__ import annotations

import gc
import importlib
import importlib.metadata
import runpy
import threading
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import json_format

from preflight import planfile
from preflight.mocks import PlatformMocks
from preflight.stackfile import REPO_ROOT, StackSettings
from trainium_eks import config as platform_config
from trainium_eks import sdk_internals as sdk
from trainium_eks import tokens

MAIN = REPO_ROOT / "__main__.py"
# Provider SDK modules the program uses. They load lazily and take most of a first evaluation (~1.5 s); a
# batch imports them once before forking its workers. A module missing here only makes a batch slower
# (tests/test_preflight.py lists what an evaluation still imports).
PROVIDER_MODULES = (
    "pulumi_aws.cloudwatch",
    "pulumi_aws.codebuild",
    "pulumi_aws.ec2",
    "pulumi_aws.ecr",
    "pulumi_aws.eks",
    "pulumi_aws.fsx",
    "pulumi_aws.iam",
    "pulumi_aws.kms",
    "pulumi_aws.sqs",
    "pulumi_aws.ssm",
    "pulumi_aws.vpc",
    "pulumi_kubernetes.admissionregistration.v1",
    "pulumi_kubernetes.apiextensions",
    "pulumi_kubernetes.apps.v1",
    "pulumi_kubernetes.batch.v1",
    "pulumi_kubernetes.core.v1",
    "pulumi_kubernetes.helm.v3",
    "pulumi_kubernetes.meta.v1",
    "pulumi_kubernetes.networking.v1",
    "pulumi_kubernetes.policy.v1",
    "pulumi_kubernetes.rbac.v1",
    "pulumi_kubernetes.storage.v1",
    "pulumi_eks",
)
SECRET = "[secret]"
UNKNOWN = "[unknown]"
STACK_TYPE = tokens.PULUMI_STACK


@dataclass
class Plan:
    project: str
    stack: str
    preview: bool
    resources: list[planfile.PlannedResource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        """The plan as the plan file carries it, without the annotations (``preflight.analysis.annotate``)."""
        return planfile.PlanFile.record(
            project=self.project, stack=self.stack, resources=tuple(self.resources), outputs=self.outputs
        ).to_plan()

    def find(self, type_: str, name: str | None = None) -> list[planfile.PlannedResource]:
        """Resources of ``type_`` (and ``name``), for tests and reports."""
        return [r for r in self.resources if r.type == type_ and (name is None or r.name == name)]


def wire_value(value: Any, components: set[str]) -> Any:
    """A deserialised protobuf value in the form an analyzer receives it."""
    if isinstance(value, dict):
        signature = value.get(sdk.SIGNATURE_KEY)
        if signature == sdk.SECRET_SIGNATURE:
            return SECRET
        if signature == sdk.RESOURCE_SIGNATURE:
            urn = value.get("urn", "")
            return urn if urn in components or not value.get("id") else value["id"]
        return {k: wire_value(v, components) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [wire_value(v, components) for v in value]
    if value == sdk.UNKNOWN or isinstance(value, pulumi.output.Unknown):
        return UNKNOWN
    return value


class RecordingMonitor(sdk.MockMonitor):
    """A mock resource monitor that keeps what the engine would know about each registration."""

    def __init__(self, mocks: PlatformMocks, project: str, stack: str):
        super().__init__(mocks)
        mocks.monitor = self
        self.project, self.stack = project, stack
        # Each registration's planfile.PlannedResource fields, its inputs still as deserialised from the wire.
        self.records: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        # The engine does not qualify the types of resources whose parent is the stack.
        if parent and parent.split("::")[2] == STACK_TYPE:
            parent = ""
        return super().make_urn(parent, type_, name)

    def add(self, **fields: Any) -> None:
        """Keep a registration's fields; those it does not give at the engine's defaults."""
        registration = {"retain_on_delete": False, "dependencies": (), "property_dependencies": {}, "ignore_changes": ()}
        registration.update(fields)
        with self._lock:
            self.records[fields["urn"]] = registration

    def _record(self, request, urn: str, custom: bool, provider: str | None) -> None:
        properties = request.object if isinstance(request, sdk.resource_pb2.RegisterResourceRequest) else request.properties
        self.add(
            urn=urn,
            type=request.type,
            name=request.name,
            custom=custom,
            parent=request.parent or None,
            provider=provider,
            protect=bool(getattr(request, "protect", False)),
            retain_on_delete=bool(getattr(request, "retainOnDelete", False)),
            dependencies=tuple(sorted(set(getattr(request, "dependencies", [])))),
            property_dependencies={
                prop: tuple(sorted(set(deps.urns))) for prop, deps in sorted(getattr(request, "propertyDependencies", {}).items())
            },
            inputs=json_format.MessageToDict(properties),
            ignore_changes=tuple(getattr(request, "ignoreChanges", [])),
        )

    def record_remote_child(self, urn: str, type_: str, name: str, parent: str, inputs: dict) -> None:
        """Record a resource a remote component's provider creates (mocks never run that provider)."""
        provider = self.default_provider(type_.split(":")[0])
        protect = self.records[parent]["protect"]  # children inherit protect
        self.add(urn=urn, type=type_, name=name, custom=True, parent=parent, provider=provider, protect=protect, inputs=inputs)

    def default_provider(self, package: str) -> str:
        version = importlib.metadata.version(f"pulumi_{package}").replace(".", "_")
        return f"urn:pulumi:{self.stack}::{self.project}::pulumi:providers:{package}::default_{version}"

    def _provider_urn(self, request, custom: bool) -> str | None:
        if request.provider:
            return request.provider.rsplit("::", 1)[0]
        if not (custom or getattr(request, "remote", False)) or request.type.startswith("pulumi:providers:"):
            return None
        return self.default_provider(request.type.split(":")[0])

    def RegisterResource(self, request):
        urn = self.make_urn(request.parent, request.type, request.name)
        custom = bool(request.custom)
        self.mocks.request.urn = urn  # new_resource runs on this thread and may need its own URN
        self._record(request, urn, custom, self._provider_urn(request, custom))
        return super().RegisterResource(request)

    def ReadResource(self, request):
        urn = self.make_urn(request.parent, request.type, request.name)
        self._record(request, urn, True, self._provider_urn(request, True))
        return super().ReadResource(request)

    def record_default_providers(self, config: dict[str, str]) -> None:
        """The engine registers a default provider per package, configured from the stack's ``<package>:*`` keys."""
        for urn in sorted({r["provider"] for r in self.records.values() if r["provider"]} - set(self.records)):
            package = urn.rsplit("::", 2)[1].rsplit(":", 1)[1]
            inputs = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith(f"{package}:")}
            inputs["version"] = importlib.metadata.version(f"pulumi_{package}")
            name = urn.rsplit("::", 1)[1]
            provider_type = f"pulumi:providers:{package}"
            self.add(
                urn=urn, type=provider_type, name=name, custom=True, parent=None, provider=None, protect=False, inputs=inputs
            )

    def plan_resources(self) -> tuple[list[planfile.PlannedResource], set[str]]:
        """The recorded resources with inputs in analyzer form, sorted by URN; and the component URNs."""
        components = {urn for urn, r in self.records.items() if not r["custom"]}
        resources = [
            planfile.PlannedResource.record(**{**r, "inputs": wire_value(r["inputs"], components)}) for r in self.records.values()
        ]
        return sorted(resources, key=lambda r: r.urn), components


def preload() -> None:
    """Import the program's modules and the provider SDK modules it uses, without running anything."""
    importlib.import_module("components.platform")
    for name in PROVIDER_MODULES:
        # The SDKs' lazy modules load on the first attribute lookup that is not already set.
        hasattr(importlib.import_module(name), "_preflight_preload")


def evaluate(stack: StackSettings, *, preview: bool = False, mocks_factory=PlatformMocks) -> Plan:
    """Run the program for ``stack`` under mocks and return its resource graph and outputs.

    Raises ``ConfigError`` (bad config) and other ``pulumi.RunError`` (a deploy-time check failed).
    """
    parsed = platform_config.parse(stack.config, stack=stack.stack)  # fail fast, before any registration
    mocks = mocks_factory(parsed, preview)
    monitor = RecordingMonitor(mocks, stack.project, stack.stack)
    sdk.reset_root_resource()
    pulumi.runtime.set_mocks(mocks, project=stack.project, stack=stack.stack, preview=preview, monitor=monitor)
    pulumi.runtime.set_all_config(dict(stack.config), list(stack.secret_keys))

    @pulumi.runtime.test
    def run_program():
        runpy.run_path(str(MAIN), run_name="__main__")

    try:
        run_program()
    finally:
        # Finalise the SDK's leftover futures and event loops now: left to the collector, their finalisers can
        # run while CPython 3.11 compiles a module and trip "AST constructor recursion depth mismatch".
        gc.collect()
    serialized = sdk.stack_outputs()
    monitor.record_default_providers(stack.config)
    resources, components = monitor.plan_resources()
    outputs = wire_value(json_format.MessageToDict(serialized), components)
    return Plan(stack.project, stack.stack, preview, resources, outputs)
