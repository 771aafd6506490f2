"""Cost estimate and deployment critical path: traceable to the catalog and the create-time table."""

from __future__ import annotations

import json

import pytest
from support import STACKS, evaluate, node_group_config, offering, run_preflight, settings

from preflight import analysis
from trainium_eks import catalog, cost, deployment, service_prices
from trainium_eks.graph import Graph, Node
from trainium_eks.trainium_groups import trainium_groups

pytestmark = pytest.mark.stacks


def annotated(stack: str, **overrides) -> dict:
    return analysis.annotate(evaluate(stack, **overrides).to_json())


@pytest.mark.parametrize("stack", STACKS)
def test_node_cost_is_desired_count_times_the_catalog_price(stack):
    plan = annotated(stack)
    region = settings(stack).config["aws:region"]
    lines = {(line["urn"], line["description"]): line["hourlyUsd"] for line in plan["cost"]["lines"]}
    for group in [r for r in plan["resources"] if r["type"] == "aws:eks/nodeGroup:NodeGroup"]:
        instance_type = group["inputs"]["instanceTypes"][0]
        desired = int(group["inputs"]["scalingConfig"]["desiredSize"])
        expected = desired * catalog.INSTANCE_TYPES[instance_type].price(region)
        assert lines[(group["urn"], f"{desired} x {instance_type} on demand")] == pytest.approx(expected, abs=1e-4)
    assert plan["cost"]["monthlyUsd"] == pytest.approx(plan["cost"]["hourlyUsd"] * catalog.HOURS_PER_MONTH, abs=0.01)
    assert plan["cost"]["hourlyUsd"] == pytest.approx(sum(line["hourlyUsd"] for line in plan["cost"]["lines"]), abs=1e-3)


def test_every_billed_resource_has_a_line():
    plan = annotated("prod")
    billed = {line["urn"] for line in plan["cost"]["lines"]}
    for type_ in (
        "aws:eks/nodeGroup:NodeGroup",
        "aws:ec2/natGateway:NatGateway",
        "aws:fsx/lustreFileSystem:LustreFileSystem",
        "eks:index:Cluster",
    ):
        assert {r["urn"] for r in plan["resources"] if r["type"] == type_} <= billed, type_
    fsx = next(r for r in plan["resources"] if r["type"] == "aws:fsx/lustreFileSystem:LustreFileSystem")
    rate = service_prices.FSX_LUSTRE_USD_PER_GB_MONTH[
        (fsx["inputs"]["deploymentType"], int(fsx["inputs"]["perUnitStorageThroughput"]))
    ]
    fsx_line = next(line for line in plan["cost"]["lines"] if line["urn"] == fsx["urn"])
    assert fsx_line["hourlyUsd"] == pytest.approx(fsx["inputs"]["storageCapacity"] * rate / catalog.HOURS_PER_MONTH, abs=1e-4)


def test_scaling_changes_the_cost_by_the_node_price():
    place = {**offering("trn1.32xlarge"), "teams": []}
    small = annotated("staging", trainiumNodeGroups=[node_group_config("trn1-32xl", "trn1.32xlarge", size=2)], **place)
    large = annotated("staging", trainiumNodeGroups=[node_group_config("trn1-32xl", "trn1.32xlarge", size=3)], **place)
    node = catalog.INSTANCE_TYPES["trn1.32xlarge"].price(place["aws:region"])
    root_volume = 500 * service_prices.EBS_GP3_USD_PER_GB_MONTH / catalog.HOURS_PER_MONTH
    assert large["cost"]["hourlyUsd"] - small["cost"]["hourlyUsd"] == pytest.approx(node + root_volume, abs=1e-3)


def test_extended_support_versions_bill_the_extended_rate():
    plan = annotated("dev", kubernetesVersion="1.34")
    line = next(line for line in plan["cost"]["lines"] if "control plane" in line["description"])
    assert line["hourlyUsd"] == service_prices.EKS_EXTENDED_SUPPORT_USD_PER_HOUR


def test_cost_guard_uses_the_same_estimate():
    plan = evaluate("staging").to_json()
    graph = Graph.from_records(plan["resources"])
    region = settings("staging").config["aws:region"]
    assert cost.estimate(graph, region).monthly_usd == analysis.annotate(plan)["cost"]["monthlyUsd"]


def test_check_all_json_carries_cost_and_deployment_for_every_stack():
    result = run_preflight("check", "--all", "--json")
    assert result.returncode == 0, result.stderr
    reports = json.loads(result.stdout)
    assert sorted(r["stack"] for r in reports) == sorted(STACKS)
    for report in reports:
        assert report["cost"]["monthlyUsd"] > 0 and report["cost"]["lines"]
        assert report["deployment"]["criticalPathMinutes"] > 0 and report["deployment"]["criticalPath"]


# ---- deployment ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_critical_path_is_a_chain_of_waits(stack):
    schedule = annotated(stack)["deployment"]
    steps = schedule["steps"]
    assert steps[0]["startMinute"] == 0
    for before, after in zip(steps, steps[1:], strict=False):
        assert after["startMinute"] == pytest.approx(before["finishMinute"], abs=0.01)
    assert schedule["criticalPathMinutes"] == steps[-1]["finishMinute"]
    assert all(s["source"] for s in steps)


def waiting_on(graph: Graph, roots: list) -> list:
    """Every resource that waits, directly or through others, for one of ``roots``."""
    root_ids = {id(r) for r in roots}

    def waits(node, seen) -> bool:
        for dependency in node.dependencies:
            if id(dependency) in root_ids or (
                id(dependency) not in seen and not seen.add(id(dependency)) and waits(dependency, seen)
            ):
                return True
        return False

    return [n for n in graph if id(n) not in root_ids and waits(n, set())]


@pytest.mark.parametrize("stack", STACKS)
def test_nothing_waits_for_a_trainium_node_group(stack):
    plan = evaluate(stack).to_json()
    graph = Graph.from_records(plan["resources"])
    schedule = deployment.Schedule(graph)
    trainium = [g.node for g in trainium_groups(graph)]
    assert trainium
    assert waiting_on(graph, trainium) == []
    assert not {n.urn for n in trainium} & set(schedule.to_json()["criticalPath"])


def test_storage_registry_and_iam_do_not_wait_for_the_cluster():
    plan = evaluate("prod").to_json()
    graph = Graph.from_records(plan["resources"])
    (control_plane,) = graph.of_type("eks:index:Cluster")
    waiting = {n.urn for n in waiting_on(graph, [control_plane])}
    independent = graph.of_type("aws:fsx/lustreFileSystem:LustreFileSystem", "aws:ecr/repository:Repository", "aws:kms/key:Key")
    independent += [r for r in graph.of_type("aws:iam/role:Role") if r.name.endswith("-node")]
    assert independent
    assert not {n.urn for n in independent} & waiting


def test_every_type_in_the_stacks_has_a_create_time():
    for stack in STACKS:
        for resource in evaluate(stack).to_json()["resources"]:
            assert deployment.create_minutes(Graph.from_records([resource]).nodes[0]) != deployment.UNMEASURED, resource["type"]


def test_a_dependency_on_a_component_waits_for_its_children():
    component = Node("urn:c", "my:index:Component", "c", {}, custom=False)
    slow = Node("urn:fsx", "aws:fsx/lustreFileSystem:LustreFileSystem", "fsx", {}, parent=component)
    consumer = Node("urn:ecr", "aws:ecr/repository:Repository", "repo", {}, dependencies=[component])
    schedule = deployment.Schedule(Graph([component, slow, consumer]))
    fsx_minutes = deployment.CREATE_MINUTES[slow.type][0]
    assert schedule.step(consumer).start == fsx_minutes
    assert [s.node for s in schedule.critical_path] == [slow, consumer]
