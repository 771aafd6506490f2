"""`plan --json` carries each Trainium group's generation, training stack, node image, Neuron driver and private
addresses, the facts the text prints, with the same values: both are printed from one structure
(``preflight.node_facts.trainium_nodes``); and a plan file it writes is read back by `check --graph`."""

from __future__ import annotations

import ipaddress
import json

import pytest
import yaml
from generation_mutations import TRN1_STACK, TRN2_STACK, TWO_GENERATIONS, labelled, pinned, refused_by
from support import FIXTURE_STACKS, check_report, evaluate, node_group_config, run_preflight

from plan_graph.graph import Graph
from preflight import analysis, node_facts, planfile, stackfile
from trainium_eks import layout
from trainium_eks.config import addresses, parse
from trainium_eks.wording import span

# A trn1 and a trn2 pool (the trn2 one in a Capacity Block), and a managed group of single-card trn1 nodes.
GROUPS = {
    **TWO_GENERATIONS,
    "teams": [],
    "trainiumNodeGroups": [
        *TWO_GENERATIONS["trainiumNodeGroups"],
        node_group_config("small", "trn1.2xlarge", size=1, maxSize=3),
    ],
}


def fixture_stack(tmp_path) -> str:
    """The fixture staging stack with ``GROUPS``, written where `--stack-file` reads it."""
    document = yaml.safe_load((FIXTURE_STACKS / "Pulumi.staging.yaml").read_text())
    document["config"].update({key if ":" in key else f"trainium-eks:{key}": value for key, value in GROUPS.items()})
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def group_lines(text: list[str], facts: dict) -> list[str]:
    """The text's lines about one group: its heading and the indented lines under it."""
    start = text.index(next(line for line in text if line.startswith(f"Trainium group {facts['group']} (")))
    following = [*text[start + 1 :], ""]
    return [text[start], *following[: next(i for i, line in enumerate(following) if not line.startswith("    "))]]


def test_plan_json_holds_the_generation_stack_node_image_and_address_facts_the_text_shows(tmp_path):
    stack_file = fixture_stack(tmp_path)
    config = parse(stackfile.load("staging", stack_file).config, stack="staging")
    as_json = run_preflight("plan", "staging", "--stack-file", stack_file, "--json")
    as_text = run_preflight("plan", "staging", "--stack-file", stack_file)
    assert as_json.returncode == as_text.returncode == 0, as_json.stderr + as_text.stderr
    nodes = json.loads(as_json.stdout)["trainiumNodes"]
    text = as_text.stdout.splitlines()

    trainium_subnet = ipaddress.IPv4Network(config.network.vpc_cidr).prefixlen + layout.PRIVATE_SUBNET_SPLIT_BITS
    by_name = {group["group"]: group for group in nodes["groups"]}
    assert set(by_name) == {group.name for group in config.trainium_node_groups}
    assert {facts["generation"] for facts in by_name.values()} == {"trn1", "trn2"}
    for group in config.trainium_node_groups:
        facts = by_name[group.name]
        stack, image, taken = facts["trainingStack"], facts["nodeImage"], facts["addresses"]
        assert facts["generation"] == group.spec.generation and facts["instanceType"] == group.instance_type
        assert (stack["name"], stack["imageTag"], stack["backend"]) == (
            group.stack.name,
            group.stack.image_tag,
            group.stack.backend.name,
        )
        assert (stack["neuronRuntime"], stack["drivers"]) == (group.stack.runtime.library, group.stack.runtime.drivers)
        assert (image["release"], image["neuronDriver"]) == (group.release.tag, group.release.neuron_driver)
        assert image["trainingRuntimeRunsOnIt"] is True  # each group boots a release its own stack runs on
        running = addresses.node_addresses(group.instance_type, group.private_ips_per_node)  # as the config rule counts
        assert taken == taken | {
            "interfaceAddresses": group.private_ips_per_node,
            "efaInterfaces": group.efa_interfaces,
            "perRunningNode": running,
            "maxSize": group.scaling.max_size,
            "atMaxSize": running * group.scaling.max_size,
            "crowdedAtMaxSize": taken["perCrowdedNode"] * group.scaling.max_size,
            "subnetUsable": addresses.usable_addresses(trainium_subnet),
        }
        assert taken["perCrowdedNode"] >= running

        # The text's lines about this group show the same values.
        heading, stack_line, image_line, address_line = group_lines(text, facts)
        assert f"({group.instance_type}, {group.spec.generation}; {facts['resource']})" in heading
        stack = group.stack
        assert f"training stack {stack.name}: {stack.backend.name} backend, image :{stack.image_tag}" in stack_line
        assert "does NOT" not in stack_line
        release = f"node image release {group.release.tag} ({image['image']}), Neuron driver aws-neuronx-dkms"
        assert f"{release} {group.release.neuron_driver}: {group.stack.name}'s runtime runs on it" in image_line
        assert (
            f"{running} per running {group.instance_type} node" in address_line
            and f"{taken['perCrowdedNode']} crowded" in address_line
        )
        assert f"; {span(taken['atMaxSize'], taken['crowdedAtMaxSize'])} at maxSize {group.scaling.max_size}" in address_line
        assert f"({taken['subnetUsable']:,} usable)" in address_line


def two_generations_plan() -> dict:
    return evaluate("staging", fixture=True, **TWO_GENERATIONS).to_json()


@pytest.mark.parametrize(
    ("mutate", "group", "says"),
    [
        # a hand-edited plan: the trn1 nodes boot the release of the trn2 stack, whose driver the XLA runtime refuses
        (pinned("trn1-32xl", refused_by(TRN1_STACK)), "trn1-32xl", f"{TRN1_STACK.name}'s runtime does NOT run on it"),
        (pinned("trn2-48xl", refused_by(TRN2_STACK)), "trn2-48xl", f"{TRN2_STACK.name}'s runtime does NOT run on it"),
        (labelled("trn2-48xl", TRN1_STACK.name), "trn2-48xl", f"it does NOT train trn2 (it trains {TRN1_STACK.generations[0]})"),
        (labelled("trn2-48xl", None), "trn2-48xl", "training stack: none the platform knows"),
    ],
)
def test_a_group_on_the_wrong_driver_or_stack_is_shown_as_such_and_the_other_group_is_not(mutate, group, says):
    plan = two_generations_plan()
    mutate(plan)
    nodes = node_facts.trainium_nodes(Graph.from_records(plan["resources"]))
    text = node_facts.node_lines(nodes)
    assert group in {facts["group"] for facts in nodes["groups"]} and len(nodes["groups"]) > 1
    for facts in nodes["groups"]:
        shown = "\n".join(group_lines(text, facts))
        assert (says in shown) == (facts["group"] == group), shown


def test_a_plan_file_with_the_node_facts_is_read_back_and_checked(tmp_path):
    graph, stack_file = tmp_path / "plan.json", fixture_stack(tmp_path)
    graph.write_text(run_preflight("plan", "staging", "--stack-file", stack_file, "--json").stdout)
    saved = planfile.read(graph)
    assert {group.generation for group in saved.trainium_nodes.groups} == {"trn1", "trn2"}
    assert saved.cost is not None and [block.instance_type for block in saved.cost.prepaid] == ["trn2.48xlarge"]
    # what `check --graph` computes afresh from the resources is what the file says
    assert analysis.annotate(saved.to_plan())["trainiumNodes"] == json.loads(graph.read_text())["trainiumNodes"]
    # read, not refused as a malformed file: its check is the check of the stack it was planned from, exit status too
    result = run_preflight("check", "--graph", str(graph), "--json")
    of_the_stack = run_preflight("check", "staging", "--stack-file", stack_file, "--json")
    assert check_report(result) == check_report(of_the_stack) and result.returncode == of_the_stack.returncode
