"""The output contract other teams consume, and the graph as a whole."""

from __future__ import annotations

import json

import pytest
from support import STACKS, evaluate, platform, settings

from trainium_eks import catalog, versions
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
        if introduced != "1.0.0":
            assert f"`{key}`" in section.split(f"({introduced}")[0], f"README does not say {key} came in {introduced}"


def test_kubeconfig_is_secret(stack_plan):
    assert stack_plan.outputs["kubeconfig"] == "[secret]"


def test_node_group_entries_describe_the_hardware(stack_plan):
    stack = stack_plan.stack
    configured = {g["name"]: g for g in json.loads(settings(stack).config["trainium-eks:trainiumNodeGroups"])}
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
