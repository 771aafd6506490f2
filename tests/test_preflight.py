"""The offline engine's command line: `python -m preflight plan`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from support import FIXTURE_STACKS, STACKS, run_preflight

from preflight import engine, stackfile
from preflight.stackfile import REPO_ROOT

pytestmark = pytest.mark.stacks

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
    "ignoreChanges",
}


def test_plan_json_has_the_engine_shape():
    result = run_preflight("plan", "staging", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert set(plan) == {
        "project",
        "stack",
        "resources",
        "outputs",
        "capacityBlockDrains",
        "cost",
        "deployment",
        "firstStep",
        "systemFit",
        "teamJobs",
        "trainiumNodes",
    }
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
    shutil.copy(stackfile.stack_directory() / "Pulumi.staging.yaml", copy)
    result = run_preflight("plan", "staging", "--stack-file", str(copy), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stack"] == "staging"


def test_check_all_passes():
    result = run_preflight("check", "--all")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("Result: 0 mandatory") == len(STACKS)


def test_check_of_a_mutated_graph_exits_1_naming_the_policy(tmp_path, monkeypatch):
    # The fixture staging stack and its policy config (an elastic pool of EFA nodes, and teams), whatever stacks/ holds.
    monkeypatch.setenv(stackfile.STACK_DIR_VARIABLE, str(FIXTURE_STACKS))
    plan = json.loads(run_preflight("plan", "staging", "--json").stdout)
    template = next(r for r in plan["resources"] if r["type"] == "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    template["inputs"]["spec"]["networkInterfaces"] = template["inputs"]["spec"]["networkInterfaces"][:4]
    graph = tmp_path / "plan.json"
    graph.write_text(json.dumps(plan))
    result = run_preflight("check", "--graph", str(graph), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    # Four interfaces instead of nine on staging's elastic pool: the layout rule fires on its EC2NodeClass, and the
    # queue and the teams' quotas, sized for eight EFA interfaces per node, now ask for more than the nodes provide.
    by_policy = {v["policy"]: v for v in report["violations"]}
    assert set(by_policy) == {
        "trainium-efa-interface-per-network-card",
        "volcano-queue-within-capacity",
        "team-quotas-within-capacity",
    }
    assert by_policy["trainium-efa-interface-per-network-card"]["urn"] == template["urn"]
    assert all(v["enforcementLevel"] == "mandatory" for v in report["violations"])


def test_check_of_a_saved_plan_equals_check_of_the_stack(tmp_path):
    graph = tmp_path / "plan.json"
    graph.write_text(run_preflight("plan", "dev", "--json").stdout)
    from_file = run_preflight("check", "--graph", str(graph), "--json")
    from_stack = run_preflight("check", "dev", "--json")
    assert from_file.returncode == from_stack.returncode == 0, from_file.stderr + from_stack.stderr
    assert from_file.stdout == from_stack.stdout


def test_check_usage_errors_exit_2():
    for args in (["check"], ["check", "dev", "--all"], ["check", "dev", "prod", "--stack-file", "x.yaml"]):
        result = run_preflight(*args)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)


def test_make_plan_json_writes_the_plan_alone():
    result = subprocess.run(
        ["make", "--no-print-directory", "plan-json", "STACK=dev"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stack"] == "dev"  # `make plan-json > plan.json` is a plan file


def test_diff_of_a_stack_without_a_file_names_the_way_out():
    result = run_preflight("diff", "nosuch", "--against", "HEAD")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "Pulumi.nosuch.yaml" in result.stderr and "--stack-file" in result.stderr


def test_a_batch_preloads_every_provider_package_the_program_uses():
    # In a fresh interpreter (the test session has imported everything already): what the first evaluation still
    # imports after engine.preload() is imported again by every forked worker of `check --all`.
    probe = (
        "import sys\n"
        "from preflight import engine, stackfile\n"
        "engine.preload()\n"
        "before = set(sys.modules)\n"
        "for stack in stackfile.stack_names():\n"
        "    engine.evaluate(stackfile.load(stack))\n"
        "print('\\n'.join(sorted(set(sys.modules) - before)))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    preloaded = {".".join(name.split(".")[:2]) for name in engine.PROVIDER_MODULES}
    packages = {
        ".".join(name.split(".")[:2]) for name in result.stdout.split() if name.startswith(("pulumi_aws", "pulumi_kubernetes"))
    }
    assert packages <= preloaded, f"add to engine.PROVIDER_MODULES: {sorted(packages - preloaded)}"
