"""The mutation cases of the deploy and access paths: the in-VPC runner a private cluster needs, the runner role's
trust, and the Systems Manager host people reach the private endpoint through.

``tests/test_policies.py`` merges them with the other tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from mutation_case import Case, edit, resource, without

from policies.rules.security import EKS_COMPONENT, VPC_INGRESS_RULE
from trainium_eks.tokens import CODEBUILD_PROJECT, EC2_INSTANCE, EC2_SECURITY_GROUP, IAM_POLICY, IAM_ROLE


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


def _host_policy(edit_statement) -> Callable[[dict], None]:
    def mutate(plan: dict) -> None:
        policy = resource(plan, IAM_POLICY, "api-access-users")["inputs"]
        document = json.loads(policy["policy"])
        edit_statement(document["Statement"][0])
        policy["policy"] = json.dumps(document)

    return mutate


def _host_ingress(plan: dict) -> None:
    rule = {"protocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "cidrBlocks": ["10.0.0.0/8"]}
    resource(plan, EC2_SECURITY_GROUP, "api-access-host")["inputs"]["ingress"] = [rule]


ACCESS_PATH_CASES: dict[str, list[Case]] = {
    "private-endpoint-access-host": [
        Case("no-host", "prod", without(lambda r: r["type"] == EC2_INSTANCE), ("admits no access host",), EKS_COMPONENT),
        Case(
            "not-admitted",
            "prod",
            without(lambda r: r["type"] == VPC_INGRESS_RULE and r["name"].endswith("api-from-client-1")),
            ("TCP 443",),
            EKS_COMPONENT,
        ),
    ],
    "ec2-instance-closed": [
        Case("key-pair", "prod", edit(EC2_INSTANCE, "api-access", "keyName", to="ops"), ("key pair",), EC2_INSTANCE, 1),
        Case(
            "public-ip",
            "prod",
            edit(EC2_INSTANCE, "api-access", "associatePublicIpAddress", to=True),
            ("public address",),
            EC2_INSTANCE,
            1,
        ),
        Case(
            "imds-hops",
            "prod",
            edit(EC2_INSTANCE, "api-access", "metadataOptions", "httpPutResponseHopLimit", to=2.0),
            ("IMDSv2",),
        ),
        Case("unencrypted", "prod", edit(EC2_INSTANCE, "api-access", "rootBlockDevice", "encrypted", to=False), ("root",)),
        Case("ssh-in", "prod", _host_ingress, ("admits inbound traffic",), EC2_INSTANCE, 1),
    ],
    "ssm-session-access-scoped": [
        Case("any-instance", "prod", _host_policy(lambda s: s.update(Resource=["*"])), ("every instance",), IAM_POLICY),
        Case(
            "shell",
            "prod",
            _host_policy(lambda s: s["Resource"].append("arn:aws:ssm:us-west-2::document/SSM-SessionManagerRunShell")),
            ("beyond port forwarding",),
            IAM_POLICY,
            1,
        ),
        # A document of the account's whose name only ends like AWS's port forwarding: it may run anything.
        Case(
            "name-ending-like-port-forwarding",
            "prod",
            _host_policy(
                lambda s: s.update(
                    Resource=[
                        s["Resource"][0],
                        "arn:aws:ssm:us-east-2:111122223333:document/Shell-AWS-StartPortForwardingSession",
                    ]
                )
            ),
            ("beyond port forwarding",),
            IAM_POLICY,
            1,
        ),
    ],
}
