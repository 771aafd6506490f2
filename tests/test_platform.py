"""The output contract other teams consume, and the graph as a whole."""

from __future__ import annotations

import json
import re

import pytest
from support import STACKS, evaluate, platform, settings

from trainium_eks import catalog, fsx_throughput, versions
from trainium_eks.contract import CONTRACT_VERSION, KEYS, OPTIONAL_KEYS, PlatformContract

# Contract 1.x: consumers may rely on every one of these keys. Removing or renaming one needs a major bump.

pytestmark = pytest.mark.stacks

CONTRACT_1 = {
    "contractVersion",
    "environment",
    "region",
    "clusterName",
    "clusterEndpoint",
    "kubeconfig",
    "oidcProviderArn",
    "clusterSecurityGroupId",
    "vpcId",
    "privateSubnetIds",
    "trainiumSubnetId",
    "trainiumAvailabilityZone",
    "trainiumAzId",
    "trainiumNodeGroups",
    "nodeTaints",
    "volcanoQueues",
    "etcdEndpoint",
    "jobNamespace",
    "fsxClaimName",
    "fsxFileSystemId",
    "fsxMountPath",
    "datasetsPath",
    "checkpointsPath",
    "neuronCompileCachePath",
    "tensorboardLogPath",
    "ecrRepositoryUrl",
    "tensorboardService",
}


def test_contract_keys_are_stable(stack_plan):
    assert CONTRACT_VERSION.split(".")[0] == "1"
    assert set(stack_plan.outputs) >= CONTRACT_1, "a 1.0.0 key was renamed or removed without a major version bump"
    # apiAccess is published where the endpoint is private only, the one way in from a workstation.
    private = not platform(stack_plan.stack).cluster.endpoint_public_access
    assert set(stack_plan.outputs) == set(KEYS) - (set() if private else OPTIONAL_KEYS)
    assert private == ("apiAccess" in stack_plan.outputs)
    assert stack_plan.outputs["contractVersion"] == CONTRACT_VERSION
    assert PlatformContract.from_outputs(stack_plan.outputs).cluster_name == stack_plan.outputs["clusterName"]


def test_a_newer_minor_may_add_keys_at_any_depth(stack_plan):
    """A reader of this version accepts a platform whose next minor version added keys, top level or in entries."""
    newer = json.loads(json.dumps(stack_plan.outputs))
    newer["someLaterKey"] = "x"
    for group in newer["trainiumNodeGroups"]:
        group["someLaterField"] = 1
    contract = PlatformContract.from_outputs(newer)
    assert [g.name for g in contract.node_groups] == [g["name"] for g in stack_plan.outputs["trainiumNodeGroups"]]


def test_the_readme_lists_the_contract_as_declared():
    from preflight.stackfile import REPO_ROOT

    section = (REPO_ROOT / "README.md").read_text().split("## The output contract")[1].split("\n## ")[0]
    assert f"contract version `{CONTRACT_VERSION}`" in section
    undocumented = [key for key in KEYS if f"`{key}`" not in section]
    assert not undocumented, f"README's output contract misses {undocumented}"
    for key, introduced in KEYS.items():
        if introduced != "1.0.0":  # the first version named after the key's first mention is the one it came in
            named = re.search(r"\((\d+\.\d+\.\d+)", section.split(f"`{key}`", 1)[1])
            assert named and named.group(1) == introduced, f"README does not say {key} came in {introduced}"


def test_kubeconfig_is_secret(stack_plan):
    assert stack_plan.outputs["kubeconfig"] == "[secret]"


def test_node_group_entries_describe_the_hardware(stack_plan):
    stack = stack_plan.stack
    configured = {g["name"]: g for g in json.loads(settings(stack).config["trainium-eks:trainiumNodeGroups"])}
    assert sorted(entry["name"] for entry in stack_plan.outputs["trainiumNodeGroups"]) == sorted(configured)
    for entry in stack_plan.outputs["trainiumNodeGroups"]:
        spec = catalog.INSTANCE_TYPES[entry["instanceType"]]
        assert entry["instanceType"] == configured[entry["name"]]["instanceType"]
        group = configured[entry["name"]]
        elastic = group.get("provisioning") == "karpenter"
        assert entry["desiredSize"] == (0 if elastic else group["desiredSize"])  # an elastic pool runs none when idle
        assert entry["maxSize"] == group["maxSize"]
        scaling = stack_plan.outputs["trainiumNodeGroupScaling"][entry["name"]]
        assert scaling["provisioning"] == group.get("provisioning", "managed")
        assert ("idleMinutes" in scaling) == elastic
        assert entry["neuronDevicesPerNode"] == spec.neuron_devices
        assert entry["neuronCoresPerNode"] == spec.neuron_cores
        assert entry["efaInterfacesPerNode"] == spec.max_efa_interfaces


def test_each_group_publishes_what_it_runs(stack_plan):
    """Per group, its generation, its training stack's image in the stack's repository, backend and runtime, and the
    node image release its nodes boot with that release's driver: as the stack's config chose them."""
    software = stack_plan.outputs["trainiumNodeGroupSoftware"]
    groups = platform(stack_plan.stack).trainium_node_groups
    assert set(software) == {group.name for group in groups}
    for group in groups:
        stack, release = group.stack, group.release
        assert software[group.name] == {
            "generation": group.spec.generation,
            "trainingStack": stack.name,
            "trainingImage": f"{stack_plan.outputs['ecrRepositoryUrl']}:{stack.image_tag}",
            "backend": stack.backend.name,
            "neuronRuntime": stack.runtime.library,
            "nodeImageRelease": group.node_image.release,
            "neuronDriver": release.neuron_driver,
        }
        assert group.spec.generation in stack.generations and stack.runtime.runs_on(release.neuron_driver)
    contract = PlatformContract.from_outputs(stack_plan.outputs)
    for group in contract.node_groups:
        assert contract.software(group).training_image == software[group.name]["trainingImage"]


def test_the_file_systems_throughput_is_published_as_its_plan_provisions_it(stack_plan):
    """fsxThroughputMBps, from which the launcher sizes a drain's grace period: the file system the plan creates, its
    capacity in TiB times its throughput per TiB (fixed for scratch), and more capacity writes faster."""
    (fsx,) = [r for r in stack_plan.resources if r.type == "aws:fsx/lustreFileSystem:LustreFileSystem"]
    deployment, capacity, per_tib = (fsx.inputs.get(k) for k in ("deploymentType", "storageCapacity", "perUnitStorageThroughput"))
    published = stack_plan.outputs["fsxThroughputMBps"]
    assert published == pytest.approx(fsx_throughput.write_mb_s(deployment, capacity, per_tib))
    assert fsx_throughput.write_mb_s(deployment, 2 * capacity, per_tib) == pytest.approx(2 * published)
    assert PlatformContract.from_outputs(stack_plan.outputs).fsx_throughput_mbps == published


def _minor(version: str) -> tuple[int, int]:
    major, minor, _ = version.split(".")
    return int(major), int(minor)


def test_a_reader_of_the_previous_minor_reads_this_platform_and_this_reader_reads_the_previous(stack_plan):
    """A 1.5.0 consumer ignores the per-group software; this one reads a 1.5.0 platform, whose groups all ran the one
    PyTorch/XLA image."""
    assert PlatformContract.from_outputs(stack_plan.outputs, requires="1.5.0").version == CONTRACT_VERSION
    older = {key: value for key, value in stack_plan.outputs.items() if _minor(KEYS[key]) <= (1, 5)}
    older["contractVersion"] = "1.5.0"
    contract = PlatformContract.from_outputs(older, requires="1.5.0")
    xla = versions.TRAINING_STACKS["pytorch-xla-2.30"]
    for group in contract.node_groups:
        software = contract.software(group)
        assert (software.training_image, software.backend) == (f"{contract.ecr_repository_url}:{xla.image_tag}", "xla")
        assert software.node_image_release is None  # a 1.5.0 platform did not say


def test_every_dependency_and_provider_resolves(stack_plan):
    urns = {r.urn for r in stack_plan.resources}
    for resource in stack_plan.resources:
        assert set(resource.dependencies) <= urns, resource.urn
        for deps in resource.property_dependencies.values():
            assert set(deps) <= urns, resource.urn
        assert resource.parent is None or resource.parent in urns
        assert resource.provider is None or resource.provider in urns


def test_kubernetes_resources_use_the_cluster_provider(stack_plan):
    (provider,) = stack_plan.find("pulumi:providers:kubernetes")
    for resource in stack_plan.resources:
        if resource.type.startswith("kubernetes:"):
            assert resource.provider == provider.urn, resource.urn


def test_taggable_aws_resources_carry_the_required_tags(stack_plan):
    config = settings(stack_plan.stack).config
    for resource in stack_plan.resources:
        if resource.type.startswith("aws:") and "tags" in resource.inputs:
            tags = resource.inputs["tags"]
            assert tags["environment"] == config["trainium-eks:environment"], resource.urn
            assert tags["owner"] and tags["cost-center"], resource.urn


def test_nothing_is_unpinned():
    for chart in versions.HELM_CHARTS:
        assert chart.version and chart.version[0] in "v0123456789" and "*" not in chart.version and "^" not in chart.version
    for image in versions.IMAGES:
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest"


def test_plans_are_deterministic():
    first = json.dumps(evaluate("prod").to_json(), sort_keys=True)
    second = json.dumps(evaluate("prod").to_json(), sort_keys=True)
    assert first == second


@pytest.mark.parametrize("stack", STACKS)
def test_preview_of_a_new_stack_evaluates_with_unknowns(stack):
    plan = evaluate(stack, preview=True)
    text = json.dumps(plan.to_json())
    assert "[unknown]" in text
    assert plan.outputs["vpcId"] == "[unknown]"
    assert plan.outputs["trainiumAzId"] == settings(stack).config["trainium-eks:trainiumAzId"]  # invokes run in preview
    assert {r.type for r in plan.resources} == {r.type for r in evaluate(stack).resources}
