"""Capacity Blocks without stack edits: an elastic group selects the blocks tagged for it as well as the one it names,
a pool of a type sold only in blocks requires a block, the blocks' events reach the stack's topic, and the contract
tells a consumer which tag puts a block in a group."""

from __future__ import annotations

import json

import pytest
from support import RESERVATION, STACKS, cached_plan, evaluate, offering, one, platform, settings, sold_as

from preflight import analysis
from trainium_eks import catalog, layout, tokens
from trainium_eks.config import ConfigError, parse
from trainium_eks.contract import PlatformContract

TRN1, TRN2 = catalog.INSTANCE_TYPES["trn1.32xlarge"], catalog.INSTANCE_TYPES["trn2.48xlarge"]
BLOCK = sold_as(TRN2.name)["capacityReservation"]
TRN1_POOL = {"name": "trn1-32xl", "instanceType": TRN1.name, "provisioning": "karpenter", "maxSize": 2}
RESERVATION_TYPE = "karpenter.k8s.aws/capacity-reservation-type"
EC2_USER_GUIDE_EVENTS = {  # EC2 User Guide, "Monitor Capacity Blocks using EventBridge"
    "Capacity Block Delivered",
    "Capacity Block Expiration Warning",
    "EC2 Capacity Reservation Instance Interruption Warning",
}


def trn2_group(provisioning: str = "karpenter", **reservation) -> dict:
    """Overrides of the fixture staging stack: one trn2 group in a Capacity Block, with ``reservation``'s keys (None
    drops one)."""
    block = {k: v for k, v in {**BLOCK, **reservation}.items() if v is not None}
    group = {"name": "trn2-48xl", "instanceType": TRN2.name, "provisioning": provisioning, "capacityReservation": block}
    group |= {"maxSize": 2} if provisioning == "karpenter" else {"minSize": 0, "desiredSize": 0, "maxSize": 2}
    return {"trainiumNodeGroups": [group], "teams": [], **offering(TRN2.name)}


def selector_terms(plan) -> list[dict]:
    return one(plan.find(tokens.KARPENTER_NODE_CLASS)).inputs["spec"]["capacityReservationSelectorTerms"]


@pytest.mark.parametrize("named", [BLOCK["id"], "cr-0fedcba9876543210", None], ids=["stack's", "another", "none"])
def test_a_block_tagged_for_the_group_is_selected_whatever_id_the_stack_names(named):
    plan = evaluate("staging", fixture=True, **trn2_group(id=named))
    contract = PlatformContract.from_outputs(plan.outputs)
    (group,) = contract.node_groups
    # The tag a consumer reads from the contract is the one the node class selects: tagging a second block with it
    # (aws ec2 create-tags) puts that block in the group with no stack edit and no pulumi up.
    tag = group.capacity_block_tag
    assert (tag.key, tag.value) == (
        layout.CAPACITY_BLOCK_GROUP_TAG,
        layout.capacity_block_tag_value(contract.cluster_name, group.name),
    )
    terms = selector_terms(plan)
    assert {"tags": {tag.key: tag.value}} in terms
    # Karpenter ORs the terms; the CRD allows nothing beside an id in its term.
    assert [term for term in terms if "id" in term] == ([{"id": named}] if named else [])


def test_two_stacks_tag_their_blocks_apart():
    """The tag value names the cluster and the group: a block tagged for staging's group is not prod's or dev's."""
    values = {
        layout.capacity_block_tag_value(platform(stack).cluster.name, group.name)
        for stack in STACKS
        for group in platform(stack).trainium_node_groups
    }
    assert len(values) == sum(len(platform(stack).trainium_node_groups) for stack in STACKS)


def test_groups_that_select_by_id_alone_publish_no_tag():
    plan = evaluate("staging", fixture=True, **trn2_group("managed"))
    (group,) = PlatformContract.from_outputs(plan.outputs).node_groups
    assert group.capacity_block_tag is None  # a managed group's launch template targets its one block
    outputs = {**plan.outputs, "trainiumNodeGroups": [{**plan.outputs["trainiumNodeGroups"][0]}]}
    outputs["trainiumNodeGroups"][0].pop("capacityBlockTag", None)
    assert PlatformContract.from_outputs(outputs).node_groups[0].capacity_block_tag is None  # an older platform's


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (trn2_group("managed", id=None), "a managed group's launch template targets one reservation by its ID"),
        (
            {"trainiumNodeGroups": [{**TRN1_POOL, "capacityReservation": {k: v for k, v in RESERVATION.items() if k != "id"}}]},
            "an On-Demand Capacity Reservation is selected by its ID",
        ),
    ],
    ids=["managed block", "odcr"],
)
def test_a_reservation_only_an_id_can_select_needs_one(overrides, words):
    with pytest.raises(ConfigError) as caught:
        parse(settings("staging", fixture=True, **overrides).config, stack="staging")
    message = str(caught.value)
    assert "\n" not in message and message.split(": ")[0].endswith("trainiumNodeGroups[0].capacityReservation.id")
    assert words in message and "add the reservation's cr-... ID" in message


def pool_requirements(plan) -> dict[str, list]:
    requirements = one(plan.find(tokens.KARPENTER_NODE_POOL)).inputs["spec"]["template"]["spec"]["requirements"]
    return {r["key"]: r["values"] for r in requirements if r["operator"] == "In"}


def test_a_pool_requires_a_capacity_block_exactly_where_the_type_is_sold_only_in_blocks():
    block_region = next(r for r in TRN1.capacity_block_regions if TRN1.az_ids.get(r))
    az_id = TRN1.az_ids[block_region][0]
    trn1_in_a_block = {**TRN1_POOL, "capacityReservation": {**BLOCK, "azId": az_id}}
    cases = [
        (trn2_group(), True),  # sold only in blocks where offering() puts it
        ({"trainiumNodeGroups": [trn1_in_a_block], "teams": [], "aws:region": block_region, "trainiumAzId": az_id}, False),
        ({"trainiumNodeGroups": [TRN1_POOL], "teams": [], **offering(TRN1.name)}, False),
    ]
    for overrides, block_only in cases:
        plan = evaluate("staging", fixture=True, **overrides)
        region, (group,) = plan.outputs["region"], overrides["trainiumNodeGroups"]
        assert catalog.INSTANCE_TYPES[group["instanceType"]].block_only(region) is block_only
        requirements = pool_requirements(plan)
        assert requirements.get(RESERVATION_TYPE) == (["capacity-block"] if block_only else None), (group, region)
        assert requirements["karpenter.sh/capacity-type"] == (["reserved"] if "capacityReservation" in group else ["on-demand"])


def block_rules(plan) -> list:
    """The rules on a Capacity Block's own events (Karpenter's rules take the instance interruption warning alone)."""
    return [r for r in plan.find(tokens.CLOUDWATCH_EVENT_RULE) if "Capacity Block Delivered" in pattern(r)["detail-type"]]


def pattern(rule) -> dict:
    return json.loads(rule.inputs["eventPattern"])


@pytest.mark.parametrize("stack", STACKS)
def test_a_stack_with_block_groups_sends_the_block_events_to_its_topic(stack):
    plan = cached_plan(stack, False)
    config = platform(stack)
    if not (any(group.in_capacity_block for group in config.trainium_node_groups) and config.monitoring.alarm_topic_arn):
        assert not block_rules(plan)
        return
    (rule,) = block_rules(plan)
    assert pattern(rule)["source"] == ["aws.ec2"] and set(pattern(rule)["detail-type"]) == EC2_USER_GUIDE_EVENTS
    assert pattern(rule).keys() == {"source", "detail-type"}  # every block of the account: no event carries the tag
    (target,) = [t for t in plan.find(tokens.CLOUDWATCH_EVENT_TARGET) if t.inputs["rule"] == rule.inputs["name"]]
    assert target.inputs["arn"] == config.monitoring.alarm_topic_arn
    assert rule.urn in target.property_dependencies["rule"]


def test_a_stack_without_blocks_or_without_a_topic_has_no_block_events_rule():
    with_blocks = evaluate("staging", fixture=True, **trn2_group())
    without_topic = evaluate("staging", fixture=True, alarmTopicArn="", **trn2_group())
    on_demand = evaluate("staging", fixture=True, trainiumNodeGroups=[TRN1_POOL], teams=[], **offering(TRN1.name))
    assert block_rules(with_blocks)
    for plan in (without_topic, on_demand):
        assert not block_rules(plan)


def test_the_prepaid_line_is_per_block_and_says_further_tagged_blocks_are_bought_apart():
    plan = evaluate("staging", fixture=True, **trn2_group(id=None))
    (block,) = analysis.annotate(plan.to_json())["cost"]["prepaid"]
    assert block["instances"] == BLOCK["instanceCount"] and block["reservation"] is None
    assert block["hourlyUsd"] == pytest.approx(BLOCK["instanceCount"] * BLOCK["hourlyUsd"])
    tag = f"{layout.CAPACITY_BLOCK_GROUP_TAG}={layout.capacity_block_tag_value(plan.outputs['clusterName'], 'trn2-48xl')}"
    assert f"each further block tagged {tag} is bought and paid for on its own" in block["description"]
