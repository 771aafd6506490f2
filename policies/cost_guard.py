"""Pack cost-guard: Trainium node ceilings, a monthly budget on the estimated cost, the tags cost reports need, image
pulls that stay off the NAT gateway, and nothing billed after `pulumi destroy` (volumes, logs, Karpenter's nodes)."""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity

from policies.adapters import resource_policy, stack_policy
from policies.pack import Pack
from policies.rules import cleanup, cost, endpoints

COST_GUARD = Pack(
    name="cost-guard",
    description="Trainium node ceilings, a monthly budget on the estimated cost, the tags cost reports need, image "
    "pulls that stay off the NAT gateway, and nothing left billing after `pulumi destroy`.",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=(
        stack_policy(
            "trainium-node-limit",
            "Trainium node groups cannot grow past the stack's node limit.",
            Severity.HIGH,
            cost.trainium_node_limit,
            config={"maxTrainiumNodes": {"type": "integer", "minimum": 0, "default": 16}},
        ),
        stack_policy(
            "monthly-cost-budget",
            "The estimated monthly cost stays within the stack's budget.",
            Severity.HIGH,
            cost.monthly_cost_budget,
            config={"maxMonthlyUsd": {"type": "number", "minimum": 0, "default": 100000}},
        ),
        stack_policy(
            "image-pulls-through-vpc-endpoints",
            "A VPC the platform creates reaches S3 and ECR through VPC endpoints, not the NAT gateway.",
            Severity.MEDIUM,
            endpoints.image_pulls_through_endpoints,
        ),
        stack_policy(
            "karpenter-outlives-its-pools",
            "NodePools and EC2NodeClasses depend on the Karpenter release, and the release on its IAM role, its "
            "interruption queue and the system nodes, so a destroy leaves Karpenter running until its nodes are gone.",
            Severity.HIGH,
            cleanup.pools_outlived_by_karpenter,
        ),
        stack_policy(
            "stateful-set-claims-go-with-it",
            "A StatefulSet's claims on a class that deletes volumes are deleted with it (whenDeleted: Delete).",
            Severity.MEDIUM,
            cleanup.claims_go_with_workload,
        ),
        stack_policy(
            "control-plane-log-group-owned",
            "The EKS control-plane log group is the stack's, with a retention CloudWatch Logs takes, created before the cluster.",
            Severity.MEDIUM,
            cleanup.control_plane_log_group,
        ),
        resource_policy(
            "required-tags",
            "Taggable AWS resources carry environment, owner and cost-center tags.",
            Severity.MEDIUM,
            cost.required_tags,
            tuple(cost.TAGGABLE_TYPES),
            remediation=cost.add_default_tags,
            config={
                "requiredTags": {"type": "array", "items": {"type": "string"}, "default": cost.DEFAULT_REQUIRED_TAGS},
                "defaultTags": {"type": "object", "additionalProperties": {"type": "string"}, "default": {}},
            },
        ),
    ),
)
