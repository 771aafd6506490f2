"""Device plugins: pinned charts, scheduled only on Trainium nodes, tolerating exactly the taint those nodes carry."""

from __future__ import annotations

from support import evaluate, one, settings

from policies.rules.trainium import tolerates
from trainium_eks import catalog, versions

RELEASE = "kubernetes:helm.sh/v3:Release"
NG = "aws:eks/nodeGroup:NodeGroup"


def selects(node_selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in node_selector.items())


def releases(plan):
    return {r.inputs["name"]: r for r in plan.find(RELEASE)}


def trainium_node_groups(plan):
    return [ng for ng in plan.find(NG) if ng.inputs["amiType"] == "AL2023_x86_64_NEURON"]


def test_plugins_tolerate_and_select_every_trainium_node_group(stack_plan):
    neuron = releases(stack_plan)["neuron-device-plugin"].inputs["values"]["devicePlugin"]
    for ng in trainium_node_groups(stack_plan):
        for taint in ng.inputs["taints"]:
            assert tolerates(neuron["tolerations"], taint)
        assert selects(neuron["nodeSelector"], ng.inputs["labels"])


def test_efa_plugin_lands_on_efa_nodes_only():
    plan = evaluate("staging")
    efa = releases(plan)["efa-device-plugin"].inputs["values"]
    (ng,) = trainium_node_groups(plan)
    assert all(tolerates(efa["tolerations"], taint) for taint in ng.inputs["taints"])
    assert selects(efa["nodeSelector"], ng.inputs["labels"])
    system = one([n for n in plan.find(NG) if n.inputs["amiType"] != "AL2023_x86_64_NEURON"])
    assert not selects(efa["nodeSelector"], system.inputs["labels"])
    dev_plan = evaluate("dev")  # trn1.2xlarge has no EFA: the plugin selects none of its nodes
    (small,) = trainium_node_groups(dev_plan)
    assert not selects(releases(dev_plan)["efa-device-plugin"].inputs["values"]["nodeSelector"], small.inputs["labels"])


def test_plugins_do_not_select_system_nodes(stack_plan):
    neuron = releases(stack_plan)["neuron-device-plugin"].inputs["values"]["devicePlugin"]
    system = one([n for n in stack_plan.find(NG) if n.inputs["amiType"] != "AL2023_x86_64_NEURON"])
    assert not selects(neuron["nodeSelector"], system.inputs["labels"])


def test_charts_are_the_pinned_versions(stack_plan):
    found = {
        (r.inputs["chart"], r.inputs["version"], r.inputs.get("repositoryOpts", {}).get("repo")) for r in stack_plan.find(RELEASE)
    }
    pinned = {(c.chart, c.version, c.repository) for c in versions.HELM_CHARTS}
    assert found == pinned


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
