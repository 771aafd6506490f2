"""`preflight destroy`: the order `pulumi destroy` deletes a stack in, what it refuses and what remains, read offline
from the stack's plan. The stacks are the fixture stacks (tests/fixture_stacks), edited where a case needs it; the
order that keeps the way to a private API endpoint is held for the shipped stacks too."""

from __future__ import annotations

import json

import pytest
from mutation_case import plan_of
from support import FIXTURE_STACKS, STACKS, cached_plan, run_preflight, settings

from plan_graph.graph import Graph, Node
from policies.rules.cleanup import KARPENTER_CHART
from preflight import destroy
from trainium_eks import tokens
from trainium_eks.config import parse


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
    records = plan_of("dev", protectStatefulResources=False)["resources"]
    graph = Graph.from_records(records)
    edges = destroy.dependencies(graph)
    _, steps = teardown("dev", protectStatefulResources=False)
    shown = [node for node in graph if destroy._shown(node)]
    assert shown and {destroy._label(node) for node in shown} == set(steps)  # nothing is kept: every one has a step
    for node in shown:
        # through components and providers too, which have no step of their own
        for dependency in destroy._closure(edges[node], edges) & set(shown):
            assert steps[destroy._label(node)] < steps[destroy._label(dependency)], (node, dependency)


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
    assert printed["steps"] and set(printed) == {"stack", "drain", "steps", "apiPath", "refused", "remains", "karpenter"}
    assert printed["drain"]["commands"] and printed["apiPath"]["lastKubernetesStep"] < printed["apiPath"]["firstPathStep"]


FIXTURES = sorted(path.name.split(".")[1] for path in FIXTURE_STACKS.glob("Pulumi.*.yaml"))
STACK_FILES = [(stack, False) for stack in STACKS] + [(stack, True) for stack in FIXTURES]


def private_endpoint(stack: str, fixture: bool) -> bool:
    return not parse(settings(stack, fixture=fixture).config, stack=stack).cluster.endpoint_public_access


PRIVATE = [
    pytest.param(
        stack, fixture, id=f"{'fixture' if fixture else 'shipped'}-{stack}", marks=[] if fixture else [pytest.mark.stacks]
    )
    for stack, fixture in STACK_FILES
    if private_endpoint(stack, fixture)
]


def test_the_fixture_stacks_include_a_private_one():
    assert any(fixture for stack, fixture in STACK_FILES if private_endpoint(stack, fixture))


def way_to_the_api(graph: Graph) -> set[Node]:
    """What a destroy on the deploy runner, or kubectl through the access host, needs to reach a private endpoint,
    found by what each resource is rather than by the component it sits in: the runner's project and webhook, the host
    and its profile, every rule on or admitting their security groups, and the network's routes, NAT, internet
    gateway and VPC endpoints."""
    clients = graph.of_type(tokens.CODEBUILD_PROJECT, tokens.EC2_INSTANCE)
    groups = {
        g for c in clients for g in c.linked("vpcConfig") + c.linked("vpcSecurityGroupIds") if g.type == tokens.EC2_SECURITY_GROUP
    }
    rules = [
        rule
        for rule in graph.of_type(tokens.VPC_SECURITY_GROUP_INGRESS_RULE, tokens.VPC_SECURITY_GROUP_EGRESS_RULE)
        if {*rule.linked("securityGroupId"), *rule.linked("referencedSecurityGroupId")} & groups
    ]
    network = graph.of_type(
        tokens.EC2_ROUTE_TABLE,
        tokens.EC2_ROUTE_TABLE_ASSOCIATION,
        tokens.EC2_NAT_GATEWAY,
        tokens.EC2_EIP,
        tokens.EC2_INTERNET_GATEWAY,
        tokens.EC2_VPC_ENDPOINT,
        tokens.CODEBUILD_WEBHOOK,
        tokens.IAM_INSTANCE_PROFILE,
    )
    return {*clients, *groups, *rules, *network}


@pytest.mark.parametrize(("stack", "fixture"), PRIVATE)
def test_a_private_stack_keeps_its_way_to_the_api_until_the_last_kubernetes_object_is_gone(stack, fixture):
    records = cached_plan(stack, False, fixture=fixture).to_json()["resources"]
    plan = destroy.plan_destroy(records, stack)
    step_of = {node.urn: index for index, step in enumerate(plan.steps, 1) for node in step}
    graph = Graph.from_records(records)
    through_the_api = {step_of[n.urn] for n in graph if n.custom and n.type.startswith("kubernetes:") and n.urn in step_of}
    access = {step_of[n.urn] for n in way_to_the_api(graph) if n.urn in step_of}
    assert through_the_api and access, (through_the_api, access)
    assert max(through_the_api) < min(access)
    assert plan.api_path.keeps_the_api and plan.api_path.last_kubernetes_step == max(through_the_api)
    assert plan.api_path.first_path_step <= min(access)  # what it prints covers every part of the way
    report = destroy.report(plan)
    assert f"after the last Kubernetes object (step {max(through_the_api)})" in report


def test_a_provider_that_does_not_wait_for_the_way_to_the_api_is_reported():
    """The wiring before: the Kubernetes provider depended on the cluster's client rules alone."""
    records = plan_of("prod")["resources"]
    (provider,) = [r for r in records if r["type"] == "pulumi:providers:kubernetes"]
    provider["dependencies"] = [urn for urn in provider["dependencies"] if "api-from-client" in urn]
    assert provider["dependencies"]
    plan = destroy.plan_destroy(records, "prod")
    assert not plan.api_path.keeps_the_api
    assert "loses the API part way" in destroy.report(plan)


def test_the_drain_comes_first_with_every_namespace_the_stack_creates():
    records = plan_of("staging")["resources"]
    namespaces = {r["inputs"]["metadata"]["name"] for r in records if r["type"] == tokens.K8S_NAMESPACE}
    plan = destroy.plan_destroy(records, "staging")
    assert len(namespaces) > 1 and {f"kubectl delete vcjob --all -n {ns}" for ns in namespaces} <= set(plan.drain.commands)
    pools = [i for i, step in enumerate(plan.steps, 1) for n in step if n.type == tokens.KARPENTER_NODE_POOL]
    assert pools and "karpenter.sh/do-not-disrupt" in plan.drain.reason and f"step {min(pools)}" in plan.drain.reason
    report = destroy.report(plan).splitlines()
    assert report[0].startswith("first, stop the running jobs") and report.index(f"  {plan.drain.commands[0]}") < report.index(
        "  step 1:"
    )
