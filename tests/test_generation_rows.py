"""A generation is data: a copy of the repository whose hardware catalog gains one generation row
(``hardware.GENERATIONS``) and one instance-type row (``catalog.INSTANCE_TYPES``), and nothing else, plans, passes the
policy packs and launches a TorchTitan job on a group of the new type, with the row's NeuronCores at its LNC, its EFA
interfaces, its training stack and its recipe."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import FIXTURE_STACKS

from jobs.workloads import titan_recipes
from preflight.stackfile import REPO_ROOT

TOY_GENERATION = '            Generation("trn9", lnc_settings=(1, 2), default_lnc=2, training_stacks=("torchneuron-2.33",)),\n'
# A made-up type: twice a trn2.48xlarge's devices and cores, on demand in the fixture staging's AZ at a price its budget
# (maxMonthlyUsd) admits for two nodes.
TOY_TYPE = """            InstanceType(
                name="trn9.48xlarge", family="trainium", generation="trn9", vcpus=192, memory_gib=2048,
                neuron_devices=32, physical_neuron_cores=256, accelerator_memory_gib=3072,
                network_cards=16, max_efa_interfaces=16, efa_only_interfaces=True, network_bandwidth_gbps=3200.0,
                max_pods=100, cni_interfaces=2, ipv4_per_interface=50, instance_store_disks=4, instance_store_disk_gb=1900,
                on_demand_usd_per_hour=_frozen({"us-east-1": 20.0}),
                az_ids=_frozen({"us-east-1": ("use1-az6",)}), offered_az_ids=_frozen({"us-east-1": ("use1-az6",)}),
                acceptance_bus_bandwidth_fraction=0.2, recipes=_frozen({"torchtitan": "qwen3-8b"}),
            ),
"""
CORES_AT_DEFAULT_LNC, DEVICES, EFA_INTERFACES = 256 // 2, 32, 16  # the row's physical cores at its default LNC 2
GROUP = {"name": "trn9-48xl", "instanceType": "trn9.48xlarge", "provisioning": "karpenter", "maxSize": 2}
# What the program, preflight and the job tools read: all but the tests.
SOURCE = ("Pulumi.yaml", "__main__.py", "pyproject.toml", "components", "jobs", "plan_graph", "policies", "preflight")
SOURCE += ("stacks", "training", "trainium_eks")


def add_row(path: Path, anchor: str, row: str) -> None:
    """``row`` as the first entry of the one table that starts after ``anchor``."""
    text = path.read_text()
    assert text.count(anchor) == 1, f"{path.name}: the table's opening {anchor!r} is not there once"
    path.write_text(text.replace(anchor, anchor + row))


@pytest.fixture(scope="module")
def toy_repository(tmp_path_factory) -> Path:
    """The repository's code with the two rows added, and a stack of the fixture staging's with one group of the type."""
    copy = tmp_path_factory.mktemp("generation-rows")
    for name in SOURCE:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, copy / name)
    add_row(copy / "trainium_eks/hardware.py", "        for g in (\n", TOY_GENERATION)
    add_row(copy / "trainium_eks/catalog.py", "        for it in (\n", TOY_TYPE)
    document = yaml.safe_load((FIXTURE_STACKS / "Pulumi.staging.yaml").read_text())
    document["config"].update({"trainium-eks:trainiumNodeGroups": [GROUP], "trainium-eks:teams": []})
    (copy / "Pulumi.toy.yaml").write_text(yaml.safe_dump(document))
    return copy


def run(repository: Path, *args: str) -> subprocess.CompletedProcess:
    """A command of the copy: ``python -m`` puts the working directory first on the path, so its code is the copy's."""
    return subprocess.run([sys.executable, "-m", *args], cwd=repository, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def toy_plan(toy_repository) -> dict:
    result = run(toy_repository, "preflight", "plan", "staging", "--stack-file", "Pulumi.toy.yaml", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_group_of_the_new_type_trains_with_the_stack_its_generation_row_names(toy_plan):
    software = toy_plan["outputs"]["trainiumNodeGroupSoftware"][GROUP["name"]]
    assert (software["generation"], software["trainingStack"], software["backend"]) == ("trn9", "torchneuron-2.33", "neuron")
    (group,) = toy_plan["outputs"]["trainiumNodeGroups"]
    assert group["instanceType"] == GROUP["instanceType"]
    assert (group["neuronCoresPerNode"], group["neuronDevicesPerNode"]) == (CORES_AT_DEFAULT_LNC, DEVICES)
    assert group["efaInterfacesPerNode"] == EFA_INTERFACES


def test_the_new_types_node_class_attaches_one_efa_interface_per_network_card(toy_plan):
    (node_class,) = [r["inputs"] for r in toy_plan["resources"] if r["inputs"].get("kind") == "EC2NodeClass"]
    efa = [i for i in node_class["spec"]["networkInterfaces"] if i["interfaceType"] in ("efa", "efa-only")]
    assert sorted(i["networkCardIndex"] for i in efa) == [float(card) for card in range(EFA_INTERFACES)]


def test_the_policy_packs_pass_the_new_generations_stack(toy_repository):
    result = run(toy_repository, "preflight", "check", "staging", "--stack-file", "Pulumi.toy.yaml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_launcher_builds_the_recipe_the_new_types_row_names(toy_repository, toy_plan):
    outputs = toy_repository / "outputs.json"
    outputs.write_text(json.dumps(toy_plan["outputs"]))
    launch = ("jobs.launch", "--outputs", str(outputs), "--workload", "torchtitan", "--dryrun", "--json")
    result = run(toy_repository, *launch)
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert len(job["spec"]["tasks"]) == 2  # the group's two nodes, one pod each
    for task in job["spec"]["tasks"]:
        (container,) = task["template"]["spec"]["containers"]
        assert f"--nproc_per_node={CORES_AT_DEFAULT_LNC}" in container["command"]
        assert container["resources"]["limits"]["aws.amazon.com/neuron"] == str(DEVICES)
        assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == str(EFA_INTERFACES)
        assert task["template"]["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] == GROUP["instanceType"]
    recipe = titan_recipes.RECIPES["qwen3-8b"]
    assert " ".join(recipe.model_options) in job["metadata"]["annotations"]["trainium-eks/titan-recipe"]
    assert recipe.source in job["metadata"]["annotations"]["trainium-eks/parallelism"]
