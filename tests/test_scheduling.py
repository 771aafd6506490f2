"""Scheduling: Volcano queues sized from provisioned Neuron capacity."""

from __future__ import annotations

import math

from support import evaluate, node_group_config, one

from trainium_eks import catalog, layout, versions

QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
NG = "aws:eks/nodeGroup:NodeGroup"


def provisioned_from_graph(plan) -> dict[str, int]:
    """Sum maximum nodes x per-node resources, reading instance types and sizes from the node groups in the graph."""
    totals = {layout.NEURON_DEVICE_RESOURCE: 0, layout.NEURON_CORE_RESOURCE: 0, layout.EFA_RESOURCE: 0}
    for ng in plan.find(NG):
        spec = catalog.INSTANCE_TYPES[ng.inputs["instanceTypes"][0]]
        if not spec.is_trainium:
            continue
        nodes = int(ng.inputs["scalingConfig"]["maxSize"])
        efa = layout.EFA_PRESENT_LABEL in ng.inputs["labels"]
        totals[layout.NEURON_DEVICE_RESOURCE] += nodes * spec.neuron_devices
        totals[layout.NEURON_CORE_RESOURCE] += nodes * spec.neuron_cores
        totals[layout.EFA_RESOURCE] += nodes * (spec.max_efa_interfaces if efa else 0)
    return totals


def test_queue_capability_never_exceeds_provisioned_capacity(stack_plan):
    provisioned = provisioned_from_graph(stack_plan)
    queues = stack_plan.find(QUEUE)
    assert queues
    for queue in queues:
        capability = queue.inputs["spec"]["capability"]
        assert "cpu" not in capability and "memory" not in capability
        assert capability, "a queue must be capped by accelerator capacity"
        for resource, amount in capability.items():
            assert 0 < amount <= provisioned[resource]


def test_queue_shares_split_the_capacity():
    queues = [{"name": "big", "weight": 3, "neuronShare": 0.75}, {"name": "small", "weight": 1, "neuronShare": 0.25}]
    plan = evaluate("staging", volcanoQueues=queues)
    provisioned = provisioned_from_graph(plan)
    by_name = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in plan.find(QUEUE)}
    for queue in queues:
        spec = by_name[queue["name"]]
        assert spec["weight"] == queue["weight"]
        assert spec["capability"][layout.NEURON_DEVICE_RESOURCE] == math.floor(
            provisioned[layout.NEURON_DEVICE_RESOURCE] * queue["neuronShare"]
        )


def test_scaling_a_node_group_resizes_the_queue():
    small = evaluate("staging", trainiumNodeGroups=[node_group_config("trn1-32xl", "trn1.32xlarge", size=2)])
    large = evaluate("staging", trainiumNodeGroups=[node_group_config("trn1-32xl", "trn1.32xlarge", size=4)])
    cap = lambda plan: one(plan.find(QUEUE)).inputs["spec"]["capability"][layout.NEURON_DEVICE_RESOURCE]  # noqa: E731
    assert cap(large) == 2 * cap(small)


def test_queues_wait_for_volcano_and_volcano_is_pinned(stack_plan):
    volcano = one([r for r in stack_plan.find("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "volcano"])
    assert volcano.inputs["version"] == versions.VOLCANO_CHART.version
    assert volcano.inputs["values"]["custom"]["default_ns"] == {layout.NODE_ROLE_LABEL: layout.SYSTEM_NODE_ROLE}
    for queue in stack_plan.find(QUEUE):
        assert volcano.urn in queue.dependencies


def test_the_job_namespace_enforces_baseline_and_warns_at_restricted(stack_plan):
    (namespace,) = [n for n in stack_plan.find("kubernetes:core/v1:Namespace") if n.name.endswith("-jobs")]
    labels = namespace.inputs["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
    cluster_version = stack_plan.find("eks:index:Cluster")[0].inputs["version"]
    assert labels["pod-security.kubernetes.io/enforce-version"] == f"v{cluster_version}"
