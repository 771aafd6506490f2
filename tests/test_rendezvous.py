"""Rendezvous: an etcd cluster (v2 API) whose members each advertise their own URL, so clients fail over.

The plan tests read the StatefulSet and Services each stack deploys; the loopback tests start that very
topology with real etcd members (``jobs.local_etcd``) and ask it what a client would.
"""

from __future__ import annotations

import json

import pytest
from support import STACKS, by_urn, evaluate, one, settings

from jobs.local_etcd import LocalEtcd
from trainium_eks import config, layout, versions

pytestmark = pytest.mark.stacks


def configured_members(stack: str) -> int:
    """etcdMembers as the stack file sets it (or Pulumi.yaml's default)."""
    return int(settings(stack).config["trainium-eks:etcdMembers"])


def etcd_parts(plan):
    statefulset = one(plan.find("kubernetes:apps/v1:StatefulSet"))
    services = {s.inputs["metadata"]["name"]: s for s in plan.find("kubernetes:core/v1:Service")}
    return statefulset, services["etcd"], services["etcd-members"]


def flag(container: dict, name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in container["args"] if a.startswith(f"--{name}=")]
    return value


def test_each_stack_runs_the_member_count_it_configures(stack_plan):
    statefulset, _, _ = etcd_parts(stack_plan)
    assert statefulset.inputs["spec"]["replicas"] == configured_members(stack_plan.stack)
    (container,) = statefulset.inputs["spec"]["template"]["spec"]["containers"]
    assert len(flag(container, "initial-cluster").split(",")) == configured_members(stack_plan.stack)


def test_etcd_is_pinned_3_5_with_the_v2_api(stack_plan):
    statefulset, _, _ = etcd_parts(stack_plan)
    (container,) = statefulset.inputs["spec"]["template"]["spec"]["containers"]
    assert container["image"] == versions.ETCD_IMAGE and ":v3.5." in container["image"]
    assert "--enable-v2=true" in container["args"]


def test_members_advertise_their_own_stable_urls_behind_a_headless_service(stack_plan):
    statefulset, client, members = etcd_parts(stack_plan)
    spec = statefulset.inputs["spec"]
    namespace = stack_plan.outputs["jobNamespace"]
    assert spec["serviceName"] == "etcd-members" and members.inputs["spec"]["clusterIP"] == "None"
    assert members.inputs["spec"]["publishNotReadyAddresses"] is True  # peers resolve before quorum
    assert spec["podManagementPolicy"] == "Parallel"  # members need each other to become ready
    (container,) = spec["template"]["spec"]["containers"]
    advertised = flag(container, "advertise-client-urls")
    assert advertised == f"http://$(POD_NAME).etcd-members.{namespace}.svc.cluster.local:{layout.ETCD_CLIENT_PORT}"
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in container["env"]
    # Jobs reach the ready members through the client Service named in the outputs.
    host, port = stack_plan.outputs["etcdEndpoint"].rsplit(":", 1)
    assert host == f"etcd.{namespace}.svc.cluster.local" and int(port) == layout.ETCD_CLIENT_PORT
    labels = spec["template"]["metadata"]["labels"]
    assert client.inputs["spec"]["selector"] == members.inputs["spec"]["selector"] == labels


def test_members_spread_one_per_system_node_with_probes_and_their_own_encrypted_volume(stack_plan):
    statefulset, _, _ = etcd_parts(stack_plan)
    pod = statefulset.inputs["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == statefulset.inputs["spec"]["template"]["metadata"]["labels"]
    assert pod["nodeSelector"] == {layout.NODE_ROLE_LABEL: layout.SYSTEM_NODE_ROLE}
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert "tcpSocket" in container["livenessProbe"]  # losing quorum must not restart every member
    assert container["resources"]["limits"] and container["resources"]["requests"]
    (claim,) = statefulset.inputs["spec"]["volumeClaimTemplates"]
    storage_class = one(stack_plan.find("kubernetes:storage.k8s.io/v1:StorageClass"))
    assert claim["spec"]["storageClassName"] == storage_class.inputs["metadata"]["name"]
    assert storage_class.inputs["parameters"] == {"type": "gp3", "encrypted": "true"}


def test_a_drain_never_takes_the_majority_and_etcd_mounts_no_api_token(stack_plan):
    statefulset, _, _ = etcd_parts(stack_plan)
    members = statefulset.inputs["spec"]["replicas"]
    budgets = stack_plan.find("kubernetes:policy/v1:PodDisruptionBudget")
    if members == 1:
        assert budgets == []  # nothing to keep: dev accepts that a drain interrupts its jobs
    else:
        (budget,) = budgets
        assert budget.inputs["spec"]["minAvailable"] == members // 2 + 1
        assert budget.inputs["spec"]["selector"]["matchLabels"] == statefulset.inputs["spec"]["template"]["metadata"]["labels"]
        assert budget.inputs["metadata"]["namespace"] == statefulset.inputs["metadata"]["namespace"]
    assert statefulset.inputs["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_only_the_job_namespace_and_the_teams_reach_etcd_and_the_vpc_cni_enforces_it(stack_plan):
    statefulset, _, _ = etcd_parts(stack_plan)
    (policy,) = [
        p for p in stack_plan.find("kubernetes:networking.k8s.io/v1:NetworkPolicy") if p.inputs["metadata"]["name"] == "etcd"
    ]
    spec = policy.inputs["spec"]
    assert spec["podSelector"]["matchLabels"] == statefulset.inputs["spec"]["template"]["metadata"]["labels"]
    *clients, peers = spec["ingress"]
    namespaces = [stack_plan.outputs["jobNamespace"], *(team["namespace"] for team in stack_plan.outputs["teams"])]
    for rule, namespace in zip(clients, namespaces, strict=True):
        assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}]
        assert rule["ports"] == [{"port": layout.ETCD_CLIENT_PORT, "protocol": "TCP"}]
    assert peers["from"] == [{"podSelector": {"matchLabels": spec["podSelector"]["matchLabels"]}}]
    (cni,) = [a for a in stack_plan.find("aws:eks/addon:Addon") if a.inputs["addonName"] == "vpc-cni"]
    assert json.loads(cni.inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}


def test_every_member_has_a_system_node_of_its_own(stack_plan):
    statefulset, _, _ = etcd_parts(stack_plan)
    system_nodes = [
        g
        for g in stack_plan.find("aws:eks/nodeGroup:NodeGroup")
        if g.inputs["labels"].get(layout.NODE_ROLE_LABEL) == layout.SYSTEM_NODE_ROLE
    ]
    (group,) = system_nodes
    assert statefulset.inputs["spec"]["replicas"] <= group.inputs["scalingConfig"]["minSize"]


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"etcdMembers": 2}, "2 is not 1, 3 or 5"),
        ({"etcdMembers": 5}, "5 members but systemNodeMinSize is 3"),
    ],
)
def test_member_counts_that_cannot_keep_a_quorum_or_a_node_each_are_rejected(overrides, words):
    with pytest.raises(config.ConfigError, match=words) as caught:
        config.parse(settings("staging", **overrides).config, stack="staging")
    assert caught.value.key == "trainium-eks:etcdMembers"


@pytest.mark.parametrize("stack", STACKS)
def test_the_planned_topology_forms_a_cluster_whose_clients_learn_every_member(stack, tmp_path):
    statefulset, _, _ = etcd_parts(evaluate(stack))
    cluster = LocalEtcd.from_statefulset(statefulset.inputs, tmp_path).start()  # waits for every member's readiness probe
    try:
        client = cluster.client(cluster.members[0], allow_reconnect=True)  # as torch's etcd-v2 backend creates it
        assert sorted(client.machines) == sorted(cluster.client_url(m) for m in cluster.members)
        client.write("/trainium-eks/probe", "ok")
        # A quorum read: a follower answers plain v2 reads from its own log, which may not hold the write yet.
        assert cluster.client(cluster.members[-1]).read("/trainium-eks/probe", quorum=True).value == "ok"
    finally:
        cluster.stop()


def test_the_members_claims_go_with_the_stateful_set_while_the_volume_driver_still_runs(stack_plan):
    statefulset, _, _ = etcd_parts(stack_plan)
    assert statefulset.inputs["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Delete",  # no EBS volume outlives the stack
        "whenScaled": "Retain",  # a member that comes back finds its data
    }
    ebs_csi = one([a for a in stack_plan.find("aws:eks/addon:Addon") if a.inputs["addonName"] == versions.EBS_CSI_ADDON])
    assert ebs_csi in depends_on_transitively(stack_plan, statefulset)  # so the destroy deletes the StatefulSet first


def depends_on_transitively(plan, resource):
    records = by_urn(plan)
    seen, pending = set(), list(resource.dependencies)
    while pending:
        urn = pending.pop()
        if urn not in seen:
            seen.add(urn)
            pending.extend(records[urn].dependencies)
    return [records[urn] for urn in seen]
