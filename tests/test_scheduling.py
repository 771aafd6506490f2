"""Scheduling: Volcano queues sized from provisioned Neuron capacity."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from job_outputs import TWO_GENERATIONS
from support import evaluate, node_group_config, offering, one, one_group

from trainium_eks import catalog, hardware, layout, tokens, versions
from trainium_eks.contract import PlatformContract

pytestmark = pytest.mark.stacks

QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
NG = "aws:eks/nodeGroup:NodeGroup"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def trainium_groups_in(plan):
    """(instance type, maximum nodes, labels) of each Trainium group in the graph: node groups and Karpenter pools."""
    for ng in plan.find(NG):
        yield ng.inputs["instanceTypes"][0], int(ng.inputs["scalingConfig"]["maxSize"]), ng.inputs["labels"]
    for pool in plan.find(NODE_POOL):
        template = pool.inputs["spec"]["template"]
        (instance_type,) = next(r["values"] for r in template["spec"]["requirements"] if r["key"] == INSTANCE_TYPE)
        nodes = int(pool.inputs["spec"]["limits"]["cpu"]) // catalog.INSTANCE_TYPES[instance_type].vcpus
        yield instance_type, nodes, template["metadata"]["labels"]


def provisioned_from_graph(plan) -> dict[str, int]:
    """Sum maximum nodes x per-node resources, reading instance types and sizes from the Trainium groups in the graph."""
    totals = {layout.NEURON_DEVICE_RESOURCE: 0, layout.NEURON_CORE_RESOURCE: 0, layout.EFA_RESOURCE: 0}
    for instance_type, nodes, labels in trainium_groups_in(plan):
        spec = catalog.INSTANCE_TYPES[instance_type]
        if not spec.is_trainium:
            continue
        efa = layout.EFA_PRESENT_LABEL in labels
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
    plan = evaluate("staging", **one_group("trn1.32xlarge", maxSize=4), volcanoQueues=queues)  # a quarter is one node
    groups = list(trainium_groups_in(plan))
    by_name = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in plan.find(QUEUE)}
    for queue in queues:
        spec = by_name[queue["name"]]
        assert spec["weight"] == queue["weight"]
        # A share of each group in whole nodes, at each node's devices.
        whole_nodes = sum(
            math.floor(nodes * queue["neuronShare"]) * catalog.INSTANCE_TYPES[instance_type].neuron_devices
            for instance_type, nodes, _ in groups
        )
        assert spec["capability"][layout.NEURON_DEVICE_RESOURCE] == whole_nodes > 0
    total = sum(spec["capability"][layout.NEURON_DEVICE_RESOURCE] for spec in by_name.values())
    assert total <= provisioned_from_graph(plan)[layout.NEURON_DEVICE_RESOURCE]


def test_scaling_a_node_group_resizes_the_queue():
    fixture = {"volcanoQueues": [{"name": "trainium"}], "teams": [], **offering("trn1.32xlarge")}
    small = evaluate("staging", trainiumNodeGroups=[node_group_config("trn1-32xl", "trn1.32xlarge", size=2)], **fixture)
    large = evaluate("staging", trainiumNodeGroups=[node_group_config("trn1-32xl", "trn1.32xlarge", size=4)], **fixture)
    cap = lambda plan: one(plan.find(QUEUE, "trainium-scheduling-queue-trainium")).inputs["spec"]["capability"][  # noqa: E731
        layout.NEURON_DEVICE_RESOURCE
    ]
    assert cap(large) == 2 * cap(small)


def test_queues_wait_for_volcano_and_volcano_is_pinned(stack_plan):
    volcano = one([r for r in stack_plan.find("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "volcano"])
    assert volcano.inputs["version"] == versions.VOLCANO_CHART.version
    assert volcano.inputs["values"]["custom"]["default_ns"] == {layout.NODE_ROLE_LABEL: layout.SYSTEM_NODE_ROLE}
    queues = stack_plan.find(QUEUE)
    assert queues
    for queue in queues:
        assert volcano.urn in queue.dependencies


def test_the_job_namespace_enforces_baseline_and_warns_at_restricted(stack_plan):
    (namespace,) = [n for n in stack_plan.find("kubernetes:core/v1:Namespace") if n.name.endswith("-jobs")]
    labels = namespace.inputs["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
    cluster_version = stack_plan.find("eks:index:Cluster")[0].inputs["version"]
    assert labels["pod-security.kubernetes.io/enforce-version"] == f"v{cluster_version}"


def scheduler_config(plan) -> dict:
    volcano = one([r for r in plan.find("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "volcano"])
    return yaml.safe_load(volcano.inputs["values"]["custom"]["scheduler_config_override"])


def test_volcano_creates_a_waiting_jobs_pods_so_karpenter_sees_them_and_still_gangs(stack_plan):
    """Without the enqueue action a PodGroup goes Inqueue at once and the job controller creates the pods, which stay
    Unschedulable until Karpenter's node joins; gang still holds every pod back until minAvailable fit; proportion still
    caps each queue at its capability."""
    config = scheduler_config(stack_plan)
    actions = [a.strip() for a in config["actions"].split(",")]
    assert "enqueue" not in actions and actions[0] == "allocate"
    plugins = [[p["name"] for p in tier["plugins"]] for tier in config["tiers"]]
    assert "gang" in plugins[0]  # first tier: its JobReady decides whether allocate commits
    assert "proportion" in sum(plugins, [])  # the queues' capability
    assert "overcommit" not in sum(plugins, [])  # votes only in enqueue


def test_queues_and_team_quotas_count_both_generations_at_their_advertised_neuroncores():
    """A stack of a trn1 and a trn2 group: the platform's queue and each team's queue and quota hold their share of each
    group in whole nodes, each node at the devices, EFA interfaces and NeuronCores it advertises, trn2's at the cores of
    its default LNC (64 of its 128 physical cores at LNC=2), never the physical count."""
    teams = [
        {"name": "alpha", "neuronShare": 0.5, "principalArns": ["arn:aws:iam::111122223333:role/alpha"]},
        {"name": "beta", "neuronShare": 0.5, "principalArns": ["arn:aws:iam::111122223333:role/beta"]},
    ]
    queues = [{"name": "trainium", "weight": 1, "neuronShare": 1.0}]
    plan = evaluate("staging", **{**TWO_GENERATIONS, "teams": teams, "volcanoQueues": queues})
    groups = [(catalog.INSTANCE_TYPES[g["instanceType"]], g["maxSize"]) for g in TWO_GENERATIONS["trainiumNodeGroups"]]
    assert {spec.generation for spec, _ in groups} == {"trn1", "trn2"}

    def advertised(spec: hardware.InstanceType) -> dict[str, int]:
        return {
            layout.NEURON_DEVICE_RESOURCE: spec.neuron_devices,
            layout.NEURON_CORE_RESOURCE: spec.neuron_cores_at(hardware.GENERATIONS[spec.generation].default_lnc),
            layout.EFA_RESOURCE: spec.max_efa_interfaces,
        }

    assert sum(nodes * advertised(spec)[layout.NEURON_CORE_RESOURCE] for spec, nodes in groups) < sum(
        nodes * spec.physical_neuron_cores for spec, nodes in groups
    )  # trn2's LNC=2 halves its count

    def share(fraction: float) -> dict:
        """Whole nodes of each group: floor(fraction x maxSize) nodes times what one node advertises."""
        return {
            resource: sum(math.floor(fraction * nodes) * advertised(spec)[resource] for spec, nodes in groups)
            for resource in advertised(groups[0][0])
        }

    assert provisioned_from_graph(plan) == share(1)
    capabilities = {q.inputs["metadata"]["name"]: q.inputs["spec"]["capability"] for q in plan.find(QUEUE)}
    assert capabilities["trainium"] == share(1)
    contract = PlatformContract.from_outputs(json.loads(json.dumps(plan.outputs)))
    assert dict(contract.volcano_queues[0].capability) == share(1)
    for team in teams:
        published = contract.team(team["name"])
        assert dict(published.quota) == capabilities[published.queue] == share(team["neuronShare"])
        quotas = plan.find(tokens.K8S_RESOURCE_QUOTA)
        (quota,) = [r.inputs for r in quotas if r.inputs["metadata"]["namespace"] == published.namespace]
        assert quota["spec"]["hard"] == {f"requests.{resource}": str(amount) for resource, amount in published.quota.items()}
        for spec, _ in groups:  # every whole node the team is entitled to fits its quota on every resource
            assert all(published.quota[resource] >= amount for resource, amount in advertised(spec).items())
