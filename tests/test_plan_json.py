"""`plan --json` carries each Trainium group's node image, Neuron driver and private addresses, the facts the text
prints, with the same values: both are printed from one structure (``preflight.analysis.trainium_nodes``)."""

from __future__ import annotations

import ipaddress
import json

import pytest
import yaml
from support import FIXTURE_STACKS, node_group_config, one_group, run_preflight

from preflight import stackfile
from trainium_eks import layout, versions
from trainium_eks.config import addresses, parse


def fixture_stack(tmp_path, release: str) -> str:
    """The fixture staging stack with an elastic pool of EFA nodes and a managed group of single-card nodes booting
    ``release``, written where `--stack-file` reads it."""
    config = one_group("trn1.32xlarge")
    config["trainiumNodeGroups"].append(node_group_config("small", "trn1.2xlarge", size=1, maxSize=3))
    document = yaml.safe_load((FIXTURE_STACKS / "Pulumi.staging.yaml").read_text())
    document["config"].update(
        {key if ":" in key else f"trainium-eks:{key}": value for key, value in {**config, "nodeImageRelease": release}.items()}
    )
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


@pytest.mark.parametrize("release", sorted(versions.NODE_IMAGE_RELEASES))
def test_plan_json_holds_the_node_image_and_address_facts_the_text_shows(tmp_path, release):
    stack_file = fixture_stack(tmp_path, release)
    config = parse(stackfile.load("staging", stack_file).config, stack="staging")
    as_json = run_preflight("plan", "staging", "--stack-file", stack_file, "--json")
    as_text = run_preflight("plan", "staging", "--stack-file", stack_file)
    assert as_json.returncode == as_text.returncode == 0, as_json.stderr + as_text.stderr
    nodes = json.loads(as_json.stdout)["trainiumNodes"]
    text = as_text.stdout.splitlines()

    driver = versions.NODE_IMAGE_RELEASES[release].neuron_driver
    trainium_subnet = ipaddress.IPv4Network(config.network.vpc_cidr).prefixlen + layout.PRIVATE_SUBNET_SPLIT_BITS
    by_name = {group["group"]: group for group in nodes["groups"]}
    assert set(by_name) == {group.name for group in config.trainium_node_groups}
    for group in config.trainium_node_groups:
        facts = by_name[group.name]
        image, taken = facts["nodeImage"], facts["addresses"]
        assert (image["release"], image["neuronDriver"]) == (release, driver)
        assert image["trainingRuntimeRunsOnIt"] == versions.TRAINING_RUNTIME.runs_on(driver)
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
        (image_line,) = [line for line in text if line.startswith(f"Node image of {facts['resource']}:")]
        assert f"node image release {release}, Neuron driver aws-neuronx-dkms {driver}" in image_line
        assert image_line.endswith("does NOT run on it") != image["trainingRuntimeRunsOnIt"]
        (address_line,) = [line for line in text if line.startswith(f"Private IPs of {facts['resource']}:")]
        assert f"{running} per running {group.instance_type} node" in address_line
        assert f"{taken['perCrowdedNode']} crowded" in address_line
        assert f"{taken['atMaxSize']:,} to {taken['crowdedAtMaxSize']:,} at maxSize {group.scaling.max_size}" in address_line
        assert f"({taken['subnetUsable']:,} usable)" in address_line


def test_a_plan_file_with_the_node_facts_is_checked(tmp_path):
    graph = tmp_path / "plan.json"
    graph.write_text(
        run_preflight(
            "plan", "staging", "--stack-file", fixture_stack(tmp_path, versions.DEFAULT_NODE_IMAGE_RELEASE), "--json"
        ).stdout
    )
    result = run_preflight("check", "--graph", str(graph), "--json")
    assert result.returncode in (0, 1) and result.stderr == "", result.stderr  # read, not refused as a malformed file
