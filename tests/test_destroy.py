"""`preflight destroy`: the order `pulumi destroy` deletes a stack in, what it refuses and what remains, read offline
from the stack's plan. The stacks are the fixture stacks (tests/fixture_stacks), edited where a case needs it."""

from __future__ import annotations

import json

import pytest
from mutation_case import plan_of
from support import run_preflight

from policies.rules.cleanup import KARPENTER_CHART
from preflight import destroy
from trainium_eks import tokens
from trainium_eks.graph import Graph


def teardown(stack: str, **overrides) -> tuple[destroy.DestroyPlan, dict[str, int]]:
    plan = destroy.plan_destroy(plan_of(stack, **overrides)["resources"], stack)
    return plan, {destroy._label(n): i for i, step in enumerate(plan.steps) for n in step}


def step_of(steps: dict[str, int], type_: str, name_part: str = "") -> int:
    (index,) = [i for label, i in steps.items() if label.startswith(f"{type_} ") and label.endswith(name_part)]
    return index


def test_an_unprotected_stack_is_deleted_whole_and_nothing_remains():
    plan, _ = teardown("dev", protectStatefulResources=False)
    assert plan.refused == [] and plan.remains == []
    assert destroy.NOTHING_REMAINS in destroy.report(plan)


def test_every_resource_goes_after_all_that_depend_on_it():
    records = plan_of("dev")["resources"]
    graph = Graph.from_records(records)
    edges = destroy.dependencies(graph)
    plan, steps = teardown("dev")
    for node in graph:
        label = destroy._label(node)
        for dependency in edges[node]:
            if label in steps and destroy._label(dependency) in steps:
                assert steps[label] < steps[destroy._label(dependency)], (label, destroy._label(dependency))


def test_karpenter_and_the_volume_driver_outlive_what_they_clean_up():
    plan, steps = teardown("dev")
    release = step_of(steps, tokens.HELM_RELEASE, f"-{KARPENTER_CHART}-{KARPENTER_CHART}")
    assert step_of(steps, tokens.KARPENTER_NODE_POOL) < release and step_of(steps, tokens.KARPENTER_NODE_CLASS) < release
    assert release < step_of(steps, tokens.SQS_QUEUE) and release < step_of(steps, tokens.EKS_NODE_GROUP, "-system")
    assert plan.karpenter  # says what Karpenter removes while its controller runs
    # etcd's claims go with the StatefulSet while the EBS CSI controller still runs on the system nodes
    ebs_csi = step_of(steps, tokens.EKS_ADDON, "-ebs-csi")
    assert step_of(steps, tokens.K8S_STATEFUL_SET) < ebs_csi < step_of(steps, tokens.EKS_NODE_GROUP, "-system")
    # the control-plane logs stay until the cluster that writes them is gone
    assert step_of(steps, tokens.EKS_CLUSTER) < step_of(steps, tokens.CLOUDWATCH_LOG_GROUP, "-control-plane-logs")


def test_a_protected_stack_lists_what_stays_with_its_cost_and_the_final_backup():
    plan, steps = teardown("prod")
    records = plan_of("prod")["resources"]
    protected = {f"{r['type']} {r['name']}" for r in records if r["protect"] and r["custom"]}
    assert protected and {destroy._label(n) for n, _ in plan.refused} == protected
    assert not protected & set(steps)  # never in the deletion order
    remaining = {r.what: r for r in plan.remains}
    assert protected <= set(remaining)
    file_system = next(label for label in protected if label.startswith(tokens.FSX_LUSTRE_FILE_SYSTEM))
    assert remaining[file_system].monthly_usd > 0  # a sourced FSx price
    assert any(what.startswith("final FSx backup") for what in remaining)
    report = destroy.report(plan)
    assert "--exclude-protected" in report and destroy.NOTHING_REMAINS not in report


def test_a_persistent_file_system_deleted_by_the_destroy_leaves_its_final_backup():
    plan, _ = teardown("prod", protectStatefulResources=False)
    assert plan.refused == []
    (backup,) = [r for r in plan.remains if r.what.startswith("final FSx backup")]
    assert "this destroy deletes" in backup.reason


def test_claims_kept_after_their_stateful_set_are_volumes_that_remain():
    plan = plan_of("dev")
    (etcd,) = [r for r in plan["resources"] if r["type"] == tokens.K8S_STATEFUL_SET]
    del etcd["inputs"]["spec"]["persistentVolumeClaimRetentionPolicy"]
    (volumes,) = destroy.plan_destroy(plan["resources"], "dev").remains
    assert etcd["name"] in volumes.what and volumes.monthly_usd > 0


@pytest.mark.parametrize("args", [["destroy", "no-such-stack"], ["destroy"], ["destroy", "dev", "--jsn"]])
def test_bad_input_is_one_line_and_exit_2(args):
    result = run_preflight(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_json_output_holds_the_steps_and_what_remains():
    result = run_preflight("destroy", "dev", "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["steps"] and set(printed) == {"stack", "steps", "refused", "remains", "karpenter"}
