"""The cluster's nodes run with least privilege: the node role can join, pull images and be managed, and the
VPC CNI's permissions live in the vpc-cni add-on's own service-account role, in place before any node joins."""

from __future__ import annotations

import json

from support import one

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
    for group in stack_plan.find("aws:eks/nodeGroup:NodeGroup"):
        assert cni.urn in group.dependencies, group.name
