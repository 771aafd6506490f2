"""The Karpenter controller's IAM policies, as AWS's reference template writes them for Karpenter 1.14.

Source: aws/karpenter-provider-aws, website/content/en/v1.14/getting-started/getting-started-with-karpenter/
cloudformation.yaml (identical to the v1.14.1 tag's preview copy): six managed policies, scoped by the tags Karpenter
puts on what it creates (``kubernetes.io/cluster/<cluster>: owned``, ``eks:eks-cluster-name``, ``karpenter.sh/nodepool``,
``karpenter.k8s.aws/ec2nodeclass``) and by region. Five are here; the sixth, ZonalShiftPolicy
(``arc-zonal-shift:GetManagedResource``), serves ``settings.enableZonalShift``, which the platform leaves off (the
Trainium nodes live in one AZ by design), so the controller does not get it.
"""

from __future__ import annotations

import json

import pulumi

EC2_SERVICES = ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]
# The EC2 resources Karpenter launches and tags (AllowScopedEC2InstanceActionsWithTags, AllowScopedResourceCreationTagging).
LAUNCHED = ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")


def _document(*statements: dict) -> dict:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def controller_policies(
    *, region: str, cluster_name: str, node_role_arn: pulumi.Input[str], queue_arn: pulumi.Input[str]
) -> dict[str, pulumi.Output[str]]:
    """Policy name (the template's, without its ``KarpenterController`` prefix and cluster suffix) -> JSON document.
    The partition and account are the node role's."""
    documents = pulumi.Output.all(node_role_arn, queue_arn).apply(
        lambda arns: _controller_documents(region=region, cluster_name=cluster_name, node_role_arn=arns[0], queue_arn=arns[1])
    )
    return {name: documents.apply(lambda docs, name=name: json.dumps(docs[name], sort_keys=True)) for name in POLICY_NAMES}


POLICY_NAMES = (
    "NodeLifecyclePolicy",
    "IAMIntegrationPolicy",
    "EKSIntegrationPolicy",
    "InterruptionPolicy",
    "ResourceDiscoveryPolicy",
)


def _controller_documents(*, region: str, cluster_name: str, node_role_arn: str, queue_arn: str) -> dict[str, dict]:
    _, partition, _, _, account_id, _ = node_role_arn.split(":", 5)
    ec2 = f"arn:{partition}:ec2:{region}"
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster_name}": "owned"}
    requested = {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster_name}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
    }
    any_nodepool = {"aws:ResourceTag/karpenter.sh/nodepool": "*"}
    instance_profiles = f"arn:{partition}:iam::{account_id}:instance-profile/*"
    region_tag = "topology.kubernetes.io/region"
    documents = {
        "NodeLifecyclePolicy": _document(
            {
                "Sid": "AllowScopedEC2InstanceAccessActions",
                "Effect": "Allow",
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                "Resource": [
                    f"{ec2}::image/*",
                    f"{ec2}::snapshot/*",
                    f"{ec2}:*:security-group/*",
                    f"{ec2}:*:subnet/*",
                    f"{ec2}:*:capacity-reservation/*",
                    f"{ec2}:*:placement-group/*",
                ],
            },
            {
                "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
                "Effect": "Allow",
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                "Resource": f"{ec2}:*:launch-template/*",
                "Condition": {"StringEquals": owned, "StringLike": any_nodepool},
            },
            {
                "Sid": "AllowScopedEC2InstanceActionsWithTags",
                "Effect": "Allow",
                "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
                "Resource": [f"{ec2}:*:{kind}/*" for kind in LAUNCHED],
                "Condition": {"StringEquals": requested, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
            },
            {
                "Sid": "AllowScopedResourceCreationTagging",
                "Effect": "Allow",
                "Action": "ec2:CreateTags",
                "Resource": [f"{ec2}:*:{kind}/*" for kind in LAUNCHED],
                "Condition": {
                    "StringEquals": {**requested, "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedResourceTagging",
                "Effect": "Allow",
                "Action": "ec2:CreateTags",
                "Resource": f"{ec2}:*:instance/*",
                "Condition": {
                    "StringEquals": owned,
                    "StringLike": any_nodepool,
                    "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                    "ForAllValues:StringEquals": {"aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]},
                },
            },
            {
                "Sid": "AllowScopedDeletion",
                "Effect": "Allow",
                "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
                "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
                "Condition": {"StringEquals": owned, "StringLike": any_nodepool},
            },
        ),
        "IAMIntegrationPolicy": _document(
            {
                "Sid": "AllowPassingInstanceRole",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": node_role_arn,
                "Condition": {"StringEquals": {"iam:PassedToService": EC2_SERVICES}},
            },
            {
                "Sid": "AllowScopedInstanceProfileCreationActions",
                "Effect": "Allow",
                "Action": ["iam:CreateInstanceProfile"],
                "Resource": instance_profiles,
                "Condition": {
                    "StringEquals": {**requested, f"aws:RequestTag/{region_tag}": region},
                    "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileTagActions",
                "Effect": "Allow",
                "Action": ["iam:TagInstanceProfile"],
                "Resource": instance_profiles,
                "Condition": {
                    "StringEquals": {
                        **owned,
                        f"aws:ResourceTag/{region_tag}": region,
                        **requested,
                        f"aws:RequestTag/{region_tag}": region,
                    },
                    "StringLike": {
                        "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                        "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    },
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileActions",
                "Effect": "Allow",
                "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
                "Resource": instance_profiles,
                "Condition": {
                    "StringEquals": {**owned, f"aws:ResourceTag/{region_tag}": region},
                    "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
        ),
        "EKSIntegrationPolicy": _document(
            {
                "Sid": "AllowAPIServerEndpointDiscovery",
                "Effect": "Allow",
                "Action": "eks:DescribeCluster",
                "Resource": f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}",
            }
        ),
        "InterruptionPolicy": _document(
            {
                "Sid": "AllowInterruptionQueueActions",
                "Effect": "Allow",
                "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
                "Resource": queue_arn,
            }
        ),
        "ResourceDiscoveryPolicy": _document(
            {
                "Sid": "AllowRegionalReadActions",
                "Effect": "Allow",
                "Action": [
                    "ec2:DescribeCapacityReservations",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstances",
                    "ec2:DescribeInstanceStatus",
                    "ec2:DescribeInstanceTypeOfferings",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplates",
                    "ec2:DescribePlacementGroups",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSpotPriceHistory",
                    "ec2:DescribeSubnets",
                ],
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
            },
            {
                "Sid": "AllowSSMReadActions",
                "Effect": "Allow",
                "Action": "ssm:GetParameter",
                "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
            },
            {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Action": "pricing:GetProducts", "Resource": "*"},
            {
                "Sid": "AllowUnscopedInstanceProfileListAction",
                "Effect": "Allow",
                "Action": "iam:ListInstanceProfiles",
                "Resource": "*",
            },
            {
                "Sid": "AllowInstanceProfileReadActions",
                "Effect": "Allow",
                "Action": "iam:GetInstanceProfile",
                "Resource": instance_profiles,
            },
        ),
    }
    return documents


def interruption_queue_policy(queue_arn: pulumi.Input[str]) -> pulumi.Output[str]:
    """The interruption queue's policy (the template's KarpenterInterruptionQueuePolicy): EventBridge and SQS may send;
    nothing reaches it without TLS."""
    return pulumi.Output.json_dumps(
        {
            "Version": "2012-10-17",
            "Id": "EC2InterruptionPolicy",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                },
                {
                    "Sid": "DenyHTTP",
                    "Effect": "Deny",
                    "Action": "sqs:*",
                    "Resource": queue_arn,
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                    "Principal": "*",
                },
            ],
        }
    )


# The template's EventBridge rules, each sending to the interruption queue: (rule, source, detail-type). The last is in
# the 1.14 template though the reference page lists four; the controller parses it (pkg/controllers/interruption/messages).
INTERRUPTION_EVENTS = (
    ("scheduled-change", "aws.health", "AWS Health Event"),
    ("spot-interruption", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
    ("rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"),
    ("instance-state-change", "aws.ec2", "EC2 Instance State-change Notification"),
    ("capacity-reservation-interruption", "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
)
