"""The share model on a fleet of unlike nodes (docs/teams.md, "Capacity"): a neuronShare is a share of each Trainium
group in whole nodes, and a team's quota and queue, and a platform queue, hold exactly those nodes on every resource a
node advertises. Expectations come from the stack file (as the Pulumi CLI passes it, defaults applied) and the
catalog, with exact fractions, not from the share model's own code."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
from generation_mutations import TWO_GENERATIONS
from support import PROJECT, cached_plan, evaluate, one_line, run_preflight, stack_copy

from preflight import stackfile
from trainium_eks import catalog, hardware, layout, shares, tokens

STACKS = stackfile.stack_names()


def declared(stack: str, key: str) -> list[dict]:
    """A list key of the stack as the Pulumi CLI passes it to the program (Pulumi.yaml's default where unset)."""
    return json.loads(stackfile.load(stack).config[f"{PROJECT}:{key}"])


def advertised(group: dict) -> dict[str, int]:
    """What one node of a stack file's group advertises to the scheduler: Neuron devices, NeuronCores at the
    generation's default LNC, and the EFA interfaces (one per network card) unless the group turns EFA off."""
    spec = catalog.INSTANCE_TYPES[group["instanceType"]]
    efa = group.get("efa", spec.max_efa_interfaces > 0)
    amounts = {
        layout.NEURON_DEVICE_RESOURCE: spec.neuron_devices,
        layout.NEURON_CORE_RESOURCE: spec.neuron_cores_at(hardware.GENERATIONS[spec.generation].default_lnc),
        layout.EFA_RESOURCE: spec.max_efa_interfaces if efa else 0,
    }
    return {resource: amount for resource, amount in amounts.items() if amount}


def whole_nodes(share: float, group: dict) -> int:
    """The nodes of ``group`` a share entitles to, with the share as the exact decimal the file writes."""
    return math.floor(Fraction(str(share)) * group["maxSize"])


def entitled(share: float, groups: list[dict]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for group in groups:
        for resource, amount in advertised(group).items():
            totals[resource] = totals.get(resource, 0) + whole_nodes(share, group) * amount
    return totals


def as_numbers(amounts: dict, prefix: str = "") -> dict[str, float]:
    return {key.removeprefix(prefix): float(value) for key, value in amounts.items()}


@pytest.mark.stacks  # derives what it expects from the stacks as they are, a user's edits included
@pytest.mark.parametrize("stack", STACKS)
def test_every_quota_and_queue_holds_its_whole_nodes_of_each_group_on_every_resource(stack):
    groups = declared(stack, "trainiumNodeGroups")
    plan = cached_plan(stack, False)
    queues = {q.inputs["metadata"]["name"]: as_numbers(q.inputs["spec"]["capability"]) for q in plan.find(tokens.VOLCANO_QUEUE)}
    quotas = {
        q.inputs["metadata"]["namespace"]: as_numbers(q.inputs["spec"]["hard"], "requests.")
        for q in plan.find(tokens.K8S_RESOURCE_QUOTA)
    }
    holders = [(queue["name"], queue["neuronShare"], [queues[queue["name"]]]) for queue in declared(stack, "volcanoQueues")]
    for team in declared(stack, "teams"):
        namespace = layout.team_namespace(team["name"])  # the team's queue is named as its namespace
        holders.append((team["name"], team["neuronShare"], [queues[namespace], quotas[namespace]]))
    assert holders
    for name, share, limits in holders:
        for group in groups:
            assert whole_nodes(share, group) >= 1, (name, group["name"])  # at least one node of every group
        for limit in limits:
            assert limit == entitled(share, groups), (name, limit)
    fleet = entitled(1, groups)
    for resource, amount in fleet.items():  # the teams together fit the fleet
        assert sum(quota.get(resource, 0) for quota in quotas.values()) <= amount, resource


def test_a_share_of_unlike_groups_is_whole_nodes_of_each_not_that_fraction_of_their_sum():
    """trn1 (8 EFA interfaces a node) at 3 nodes at most and trn2 (16) at 2: half is one node of each, not half of
    the sum, whose EFA interfaces and devices would promise what no whole nodes provide."""
    trn1, trn2 = TWO_GENERATIONS["trainiumNodeGroups"]
    groups = [{**trn1, "maxSize": 3}, trn2]
    teams = [{"name": "alpha", "neuronShare": 0.5}, {"name": "beta", "neuronShare": 0.5}]
    plan = evaluate("staging", **{**TWO_GENERATIONS, "trainiumNodeGroups": groups, "teams": teams})
    half_of_the_sum = {resource: math.floor(amount / 2) for resource, amount in entitled(1, groups).items()}
    assert entitled(0.5, groups) != half_of_the_sum  # the case tells the two models apart
    for team in teams:
        namespace = layout.team_namespace(team["name"])
        (quota,) = [q.inputs for q in plan.find(tokens.K8S_RESOURCE_QUOTA) if q.inputs["metadata"]["namespace"] == namespace]
        (queue,) = [q.inputs for q in plan.find(tokens.VOLCANO_QUEUE) if q.inputs["metadata"]["name"] == namespace]
        assert as_numbers(quota["spec"]["hard"], "requests.") == as_numbers(queue["spec"]["capability"])
        assert as_numbers(queue["spec"]["capability"]) == entitled(0.5, groups)


def test_a_team_below_one_node_of_a_group_stops_preflight_plan_in_one_line(tmp_path):
    """The issue's edit of the shipped staging: its two teams lowered to a quarter each, and a third team given the
    other half; a quarter of a group of staging is less than a node."""

    def three_teams(config: dict) -> None:
        teams = config[f"{PROJECT}:teams"]
        for team in teams:
            team["neuronShare"] = 0.25
        teams.append({"name": "speech", "neuronShare": 0.5})

    path = stack_copy(tmp_path, "staging", three_teams)
    line = one_line(run_preflight("plan", "staging", "--stack-file", path), f"{PROJECT}:teams[0].neuronShare", "0.25 of")
    groups = declared("staging", "trainiumNodeGroups")
    short = [group["instanceType"] for group in groups if whole_nodes(0.25, group) == 0]
    assert short, "a quarter of some staging group must be less than a node for this case"
    assert f"less than one {short[0]}" in line and "raise neuronShare" in line, line


def test_a_platform_queue_below_one_node_is_refused_in_one_line(tmp_path):
    groups = declared("prod", "trainiumNodeGroups")
    share = min(Fraction(1, 2 * group["maxSize"]) for group in groups)  # half a node of the largest group

    def small_queue(config: dict) -> None:
        config[f"{PROJECT}:volcanoQueues"] = [{"name": "tiny", "neuronShare": float(share)}]

    path = stack_copy(tmp_path, "prod", small_queue)
    one_line(run_preflight("plan", "prod", "--stack-file", path), f"{PROJECT}:volcanoQueues[0].neuronShare", "less than one")


def test_a_share_written_in_hundredths_entitles_exactly_its_whole_nodes():
    """Floating point must not cost a node: 0.29 x 100 is 28.999999999999996 as a float, and 29 nodes."""
    for hundredths in range(1, 101):
        share = hundredths / 100
        for max_size in range(1, 129):
            exact = math.floor(Fraction(hundredths, 100) * max_size)
            assert shares.entitled_nodes(share, max_size) == exact, (share, max_size)
            if exact == 0:  # the fix the config error offers holds a node
                assert shares.entitled_nodes(shares.smallest_share_for_a_node(max_size), max_size) >= 1
                assert shares.entitled_nodes(share, shares.smallest_max_size_for_a_node(share)) >= 1
