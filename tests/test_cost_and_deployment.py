"""Cost estimate and deployment critical path: traceable to the catalog and the create-time table."""

from __future__ import annotations

import json

import pytest
from generation_mutations import CAPACITY_BLOCK, TRN2, TWO_GENERATIONS
from mutation_case import resource as planned
from support import STACKS, evaluate, node_group_config, offering, run_preflight, settings

from plan_graph import cost, deployment
from plan_graph.graph import Graph, Node
from plan_graph.trainium_groups import NODE_CLASS, trainium_groups
from policies.rules import cost as cost_rules
from preflight import analysis
from trainium_eks import catalog, layout, service_prices

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


def two_generations() -> dict:
    """A stack with an elastic trn1 pool on demand and an elastic trn2 pool in a Capacity Block."""
    return evaluate("staging", fixture=True, **TWO_GENERATIONS).to_json()


def test_the_idle_month_of_a_stack_of_both_generations_has_no_trainium_in_it_and_the_block_is_prepaid_apart():
    plan = analysis.annotate(two_generations())
    estimate, pools = plan["cost"], {g.node.urn: g for g in trainium_groups(Graph.from_records(plan["resources"]))}
    trainium = [line for line in estimate["lines"] if line["urn"] in pools]
    assert trainium and all(line["idleHourlyUsd"] == 0 for line in trainium)
    assert estimate["idleMonthlyUsd"] == pytest.approx(
        sum(line["idleHourlyUsd"] for line in estimate["lines"] if line["urn"] not in pools) * catalog.HOURS_PER_MONTH, abs=0.01
    )
    # The trn2 pool's block is prepaid, in neither monthly figure; the trn1 pool's nodes are on demand while busy.
    (block,) = estimate["prepaid"]
    assert pools[block["urn"]].spec is TRN2 and block["reservation"] == CAPACITY_BLOCK["id"]
    assert block["hourlyUsd"] == pytest.approx(CAPACITY_BLOCK["instanceCount"] * CAPACITY_BLOCK["hourlyUsd"])
    assert not any(line["urn"] == block["urn"] and TRN2.name in line["description"] for line in estimate["lines"])
    assert estimate["hourlyUsd"] == pytest.approx(sum(line["hourlyUsd"] for line in estimate["lines"]), abs=1e-3)
    # The text prints the block in a section of its own, after the monthly table.
    text = analysis.summary(plan).splitlines()
    (heading,) = [i for i, line in enumerate(text) if line.startswith("Prepaid Capacity Blocks")]
    assert text.index(next(line for line in text if line.startswith("Estimated running cost"))) < heading
    assert block["description"] in text[heading + 1] and "USD/hour of the window" in text[heading + 1]
    assert not any(block["description"] in line for line in text[:heading])


def without_reservation(plan: dict, group: str) -> dict:
    """A hand-made plan: the EC2NodeClass of ``group`` selects no reservation and records none."""
    spec = planned(plan, NODE_CLASS, f"-{group}-nodeclass")["inputs"]
    spec["spec"].pop("capacityReservationSelectorTerms")
    for key in (layout.CAPACITY_RESERVATION_INSTANCES_TAG, layout.CAPACITY_BLOCK_HOURLY_USD_TAG):
        spec["metadata"]["annotations"].pop(key, None)
    return plan


def test_a_trn2_group_without_a_reservation_is_priced_as_not_known_never_a_traceback(tmp_path):
    assert TRN2.price("us-east-2") is None  # no AWS source gives it an on-demand price
    plan = without_reservation(two_generations(), "trn2-48xl")
    estimate = cost.estimate(Graph.from_records(plan["resources"]), "us-east-2")
    (unknown,) = [line for line in estimate.lines if not line.priced]
    assert TRN2.name in unknown.description and "not counted" in unknown.description
    assert unknown.hourly_usd == unknown.idle == 0 and not estimate.prepaid
    annotated = analysis.annotate(plan)
    assert "1 item(s) without a known price counted as 0" in analysis.summary(annotated)
    assert not list(cost_rules.monthly_cost_budget(Graph.from_records(plan["resources"]), {"maxMonthlyUsd": 10**9}))
    graph = tmp_path / "plan.json"
    graph.write_text(json.dumps(annotated))
    result = run_preflight("check", "--graph", str(graph))
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
    assert "not counted, no on-demand price known for trn2.48xlarge" in result.stdout


def test_the_budget_holds_the_running_cost_and_leaves_a_prepaid_block_out():
    graph = Graph.from_records(two_generations()["resources"])
    estimate = cost.estimate(graph, "us-east-2")
    prepaid_month = sum(block.hourly_usd for block in estimate.prepaid) * catalog.HOURS_PER_MONTH
    assert prepaid_month > 1
    # a budget the running cost fits and the running cost with the block's month would not
    assert not list(cost_rules.monthly_cost_budget(graph, {"maxMonthlyUsd": estimate.monthly_usd + 1}))
    (over,) = cost_rules.monthly_cost_budget(graph, {"maxMonthlyUsd": estimate.monthly_usd - 1})
    assert f"{estimate.monthly_usd:,.0f} USD/month" in over.message


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
