"""The IAM role a node of the platform runs as, managed node groups' and Karpenter's nodes alike.

What every EKS node needs: join the cluster, pull images (EKS's node IAM role guide now names PullOnly, which
cannot list or describe repositories), be reachable by SSM (no SSH). The VPC CNI's permissions are not here:
the vpc-cni add-on gets them through its own service-account role, so pods cannot borrow them from the node.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

NODE_MANAGED_POLICIES = {
    "worker": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "ecr": "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
    "ssm": "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
}


def node_role(
    name: str, *, description: str, tags: Mapping[str, str], parent: pulumi.Resource
) -> tuple[aws.iam.Role, list[aws.iam.RolePolicyAttachment]]:
    """A role EC2 instances assume, with the node policies attached (``<name>`` and ``<name>-<policy>``)."""
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(
        name,
        description=description,
        assume_role_policy=aws.iam.get_policy_document_output(
            statements=[
                {"actions": ["sts:AssumeRole"], "principals": [{"type": "Service", "identifiers": ["ec2.amazonaws.com"]}]}
            ],
            opts=pulumi.InvokeOutputOptions(parent=parent),
        ).json,
        tags=dict(tags),
        opts=child,
    )
    attachments = [
        aws.iam.RolePolicyAttachment(f"{name}-{short}", role=role.name, policy_arn=arn, opts=child)
        for short, arn in NODE_MANAGED_POLICIES.items()
    ]
    return role, attachments
