"""The mutation cases of the deploy path: the in-VPC runner a private cluster needs, and the runner role's trust.

``tests/test_policies.py`` merges them with the other tables.
"""

from __future__ import annotations

import json

from policy_mutations import Case, edit, resource, without

from policies.rules.security import EKS_COMPONENT, VPC_INGRESS_RULE
from trainium_eks.tokens import CODEBUILD_PROJECT, IAM_ROLE


def _unscoped_runner_trust(plan: dict) -> None:
    role = resource(plan, IAM_ROLE, "deploy-runner-service")["inputs"]
    trust = json.loads(role["assumeRolePolicy"])
    del trust["Statement"][0]["Condition"]
    role["assumeRolePolicy"] = json.dumps(trust)


DEPLOY_PATH_CASES: dict[str, list[Case]] = {
    "private-endpoint-in-vpc-runner": [
        Case(
            "no-runner",
            "prod",
            without(lambda r: r["type"] == CODEBUILD_PROJECT),
            ("no CodeBuild runner in its VPC",),
            blames=EKS_COMPONENT,
        ),
        Case(
            "not-admitted",
            "prod",
            without(lambda r: r["type"] == VPC_INGRESS_RULE and "api-from-client" in r["name"]),
            ("does not admit its runner",),
            blames=EKS_COMPONENT,
        ),
        Case("udp-only", "prod", edit(VPC_INGRESS_RULE, "api-from-client", "ipProtocol", to="udp"), ("TCP 443",)),
    ],
    "service-role-trust-scoped": [Case("any-project", "prod", _unscoped_runner_trust, ("aws:SourceArn",), IAM_ROLE, 1)],
}
