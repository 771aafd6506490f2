"""Test helpers: evaluate a stack (optionally with config overrides) through the same engine `preflight` uses,
run the preflight CLI, and pick resources out of a plan."""

from __future__ import annotations

import dataclasses
import functools
import subprocess
import sys
from typing import Any

import yaml

from preflight import engine, stackfile

PROJECT = "trainium-eks"
STACKS = ("dev", "staging", "prod")


def settings(stack: str, **overrides: Any) -> stackfile.StackSettings:
    """The stack's settings with project keys overridden (``None`` drops a key from the map the CLI would pass)."""
    base = stackfile.load(stack)
    config = dict(base.config)
    for key, value in overrides.items():
        full_key = key if ":" in key else f"{PROJECT}:{key}"
        if value is None:
            config.pop(full_key, None)
        else:
            config[full_key] = stackfile.cli_string(value)
    return dataclasses.replace(base, config=config)


def evaluate(stack: str, *, preview: bool = False, mocks_factory=None, **overrides: Any) -> engine.Plan:
    kwargs = {"mocks_factory": mocks_factory} if mocks_factory else {}
    return engine.evaluate(settings(stack, **overrides), preview=preview, **kwargs)


@functools.cache
def cached_plan(stack: str, preview: bool) -> engine.Plan:
    return evaluate(stack, preview=preview)


def kubernetes_objects(plan: engine.Plan) -> list[engine.Resource]:
    """The plan's Kubernetes objects (Helm releases are charts, not objects)."""
    return [r for r in plan.resources if r.type.startswith("kubernetes:") and not r.type.startswith("kubernetes:helm.sh")]


def manifest(resource: engine.Resource) -> dict:
    """The object sent to the API server: a Kubernetes resource's wire inputs, whose numbers the engine carries
    as floats and the provider sends whole ones as integers (``runAsUser: 10001``, not ``10001.0``)."""
    return _as_sent(resource.inputs)


def _as_sent(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _as_sent(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_sent(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def node_group_config(name: str, instance_type: str, size: int = 2, **extra: Any) -> dict:
    return {"name": name, "instanceType": instance_type, "minSize": size, "desiredSize": size, "maxSize": size, **extra}


def one(resources: list[engine.Resource]) -> engine.Resource:
    assert len(resources) == 1, [r.urn for r in resources]
    return resources[0]


def by_urn(plan: engine.Plan) -> dict[str, engine.Resource]:
    return {r.urn: r for r in plan.resources}


def stack_copy(tmp_path, stack: str, edit) -> str:
    """A copy of the shipped stack file with ``edit`` applied to its config, as a path for ``--against``."""
    document = yaml.safe_load((stackfile.REPO_ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    edit(document["config"])
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def run_preflight(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "preflight", *args], cwd=stackfile.REPO_ROOT, capture_output=True, text=True, timeout=120
    )
