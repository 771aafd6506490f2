"""The system pods against the system nodes at their minimum size: what `preflight plan` prints (text and --json), the
policy `system-pods-fit-system-nodes`, and the packing's rules (replicas, one per node, DaemonSets on every node)."""

from __future__ import annotations

import json

import pytest
from support import evaluate, run_preflight, stack_copy

from plan_graph import system_fit
from plan_graph.graph import UNKNOWN, Graph
from plan_graph.system_fit import Requests
from policies.rules.system_pods import system_pods_fit
from preflight import analysis
from trainium_eks import catalog

ELASTIC = [{"name": "trn1-2xl", "instanceType": "trn1.2xlarge", "provisioning": "karpenter", "maxSize": 2}]


def plan_with(**overrides) -> dict:
    """A fixture stack with a Karpenter pool (two controller replicas, one per node) and the given system nodes."""
    return evaluate("dev", fixture=True, trainiumNodeGroups=ELASTIC, etcdMembers=1, **overrides).to_json()


def karpenter(plan: dict) -> dict:
    (release,) = [
        r
        for r in plan["resources"]
        if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"].get("chart", "").endswith("/karpenter")
    ]
    return release["inputs"]["values"]


def test_the_kubelet_keeps_part_of_every_system_type():
    for spec in (s for s in catalog.INSTANCE_TYPES.values() if not s.is_trainium):
        room = system_fit.allocatable(spec)
        assert 0 < room.millicpu < spec.vcpus * 1000 and 0 < room.memory_mib < spec.memory_gib * 1024
        assert system_fit.kube_reserved_millicpu(spec) >= 60  # at least 6 % of the first core


def test_a_fitting_stack_is_placed_and_printed_in_text_and_json(tmp_path):
    def edit(config):
        config["trainium-eks:systemNodeInstanceType"] = "m6i.2xlarge"
        config["trainium-eks:systemNodeMinSize"] = 2

    path = stack_copy(tmp_path, "dev", edit, fixture=True)
    text = run_preflight("plan", "dev", "--stack-file", path)
    assert text.returncode == 0, text.stderr
    assert "System pods on 2 x m6i.2xlarge (systemNodeMinSize;" in text.stdout and "): fit" in text.stdout
    fit = json.loads(run_preflight("plan", "dev", "--stack-file", path, "--json").stdout)["systemFit"]
    assert fit["fits"] and fit["nodes"] == 2 and len(fit["requestedPerNode"]) == 2
    assert all(n["millicpu"] <= fit["allocatableMillicpu"] for n in fit["requestedPerNode"])


def test_one_node_cannot_hold_two_replicas_that_require_a_node_each():
    plan = plan_with(systemNodeInstanceType="m6i.2xlarge", systemNodeMinSize=1, systemNodeDesiredSize=2)
    graph = Graph.from_records(plan["resources"])
    fit = system_fit.system_fit(graph)
    assert not fit.fits and fit.unplaced == ("karpenter controller (2 of 2)",)
    (violation,) = system_pods_fit(graph, {})
    assert "karpenter controller (2 of 2)" in violation.message and "systemNodeMinSize" in violation.message
    assert "do NOT fit" in "\n".join(system_fit.summary(analysis.annotate(plan)["systemFit"]))


def test_requests_larger_than_a_node_are_refused_and_a_larger_type_holds_them():
    small = plan_with(systemNodeInstanceType="m6i.large", systemNodeMinSize=2)
    allocatable = system_fit.allocatable(catalog.INSTANCE_TYPES["m6i.large"]).millicpu
    karpenter(small)["controller"]["resources"]["requests"]["cpu"] = f"{allocatable + 1:.0f}m"
    assert not system_fit.system_fit(Graph.from_records(small["resources"])).fits
    large = plan_with(systemNodeInstanceType="m6i.2xlarge", systemNodeMinSize=2)
    karpenter(large)["controller"]["resources"]["requests"]["cpu"] = f"{allocatable + 1:.0f}m"
    assert system_fit.system_fit(Graph.from_records(large["resources"])).fits


def test_a_daemonset_counts_on_every_node_and_a_trainium_workload_on_none():
    plan = plan_with(systemNodeInstanceType="m6i.2xlarge", systemNodeMinSize=3, systemNodeDesiredSize=3)
    before = system_fit.system_fit(Graph.from_records(plan["resources"]))
    pod = {"containers": [{"name": "agent", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
    for selector, added in (({}, Requests(100, 128)), ({"trainium-eks/node-role": "trainium"}, Requests())):
        daemonset = {
            "urn": f"urn:pulumi:dev::trainium-eks::kubernetes:apps/v1:DaemonSet::agent{len(selector)}",
            "type": "kubernetes:apps/v1:DaemonSet",
            "name": f"agent{len(selector)}",
            "inputs": {"metadata": {"name": "agent"}, "spec": {"template": {"spec": {**pod, "nodeSelector": selector}}}},
        }
        after = system_fit.system_fit(Graph.from_records([*plan["resources"], daemonset]))
        assert sum(n.millicpu for n in after.loads) - sum(n.millicpu for n in before.loads) == 3 * added.millicpu


# Values of the Karpenter release (``karpenter(plan)``) as a hand-edited plan may give them: where each is set, and
# the value
UNREADABLE = {
    "a cpu request of x": (("controller", "resources", "requests", "cpu"), "x"),
    "requests as a string": (("controller", "resources", "requests"), "1 cpu"),
    "a negative memory request": (("controller", "resources", "requests", "memory"), "-1Gi"),
    "replicas as text": (("replicas",), "two"),
    "replicas beyond any node group": (("replicas",), 1e300),
    "half a replica": (("replicas",), 1.5),
    "controller as a list": (("controller",), ["resources"]),
}


def _set(values: dict, path: tuple[str, ...], value) -> None:
    *steps, last = path
    for step in steps:
        values = values.setdefault(step, {})
    values[last] = value


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_a_value_the_fit_cannot_read_fails_it_and_the_policy_names_it(case):
    path, value = UNREADABLE[case]
    plan = plan_with(systemNodeInstanceType="m6i.2xlarge", systemNodeMinSize=2)
    _set(karpenter(plan), path, value)
    graph = Graph.from_records(plan["resources"])
    fit = system_fit.system_fit(graph)
    assert not fit.fits and len(fit.unreadable) == 1 and repr(value) in fit.unreadable[0], fit.unreadable
    (violation,) = system_pods_fit(graph, {})
    assert "cannot be judged" in violation.message and repr(value) in violation.message
    assert "cannot read" in system_fit.summary(fit.to_json())[0]


@pytest.mark.parametrize("size", ["2 nodes", -1.0, None])
def test_a_minimum_size_that_is_no_count_fails_the_fit(size):
    plan = plan_with(systemNodeInstanceType="m6i.2xlarge", systemNodeMinSize=2)
    group = system_fit.system_fit(Graph.from_records(plan["resources"])).node_group
    (record,) = [r for r in plan["resources"] if r["urn"] == group.urn]
    record["inputs"]["scalingConfig"]["minSize"] = size
    (violation,) = system_pods_fit(Graph.from_records(plan["resources"]), {})
    assert "scalingConfig.minSize" in violation.message and "cannot be judged" in violation.message


def test_a_value_the_preview_does_not_know_skips_the_fit():
    plan = plan_with(systemNodeInstanceType="m6i.large", systemNodeMinSize=1)
    graph = Graph.from_records(plan["resources"])
    assert list(system_pods_fit(graph, {}))  # two replicas that require a node each, on one node
    karpenter(plan)["controller"]["resources"]["requests"]["cpu"] = UNKNOWN
    graph = Graph.from_records(plan["resources"])
    assert system_fit.system_fit(graph) is None and not list(system_pods_fit(graph, {}))
