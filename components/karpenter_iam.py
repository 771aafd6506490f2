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
from dataclasses import dataclass

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


@dataclass(frozen=True)
class _Scope:
    """What the template's policies are scoped by: the region, the cluster, the node role's partition and account."""

    region: str
    cluster_name: str
    node_role_arn: str
    queue_arn: str

    @property
    def partition(self) -> str:
        return self.node_role_arn.split(":", 5)[1]

    @property
    def account_id(self) -> str:
        return self.node_role_arn.split(":", 5)[4]

    @property
    def ec2(self) -> str:
        return f"arn:{self.partition}:ec2:{self.region}"

    @property
    def owned(self) -> dict[str, str]:
        return {f"aws:ResourceTag/kubernetes.io/cluster/{self.cluster_name}": "owned"}

    @property
    def requested(self) -> dict[str, str]:
        return {
            f"aws:RequestTag/kubernetes.io/cluster/{self.cluster_name}": "owned",
            "aws:RequestTag/eks:eks-cluster-name": self.cluster_name,
        }

    @property
    def instance_profiles(self) -> str:
        return f"arn:{self.partition}:iam::{self.account_id}:instance-profile/*"


ANY_NODEPOOL = {"aws:ResourceTag/karpenter.sh/nodepool": "*"}
REGION_TAG = "topology.kubernetes.io/region"


def _controller_documents(*, region: str, cluster_name: str, node_role_arn: str, queue_arn: str) -> dict[str, dict]:
    scope = _Scope(region, cluster_name, node_role_arn, queue_arn)
    return {
        "NodeLifecyclePolicy": _node_lifecycle_policy(scope),
        "IAMIntegrationPolicy": _iam_integration_policy(scope),
        "EKSIntegrationPolicy": _eks_integration_policy(scope),
        "InterruptionPolicy": _interruption_policy(scope),
        "ResourceDiscoveryPolicy": _resource_discovery_policy(scope),
    }


def _node_lifecycle_policy(scope: _Scope) -> dict:
    """Launching, tagging and terminating the instances and launch templates of its node pools."""
    return _document(
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": [
                f"{scope.ec2}::image/*",
                f"{scope.ec2}::snapshot/*",
                f"{scope.ec2}:*:security-group/*",
                f"{scope.ec2}:*:subnet/*",
                f"{scope.ec2}:*:capacity-reservation/*",
                f"{scope.ec2}:*:placement-group/*",
            ],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": f"{scope.ec2}:*:launch-template/*",
            "Condition": {"StringEquals": scope.owned, "StringLike": ANY_NODEPOOL},
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Resource": [f"{scope.ec2}:*:{kind}/*" for kind in LAUNCHED],
            "Condition": {"StringEquals": scope.requested, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": [f"{scope.ec2}:*:{kind}/*" for kind in LAUNCHED],
            "Condition": {
                "StringEquals": {**scope.requested, "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": f"{scope.ec2}:*:instance/*",
            "Condition": {
                "StringEquals": scope.owned,
                "StringLike": ANY_NODEPOOL,
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": scope.cluster_name},
                "ForAllValues:StringEquals": {"aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]},
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Resource": [f"{scope.ec2}:*:instance/*", f"{scope.ec2}:*:launch-template/*"],
            "Condition": {"StringEquals": scope.owned, "StringLike": ANY_NODEPOOL},
        },
    )


def _iam_integration_policy(scope: _Scope) -> dict:
    """Passing the node role, and managing the instance profiles of its node classes."""
    return _document(
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": scope.node_role_arn,
            "Condition": {"StringEquals": {"iam:PassedToService": EC2_SERVICES}},
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Action": ["iam:CreateInstanceProfile"],
            "Resource": scope.instance_profiles,
            "Condition": {
                "StringEquals": {**scope.requested, f"aws:RequestTag/{REGION_TAG}": scope.region},
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Action": ["iam:TagInstanceProfile"],
            "Resource": scope.instance_profiles,
            "Condition": {
                "StringEquals": {
                    **scope.owned,
                    f"aws:ResourceTag/{REGION_TAG}": scope.region,
                    **scope.requested,
                    f"aws:RequestTag/{REGION_TAG}": scope.region,
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
            "Resource": scope.instance_profiles,
            "Condition": {
                "StringEquals": {**scope.owned, f"aws:ResourceTag/{REGION_TAG}": scope.region},
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
    )


def _eks_integration_policy(scope: _Scope) -> dict:
    """Discovering the cluster's API endpoint."""
    return _document(
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Action": "eks:DescribeCluster",
            "Resource": f"arn:{scope.partition}:eks:{scope.region}:{scope.account_id}:cluster/{scope.cluster_name}",
        }
    )


def _interruption_policy(scope: _Scope) -> dict:
    """Reading the interruption queue."""
    return _document(
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            "Resource": scope.queue_arn,
        }
    )


def _resource_discovery_policy(scope: _Scope) -> dict:
    """Reading what it chooses instances from: EC2 offerings, AMI parameters, prices, instance profiles."""
    return _document(
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
            "Condition": {"StringEquals": {"aws:RequestedRegion": scope.region}},
        },
        {
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Action": "ssm:GetParameter",
            "Resource": f"arn:{scope.partition}:ssm:{scope.region}::parameter/aws/service/*",
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
            "Resource": scope.instance_profiles,
        },
    )


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
