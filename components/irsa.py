"""IAM roles for Kubernetes service accounts (IRSA): trust limited to one service account of one cluster, and the
EKS add-ons that run on such a role."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

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


def service_account_addon(
    name: str,
    *,
    addon_name: str,
    cluster_name: pulumi.Input[str],
    kubernetes_version: str,
    oidc_provider_arn: pulumi.Input[str],
    oidc_issuer: pulumi.Input[str],
    namespace: str,
    service_account: str,
    policy_arn: str,
    tags: Mapping[str, str],
    parent: pulumi.Resource,
    configuration: dict | None = None,
    depends_on: Sequence[pulumi.Resource] = (),
) -> aws.eks.Addon:
    """An EKS add-on at EKS's default build for the cluster version, on a role only its service account assumes."""
    role = irsa_role(
        name,
        description=f"{addon_name} add-on",
        oidc_provider_arn=oidc_provider_arn,
        oidc_issuer=oidc_issuer,
        namespace=namespace,
        service_account=service_account,
        tags=tags,
        parent=parent,
    )
    attachment = aws.iam.RolePolicyAttachment(
        name, role=role.name, policy_arn=policy_arn, opts=pulumi.ResourceOptions(parent=parent)
    )
    addon_version = aws.eks.get_addon_version_output(
        addon_name=addon_name,
        kubernetes_version=kubernetes_version,
        most_recent=False,
        opts=pulumi.InvokeOutputOptions(parent=parent),
    )
    return aws.eks.Addon(
        name,
        cluster_name=cluster_name,
        addon_name=addon_name,
        addon_version=addon_version.version,
        service_account_role_arn=role.arn,
        configuration_values=json.dumps(configuration) if configuration else None,
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="PRESERVE",
        tags=dict(tags),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*depends_on, attachment]),
    )
