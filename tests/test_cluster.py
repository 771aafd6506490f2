"""The cluster's nodes run with least privilege: the node role can join, pull images and be managed, and the
VPC CNI's permissions live in the vpc-cni add-on's own service-account role, in place before any node joins.
The node monitoring agent add-on reports node health where the stack asks for it. The control-plane logs go to a
log group the stack owns, with its retention, which the cluster's role cannot re-create."""

from __future__ import annotations

import json

import pytest
from support import evaluate, one, settings

from trainium_eks import config, versions

pytestmark = pytest.mark.stacks

NODE_POLICIES = {
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
}
CNI_POLICY = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"


def attachments_of(plan, role_name_part: str) -> set[str]:
    return {
        a.inputs["policyArn"]
        for a in plan.find("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if role_name_part in a.inputs["role"]
    }


def test_the_node_role_can_pull_images_but_holds_no_cni_permissions(stack_plan):
    assert attachments_of(stack_plan, "-node-") == NODE_POLICIES


def test_the_vpc_cni_add_on_runs_on_a_role_trusted_by_its_service_account_only(stack_plan):
    cni = one([a for a in stack_plan.find("aws:eks/addon:Addon") if a.inputs["addonName"] == "vpc-cni"])
    role = one([r for r in stack_plan.find("aws:iam/role:Role") if r.inputs.get("description") == "vpc-cni add-on"])
    assert cni.inputs["serviceAccountRoleArn"].rsplit("/", 1)[1].startswith(role.name)
    trust = json.loads(role.inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    subjects = [v for k, v in statement["Condition"]["StringEquals"].items() if k.endswith(":sub")]
    assert subjects == [["system:serviceaccount:kube-system:aws-node"]]
    assert attachments_of(stack_plan, "-vpc-cni-") == {CNI_POLICY}


def test_no_node_joins_before_the_vpc_cni_add_on_exists(stack_plan):
    cni = one([a for a in stack_plan.find("aws:eks/addon:Addon") if a.inputs["addonName"] == "vpc-cni"])
    groups = stack_plan.find("aws:eks/nodeGroup:NodeGroup")
    assert groups  # the system nodes' group at least
    for group in groups:
        assert cni.urn in group.dependencies, group.name


ADDON = "aws:eks/addon:Addon"


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_the_node_monitoring_agent_runs_without_a_role_once_nodes_exist(stack):
    plan = evaluate(stack)
    agent = one([a for a in plan.find(ADDON) if a.inputs["addonName"] == versions.NODE_MONITORING_AGENT_ADDON])
    assert "serviceAccountRoleArn" not in agent.inputs  # the add-on needs no AWS permissions
    system = one([n for n in plan.find("aws:eks/nodeGroup:NodeGroup") if n.name.endswith("-system")])
    assert system.urn in agent.dependencies  # its DaemonSet, and so the add-on, is ready only on nodes


def test_the_node_monitoring_agent_can_be_left_out():
    plan = evaluate("staging", nodeMonitoringAgent=False, nodeRepair=False)
    assert versions.NODE_MONITORING_AGENT_ADDON not in {a.inputs["addonName"] for a in plan.find(ADDON)}


CONTROL_PLANE_LOGS = "aws:cloudwatch/logGroup:LogGroup"


def test_the_control_plane_log_group_is_the_stacks_with_its_retention_and_comes_before_the_cluster(stack_plan):
    cluster = one(stack_plan.find("eks:index:Cluster"))
    name = f"/aws/eks/{cluster.inputs['name']}/cluster"
    group = one([g for g in stack_plan.find(CONTROL_PLANE_LOGS) if g.inputs["name"] == name])
    retention = int(settings(stack_plan.stack).config["trainium-eks:controlPlaneLogRetentionDays"])
    assert group.inputs["retentionInDays"] == retention
    # the name the component hands its aws:eks/cluster carries the dependency on the group
    assert group.urn in cluster.property_dependencies["name"]


def test_the_cluster_role_cannot_re_create_its_log_group(stack_plan):
    deny = one([p for p in stack_plan.find("aws:iam/rolePolicy:RolePolicy") if p.name.endswith("-no-log-group-creation")])
    (statement,) = json.loads(deny.inputs["policy"])["Statement"]
    assert statement == {"Effect": "Deny", "Action": ["logs:CreateLogGroup"], "Resource": "*"}
    cluster = one(stack_plan.find("eks:index:Cluster"))
    assert cluster.urn in deny.dependencies  # the role pulumi-eks made for this cluster


def test_a_retention_cloudwatch_logs_does_not_offer_is_refused_in_one_line():
    with pytest.raises(config.ConfigError, match="45 is not a CloudWatch Logs retention period") as caught:
        config.parse(settings("dev", controlPlaneLogRetentionDays=45).config, stack="dev")
    assert caught.value.key == "trainium-eks:controlPlaneLogRetentionDays"
