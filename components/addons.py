"""EKS add-ons at EKS's default build for the cluster version, and those whose service account calls AWS on a
role of its own (IRSA)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pulumi
import pulumi_aws as aws

from components.irsa import irsa_role


def eks_addon(
    name: str,
    *,
    addon_name: str,
    cluster_name: pulumi.Input[str],
    kubernetes_version: str,
    tags: Mapping[str, str],
    parent: pulumi.Resource,
    role_arn: pulumi.Input[str] | None = None,
    configuration: dict | None = None,
    depends_on: Sequence[pulumi.Resource] = (),
) -> aws.eks.Addon:
    """An EKS add-on at EKS's default build for ``kubernetes_version`` (resolved at deploy time)."""
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
        service_account_role_arn=role_arn,
        configuration_values=json.dumps(configuration) if configuration else None,
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="PRESERVE",
        tags=dict(tags),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
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
    """An EKS add-on on a role only its service account assumes, created once the role holds its policy."""
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
    return eks_addon(
        name,
        addon_name=addon_name,
        cluster_name=cluster_name,
        kubernetes_version=kubernetes_version,
        tags=tags,
        parent=parent,
        role_arn=role.arn,
        configuration=configuration,
        depends_on=[*depends_on, attachment],
    )
