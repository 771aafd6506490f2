"""Deploy runner: the stack's own CI runner inside its VPC, so that the pipeline's `pulumi preview` and `pulumi up`
reach a private Kubernetes API endpoint (which answers only from inside the VPC or a connected network).

An AWS CodeBuild project in the private subnets, registered with GitHub through a webhook on queued workflow jobs:
GitHub Actions jobs whose `runs-on` names the project run as CodeBuild builds (AWS CodeBuild User Guide,
"Self-hosted GitHub Actions runners in AWS CodeBuild" and "Tutorial: Configure a CodeBuild-hosted GitHub Actions
runner"). The runner's own role can only write its logs, place its network interfaces in these subnets and use
the GitHub connection; the deploy permissions come from the workflow's OIDC role (`AWS_ROLE_ARN`), as on
GitHub-hosted runners. The cluster admits the runner's security group on 443 (``components/cluster.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.https_groups import https_group
from trainium_eks import tokens, versions
from trainium_eks.config import BOOTSTRAP_VARIABLE, DeployRunnerConfig

# 4 vCPUs and 7 GB (CodeBuild "Build environment compute types"): the Pulumi engine, the Node.js eks provider and
# the Python program run side by side during a preview.
COMPUTE_TYPE = "BUILD_GENERAL1_MEDIUM"
LOG_RETENTION_DAYS = 30
BUILD_TIMEOUT_MINUTES = 120  # a new prod stack's `pulumi up` takes about 20 minutes; replacing node groups, longer
# The filter CodeBuild documents for GitHub Actions runner projects: a build per queued workflow job.
WORKFLOW_JOB_QUEUED = "WORKFLOW_JOB_QUEUED"


@dataclass(frozen=True)
class DeployRunnerArgs:
    config: DeployRunnerConfig
    region: str
    vpc_id: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[list]
    tags: Mapping[str, str]


def service_role_policy(cfg: DeployRunnerConfig, region: str, subnet_ids: list[str]) -> dict:
    """What the build itself needs, scoped to this project, its subnets and its connection.

    The VPC statements are those the CodeBuild User Guide lists for VPC builds ("Using identity-based policies for
    AWS CodeBuild": allow CodeBuild access to AWS services required to create a VPC network interface): the
    describe and network-interface calls cannot be scoped by resource, the interface permission is limited to
    CodeBuild in these subnets. The connection statement is the one pulumi-aws documents for a CodeBuild project
    on a CodeConnections source (`aws.codebuild.Project` example). The log group ARN leaves the account out: a
    role's identity policy only ever grants within its own account.
    """
    log_streams = f"arn:aws:logs:{region}:*:log-group:{log_group_name(cfg)}:log-stream:*"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": log_streams},
            {
                "Sid": "VpcNetworkInterfaces",
                "Effect": "Allow",
                "Action": [
                    "ec2:CreateNetworkInterface",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeVpcs",
                ],
                "Resource": "*",
            },
            {
                "Sid": "NetworkInterfacesInTheseSubnets",
                "Effect": "Allow",
                "Action": "ec2:CreateNetworkInterfacePermission",
                "Resource": f"arn:aws:ec2:{region}:*:network-interface/*",
                "Condition": {
                    "StringEquals": {"ec2:AuthorizedService": "codebuild.amazonaws.com"},
                    "ArnLike": {"ec2:Subnet": [f"arn:aws:ec2:{region}:*:subnet/{s}" for s in subnet_ids]},
                },
            },
            {
                "Sid": "GitHubConnection",
                "Effect": "Allow",
                # The actions' service prefix must be the connection ARN's, codeconnections or (before the rename)
                # codestar-connections (Developer Tools console guide, identity and access management).
                "Action": [f"{cfg.connection_service}:GetConnection", f"{cfg.connection_service}:GetConnectionToken"],
                "Resource": cfg.connection_arn,
            },
        ],
    }


def log_group_name(cfg: DeployRunnerConfig) -> str:
    return f"/aws/codebuild/{cfg.project_name}"


def service_role_trust(project_name: str, region: str, account: str) -> str:
    """CodeBuild may assume the role for this project of this account only: without the condition keys, any CodeBuild
    project in the account that is given the role runs with it (IAM User Guide, "The confused deputy problem";
    CodeBuild User Guide, "Cross-service confused deputy prevention": aws:SourceAccount and aws:SourceArn)."""
    project_arn = f"arn:aws:codebuild:{region}:{account}:project/{project_name}"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "codebuild.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                    "Condition": {"StringEquals": {"aws:SourceAccount": account}, "ArnLike": {"aws:SourceArn": project_arn}},
                }
            ],
        }
    )


class DeployRunner(pulumi.ComponentResource):
    """A CodeBuild-hosted GitHub Actions runner in the stack's private subnets."""

    project_name: pulumi.Output[str]
    security_group_id: pulumi.Output[str]

    def __init__(self, name: str, args: DeployRunnerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(tokens.DEPLOY_RUNNER_COMPONENT, name, None, opts)
        cfg = args.config
        tags = dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)

        # A runner only calls out (GitHub, Pulumi Cloud, package registries, AWS APIs, the cluster API), over HTTPS.
        security_group = https_group(
            f"{name}-runner",
            group_name=cfg.project_name,
            description=f"CodeBuild runner {cfg.project_name}: outbound HTTPS only",
            vpc_id=args.vpc_id,
            tags=tags,
            parent=self,
        )
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs", name=log_group_name(cfg), retention_in_days=LOG_RETENTION_DAYS, tags=tags, opts=child
        )
        role = aws.iam.Role(
            f"{name}-service",
            description=f"Service role of the CodeBuild runner {cfg.project_name}",
            assume_role_policy=aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id.apply(
                lambda account: service_role_trust(cfg.project_name, args.region, account)
            ),
            tags=tags,
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{name}-service",
            role=role.id,
            policy=pulumi.Output.from_input(args.private_subnet_ids).apply(
                lambda ids: json.dumps(service_role_policy(cfg, args.region, list(ids)))
            ),
            opts=child,
        )
        # CodeBuild checks the role's VPC permissions when the project is created, so the policy comes first.
        project = aws.codebuild.Project(
            f"{name}-project",
            name=cfg.project_name,
            description=f"GitHub Actions runner for {cfg.github_repository} inside the stack's VPC",
            service_role=role.arn,
            build_timeout=BUILD_TIMEOUT_MINUTES,
            source={
                "type": "GITHUB",
                "location": f"https://github.com/{cfg.github_repository}.git",
                "auth": {"type": "CODECONNECTIONS", "resource": cfg.connection_arn},
            },
            artifacts={"type": "NO_ARTIFACTS"},
            environment={
                "type": "LINUX_CONTAINER",
                "compute_type": COMPUTE_TYPE,
                "image": versions.DEPLOY_RUNNER_IMAGE,
                "image_pull_credentials_type": "CODEBUILD",
            },
            vpc_config={
                "vpc_id": args.vpc_id,
                "subnets": args.private_subnet_ids,
                "security_group_ids": [security_group.id],
            },
            logs_config={"cloudwatch_logs": {"group_name": log_group.name}},
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )
        aws.codebuild.Webhook(
            f"{name}-webhook",
            project_name=project.name,
            build_type="BUILD",
            filter_groups=[{"filters": [{"type": "EVENT", "pattern": WORKFLOW_JOB_QUEUED}]}],
            opts=child,
        )

        self.project_name = project.name
        self.security_group_id = security_group.id
        self.register_outputs({"projectName": self.project_name, "securityGroupId": self.security_group_id})


class ExistingClusterError(pulumi.RunError):
    """The deploy runner's bootstrap step was asked for on a stack whose cluster exists."""


def refuse_an_existing_cluster(cluster_name: str) -> None:
    """The bootstrap step registers the network and the runner alone, so on a stack that already has its platform the
    update would delete the rest: refuse it when EKS has the stack's cluster already (eks:ListClusters)."""
    if cluster_name in aws.eks.get_clusters().names:
        raise ExistingClusterError(
            f"{BOOTSTRAP_VARIABLE}: the cluster {cluster_name} exists already, and the bootstrap step is for a new stack "
            f"only; unset {BOOTSTRAP_VARIABLE} and run the whole `pulumi up` from where the API answers"
        )
