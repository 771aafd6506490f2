"""The journey of a job on elastic capacity: the launcher's Volcano Job, the queue that admits it, and the Karpenter
pool that must bring nodes for its pods, read together from one stack's plan (not from each part alone).

What Karpenter does with a pending pod is simulated here from its documented rules: it provisions only for a pod
whose PodScheduled condition is False with reason Unschedulable (kubernetes-sigs/karpenter v1.14.1
pkg/utils/pod/scheduling.go), from a NodePool whose template labels and requirements the pod's node selector
matches and whose taints the pod tolerates, for an instance type whose capacity holds the pod's requests
(aws.amazon.com/neuron from EC2's NeuronInfo; vpc.amazonaws.com/efa, with networkInterfaces set, the number of
efa-only interfaces: karpenter-provider-aws v1.14.1 pkg/providers/instancetype/types.go).
"""

from __future__ import annotations

import json

import pytest
from job_outputs import NO_EFA, TWO_EFA_NODES, launch_json, outputs_file, pod_templates, run_module
from support import STACKS, evaluate, offering, one, one_group, platform, run_preflight

from plan_graph.trainium_groups import tolerates
from policies.packs import PACKS
from preflight import check
from trainium_eks import catalog, layout, shares

pytestmark = pytest.mark.stacks

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
# The stacks whose first Trainium group is elastic (a job launches there by default).
ELASTIC_STACKS = [stack for stack in STACKS if platform(stack).trainium_node_groups[0].elastic]


def pool_for(plan, pod: dict) -> dict | None:
    """The NodePool Karpenter would provision from for ``pod``, or None when no pool matches it."""
    for pool in plan.find(NODE_POOL):
        template = pool.inputs["spec"]["template"]
        labels = dict(template["metadata"]["labels"])
        for requirement in template["spec"]["requirements"]:
            if requirement["operator"] == "In" and len(requirement["values"]) == 1:
                labels[requirement["key"]] = requirement["values"][0]
        selects = all(labels.get(key) == value for key, value in pod["nodeSelector"].items())
        tolerated = all(tolerates(pod["tolerations"], taint) for taint in template["spec"]["taints"])
        if selects and tolerated:
            return pool.inputs
    return None


def efa_capacity(plan, pool: dict) -> int:
    """What Karpenter gives a node of the pool's EC2NodeClass with networkInterfaces: one vpc.amazonaws.com/efa per
    efa-only interface."""
    name = pool["spec"]["template"]["spec"]["nodeClassRef"]["name"]
    spec = one([c for c in plan.find(NODE_CLASS) if c.inputs["metadata"]["name"] == name]).inputs["spec"]
    return sum(1 for i in spec.get("networkInterfaces", []) if i["interfaceType"] == "efa-only")


@pytest.mark.parametrize("stack", ELASTIC_STACKS)
def test_a_job_up_to_max_size_waits_for_nodes_its_pool_will_bring(tmp_path, stack):
    plan = evaluate(stack)
    path, outputs = outputs_file(tmp_path, stack)
    group = outputs["trainiumNodeGroups"][0]
    job = launch_json("--outputs", str(path), "--dryrun", "--json", "--nodes", str(int(group["maxSize"])))
    assert len(pod_templates(job)) == group["maxSize"]
    spec = catalog.INSTANCE_TYPES[group["instanceType"]]
    total_devices = 0
    for template in pod_templates(job):
        pod = template["spec"]
        pool = pool_for(plan, pod)
        assert pool is not None, f"no Karpenter pool matches {pod['nodeSelector']}: the job would wait forever"
        assert pool["metadata"]["name"] == group["name"]  # the pool of the group the job names
        requests = pod["containers"][0]["resources"]["requests"]
        assert int(requests[layout.NEURON_DEVICE_RESOURCE]) <= spec.neuron_devices
        assert int(requests.get(layout.EFA_RESOURCE, 0)) <= efa_capacity(plan, pool)
        # TorchX writes cpu in millicores and memory in megabytes (10**6 bytes).
        assert int(requests["cpu"].removesuffix("m")) <= spec.vcpus * 1000
        assert int(requests["memory"].removesuffix("M")) * 10**6 <= spec.memory_gib * 2**30
        # Karpenter never takes the node away while the pod runs.
        assert template["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
        total_devices += int(requests[layout.NEURON_DEVICE_RESOURCE])
    # The queue admits the job at the pool's full size (its capability comes from maxSize), and its pods exist to be
    # seen: Volcano runs without the enqueue action (test_scheduling.py).
    queue = one([q for q in plan.find(QUEUE) if q.inputs["metadata"]["name"] == job["spec"]["queue"]])
    assert total_devices <= queue.inputs["spec"]["capability"][layout.NEURON_DEVICE_RESOURCE]
    assert job["spec"]["minAvailable"] == len(pod_templates(job))  # the gang: all nodes or none


@pytest.mark.parametrize("stack", ELASTIC_STACKS)
def test_a_job_larger_than_the_pool_or_of_no_node_is_refused(tmp_path, stack):
    path, outputs = outputs_file(tmp_path, stack)
    most = int(outputs["trainiumNodeGroups"][0]["maxSize"])
    result = run_module("jobs.launch", "--outputs", str(path), "--dryrun", "--nodes", str(most + 1))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert f"grows to {most} nodes at most (maxSize)" in result.stderr
    for module in ("jobs.launch", "jobs.acceptance neuron-devices"):
        result = run_module(*module.split(), "--outputs", str(path), "--dryrun", "--nodes", "0")
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr


def test_a_managed_group_without_nodes_refuses_jobs_instead_of_printing_an_empty_one(tmp_path):
    def no_nodes(outputs):
        outputs["trainiumNodeGroups"][0].update(minSize=0, desiredSize=0)

    # A group large enough that each of the stack's queues holds one of its nodes (trainium_eks.shares).
    smallest_share = min(queue.neuron_share for queue in platform("prod").scheduling.queues)
    most = shares.smallest_max_size_for_a_node(smallest_share)
    managed = one_group("trn1.32xlarge", provisioning="managed", minSize=2, desiredSize=2, maxSize=max(2, most))
    path, _ = outputs_file(tmp_path, "prod", edit=no_nodes, **managed)
    for module in ("jobs.launch", "jobs.acceptance neuron-devices", "jobs.acceptance fsx-shared"):
        result = run_module(*module.split(), "--outputs", str(path), "--dryrun")
        assert result.returncode == 2 and "runs no node (desiredSize 0)" in result.stderr, (module, result.stderr)
    result = run_module("jobs.launch", "--outputs", str(path), "--dryrun", "--nodes", "9")
    assert result.returncode == 2


def test_acceptance_on_an_elastic_pool_checks_every_node_it_can_bring_and_the_nodes_asked(tmp_path):
    path, outputs = outputs_file(tmp_path, "staging", **TWO_EFA_NODES)
    most = int(outputs["trainiumNodeGroups"][0]["maxSize"])

    def completions(*args):
        result = run_module("jobs.acceptance", "neuron-devices", "--outputs", str(path), "--dryrun", "--json", *args)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["spec"]["completions"]

    assert completions() == most
    assert completions("--nodes", "1") == 1
    result = run_module("jobs.acceptance", "neuron-devices", "--outputs", str(path), "--dryrun", "--nodes", str(most + 1))
    assert result.returncode == 2 and "grows to" in result.stderr
    # Two-node EFA checks run on an elastic pool of two; a pool without EFA is refused in one line.
    assert run_module("jobs.acceptance", "efa-allreduce", "--outputs", str(path), "--dryrun").returncode == 0
    dev_path, _ = outputs_file(tmp_path, "dev", **NO_EFA)
    result = run_module("jobs.acceptance", "efa-bandwidth", "--outputs", str(dev_path), "--dryrun")
    assert result.returncode == 2 and "needs two or more EFA nodes" in result.stderr


def test_a_stack_with_both_kinds_shares_one_node_image_and_passes_the_topology_and_security_packs():
    groups = [
        {"name": "steady", "instanceType": "trn1n.32xlarge", "minSize": 2, "desiredSize": 2, "maxSize": 4},
        {"name": "burst", "instanceType": "trn1n.32xlarge", "provisioning": "karpenter", "maxSize": 4},
    ]
    plan = evaluate("prod", trainiumNodeGroups=groups, teams=[], **offering("trn1n.32xlarge"))
    assert plan.outputs["trainiumNodeGroupScaling"] == {
        "steady": {"provisioning": "managed"},
        "burst": {"provisioning": "karpenter", "idleMinutes": 30},
    }
    result = check.check_plan(plan.to_json(), check.load_policy_config("prod"), "prod.json")
    guarded = {p.name for pack in PACKS if pack.name != "cost-guard" for p in pack.policies}
    assert [(v.policy, v.message) for v in result.violations if v.policy in guarded] == []


def test_preflight_check_passes_every_shipped_stack_with_its_elastic_pools():
    result = run_preflight("check", *ELASTIC_STACKS)
    assert result.returncode == 0, result.stdout + result.stderr
