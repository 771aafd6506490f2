"""Device plugins: pinned charts, scheduled only on Trainium nodes, tolerating exactly the taint those nodes carry."""

from __future__ import annotations

import pytest
from support import evaluate, offering, one, settings

from plan_graph.trainium_groups import tolerates
from trainium_eks import catalog, versions

pytestmark = pytest.mark.stacks

RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NG = "aws:eks/nodeGroup:NodeGroup"


def selects(node_selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in node_selector.items())


def releases(plan):
    return {r.inputs["name"]: r for r in plan.find(RELEASE)}


def trainium_nodes(plan) -> list[tuple[list, dict]]:
    """(taints, labels) of the nodes of each Trainium group: a managed node group's, or a Karpenter pool's template."""
    groups = [
        (ng.inputs["taints"], ng.inputs["labels"]) for ng in plan.find(NG) if ng.inputs["amiType"] == "AL2023_x86_64_NEURON"
    ]
    for pool in plan.find(NODE_POOL):
        template = pool.inputs["spec"]["template"]
        groups.append((template["spec"]["taints"], template["metadata"]["labels"]))
    return groups


def test_plugins_tolerate_and_select_every_trainium_group(stack_plan):
    neuron = releases(stack_plan)["neuron-device-plugin"].inputs["values"]["devicePlugin"]
    assert trainium_nodes(stack_plan)
    for taints, labels in trainium_nodes(stack_plan):
        for taint in taints:
            assert tolerates(neuron["tolerations"], taint)
        assert selects(neuron["nodeSelector"], labels)


@pytest.mark.parametrize("provisioning", ["managed", "karpenter"])
def test_efa_plugin_lands_on_efa_nodes_only(provisioning):
    sizes = {"minSize": 2, "desiredSize": 2} if provisioning == "managed" else {}
    groups = [{"name": "trn", "instanceType": "trn1.32xlarge", "provisioning": provisioning, "maxSize": 2, **sizes}]
    plan = evaluate("staging", trainiumNodeGroups=groups, teams=[], **offering("trn1.32xlarge"))
    efa = releases(plan)["efa-device-plugin"].inputs["values"]
    ((taints, labels),) = trainium_nodes(plan)
    assert all(tolerates(efa["tolerations"], taint) for taint in taints)
    assert selects(efa["nodeSelector"], labels)
    system = one([n for n in plan.find(NG) if n.inputs["amiType"] != "AL2023_x86_64_NEURON"])
    assert not selects(efa["nodeSelector"], system.inputs["labels"])
    small = {**groups[0], "name": "small", "instanceType": "trn1.2xlarge"}
    small_plan = evaluate("dev", trainiumNodeGroups=[small], teams=[], **offering("trn1.2xlarge"))  # trn1.2xlarge: no EFA
    ((_, small_labels),) = trainium_nodes(small_plan)
    assert not selects(releases(small_plan)["efa-device-plugin"].inputs["values"]["nodeSelector"], small_labels)


def test_plugins_do_not_select_system_nodes(stack_plan):
    neuron = releases(stack_plan)["neuron-device-plugin"].inputs["values"]["devicePlugin"]
    system = one([n for n in stack_plan.find(NG) if n.inputs["amiType"] != "AL2023_x86_64_NEURON"])
    assert not selects(neuron["nodeSelector"], system.inputs["labels"])


def test_charts_are_the_pinned_versions(stack_plan):
    found = {
        (r.inputs["chart"], r.inputs["version"], r.inputs.get("repositoryOpts", {}).get("repo")) for r in stack_plan.find(RELEASE)
    }
    pinned = {(c.chart, c.version, c.repository) for c in versions.HELM_CHARTS}
    assert found <= pinned
    karpenter = {versions.KARPENTER_CHART.chart, versions.KARPENTER_CRD_CHART.chart}
    assert {(c, v, r) for c, v, r in pinned if c not in karpenter} <= found  # Karpenter only where a pool is elastic
    assert bool(stack_plan.find(NODE_POOL)) == bool(karpenter & {c for c, _, _ in found})


def test_the_charts_problem_detector_and_scheduler_extension_stay_off(stack_plan):
    values = releases(stack_plan)["neuron-device-plugin"].inputs["values"]
    assert values["scheduler"]["enabled"] is False  # Volcano schedules every job; the extension would serve none
    # The node monitoring agent reports Neuron faults and node auto repair acts on them; no second repairer.
    assert values["npd"] == {"enabled": False}
    assert "neuron-healthcheck-system" not in {
        r.inputs["metadata"]["name"] for r in stack_plan.find("kubernetes:core/v1:Namespace")
    }


def test_efa_plugin_image_comes_from_the_stack_region(stack_plan):
    region = settings(stack_plan.stack).config["aws:region"]
    image = releases(stack_plan)["efa-device-plugin"].inputs["values"]["image"]["repository"]
    assert image.split(".")[3] == region and image.endswith("/eks/aws-efa-k8s-device-plugin")
    assert image.startswith(versions.EKS_IMAGE_REGISTRY_ACCOUNTS[region])


def test_every_catalog_region_has_an_eks_image_registry():
    assert set(catalog.REGIONS) <= set(versions.EKS_IMAGE_REGISTRY_ACCOUNTS)
