"""The offline engine's command line: `python -m preflight plan`."""

from __future__ import annotations

import json
import shutil

from test_config import run_preflight

RESOURCE_KEYS = {
    "urn",
    "type",
    "name",
    "custom",
    "parent",
    "provider",
    "protect",
    "retainOnDelete",
    "dependencies",
    "propertyDependencies",
    "inputs",
}


def test_plan_json_has_the_engine_shape():
    result = run_preflight("plan", "staging", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert set(plan) == {"project", "stack", "resources", "outputs"}
    assert (plan["project"], plan["stack"]) == ("trainium-eks", "staging")
    assert all(set(r) == RESOURCE_KEYS for r in plan["resources"])
    node_group = next(r for r in plan["resources"] if r["type"] == "aws:eks/nodeGroup:NodeGroup")
    assert isinstance(node_group["inputs"]["scalingConfig"]["desiredSize"], float)  # numbers travel as floats
    assert "scaling_config" not in node_group["inputs"]  # wire names, not Python names


def test_preview_prints_unknowns_and_secrets():
    result = run_preflight("plan", "prod", "--preview", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["outputs"]["clusterName"] == "[unknown]"
    assert plan["outputs"]["kubeconfig"] == "[secret]"


def test_tree_shows_nesting_and_a_summary():
    result = run_preflight("plan", "dev")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("pulumi:pulumi:Stack" in line and "trainium-eks-dev" in line for line in lines)
    assert any("└─ aws:eks/nodeGroup:NodeGroup" in line or "├─ aws:eks/nodeGroup:NodeGroup" in line for line in lines)
    assert any(line.strip().startswith("+") and "to create" in line for line in lines)


def test_stack_file_is_evaluated_as_the_named_stack(tmp_path):
    copy = tmp_path / "candidate.yaml"
    shutil.copy("stacks/Pulumi.staging.yaml", copy)
    result = run_preflight("plan", "staging", "--stack-file", str(copy), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stack"] == "staging"
