"""Pack cost-guard: Trainium node ceilings, a monthly budget on the estimated cost, the tags cost reports need, and
image pulls that stay off the NAT gateway."""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity

from policies.adapters import resource_policy, stack_policy
from policies.pack import Pack
from policies.rules import cost, endpoints

COST_GUARD = Pack(
    name="cost-guard",
    description="Trainium node ceilings, a monthly budget on the estimated cost, the tags cost reports need, and image "
    "pulls that stay off the NAT gateway.",
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
