"""The clean-up rules on hand-built graphs, for what the mutation table (tests/cleanup_mutations.py) does not reach:
a pool that depends on Karpenter through its parent chain, a StatefulSet whose class name is unknown in a preview, and
a cluster whose control-plane logging is off."""

from __future__ import annotations

from plan_graph.graph import UNKNOWN, Graph, Node
from policies.rules import cleanup
from trainium_eks import tokens


def release() -> Node:
    return Node("urn:release", tokens.HELM_RELEASE, "karpenter", {"chart": "oci://public.ecr.aws/karpenter/karpenter"})


def test_a_pool_whose_parent_depends_on_the_release_is_outlived_by_it():
    karpenter = release()
    group = Node("urn:group", "trainium-eks:node:Group", "group", {}, custom=False, dependencies=[karpenter])
    pool = Node("urn:pool", tokens.KARPENTER_NODE_POOL, "pool", {}, parent=group)
    violations = list(cleanup.pools_outlived_by_karpenter(Graph([karpenter, group, pool]), {}))
    assert [v.urn for v in violations] == [karpenter.urn] * 3  # only the release's own needs are missing here


def stateful_set(class_name, linked: list[Node], policy: dict | None = None) -> Node:
    spec = {"replicas": 3.0, "volumeClaimTemplates": [{"spec": {"storageClassName": class_name}}]}
    if policy is not None:
        spec["persistentVolumeClaimRetentionPolicy"] = policy
    return Node("urn:sts", tokens.K8S_STATEFUL_SET, "etcd", {"spec": spec}, property_dependencies={"spec": linked})


def test_a_class_unknown_in_a_preview_is_found_through_the_spec_it_was_computed_from():
    gp3 = Node("urn:class", tokens.K8S_STORAGE_CLASS, "gp3", {"metadata": {"name": UNKNOWN}, "reclaimPolicy": "Delete"})
    kept = stateful_set(UNKNOWN, [gp3])
    assert len(list(cleanup.claims_go_with_workload(Graph([gp3, kept]), {}))) == 1
    deleted = stateful_set(UNKNOWN, [gp3], {"whenDeleted": "Delete", "whenScaled": "Retain"})
    assert list(cleanup.claims_go_with_workload(Graph([gp3, deleted]), {})) == []


def test_a_cluster_that_sends_no_control_plane_logs_needs_no_log_group():
    cluster = Node("urn:eks", tokens.EKS_COMPONENT_CLUSTER, "eks", {"name": "c", "enabledClusterLogTypes": []}, custom=False)
    assert list(cleanup.control_plane_log_group(Graph([cluster]), {})) == []
    logging = Node("urn:eks", tokens.EKS_COMPONENT_CLUSTER, "eks", {"name": "c", "enabledClusterLogTypes": ["audit"]})
    assert cleanup.control_plane_log_group_missing(Graph([logging])) == ["/aws/eks/c/cluster"]
