"""IAM roles for Kubernetes service accounts (IRSA): trust limited to one service account of one cluster."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws


def irsa_trust_policy(oidc_provider_arn: pulumi.Input[str], oidc_issuer: pulumi.Input[str], namespace: str, service_account: str):
    issuer = pulumi.Output.from_input(oidc_issuer).apply(lambda url: url.removeprefix("https://"))
    return aws.iam.get_policy_document_output(
        statements=[
            {
                "actions": ["sts:AssumeRoleWithWebIdentity"],
                "principals": [{"type": "Federated", "identifiers": [oidc_provider_arn]}],
                "conditions": [
                    {
                        "test": "StringEquals",
                        "variable": issuer.apply(lambda i: f"{i}:sub"),
                        "values": [f"system:serviceaccount:{namespace}:{service_account}"],
                    },
                    {"test": "StringEquals", "variable": issuer.apply(lambda i: f"{i}:aud"), "values": ["sts.amazonaws.com"]},
                ],
            }
        ]
    ).json


def irsa_role(
    name: str,
    *,
    description: str,
    oidc_provider_arn: pulumi.Input[str],
    oidc_issuer: pulumi.Input[str],
    namespace: str,
    service_account: str,
    tags: Mapping[str, str],
    parent: pulumi.Resource,
) -> aws.iam.Role:
    return aws.iam.Role(
        name,
        description=description,
        assume_role_policy=irsa_trust_policy(oidc_provider_arn, oidc_issuer, namespace, service_account),
        tags=dict(tags),
        opts=pulumi.ResourceOptions(parent=parent),
    )
