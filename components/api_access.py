"""API access host: how a person reaches a private-only Kubernetes API endpoint from a workstation, to submit jobs
and use kubectl, with nothing reachable from the internet.

A small instance in a private subnet that AWS Systems Manager manages: no inbound rule, no SSH key, no public
address. `aws ssm start-session` with the AWS-owned document AWS-StartPortForwardingSessionToRemoteHost forwards a
local port through it to the cluster's endpoint (Systems Manager User Guide, "Port forwarding to remote hosts");
the session agent dials out to Systems Manager over HTTPS, so the host needs outbound 443 only. People keep their
own identity: the tunnel carries TLS end to end, and the API server authenticates each user's token (their EKS
access entry) as from anywhere else. What they need to open the tunnel is the policy this component publishes:
a session on this host with this document only, and ending only their own sessions.

Chosen over submitting through the in-VPC deploy runner: a runner build per job would act with the pipeline's
identity for everyone, and kubectl logs, port-forward (TensorBoard) and neuron-top would still be out of reach.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.https_groups import https_group
from trainium_eks import tokens

# Burstable arm64 with 0.5 GiB: the session agent forwards bytes and does nothing else. Standard credits: a T4g
# launches "unlimited" by default and would bill surplus credits (EC2 User Guide, "Burstable performance instances").
INSTANCE_TYPE = "t4g.nano"
# The newest Amazon Linux 2023 image, which ships the SSM Agent (Amazon Linux 2023 User Guide, "Finding AMIs with
# Systems Manager parameters"; Systems Manager User Guide, "AMIs with SSM Agent preinstalled"). A new release
# replaces the host on the next `pulumi up`; it holds nothing, and its instance ID is in the outputs.
AMI_PARAMETER = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64"
# What Systems Manager needs on a managed instance (Systems Manager User Guide, "Configure instance permissions").
SSM_CORE_POLICY_ARN = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
PORT_FORWARDING_DOCUMENT = "AWS-StartPortForwardingSessionToRemoteHost"


@dataclass(frozen=True)
class ApiAccessArgs:
    name: str  # the cluster's name: the host, its role and the users' policy are named after it
    region: str
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]  # a private subnet
    tags: Mapping[str, str]


def users_policy(region: str, account: str, instance_arn: str) -> dict:
    """A port-forwarding session on the host and nothing else; a user ends or resumes only their own sessions
    (Systems Manager User Guide, "Additional sample IAM policies for Session Manager", examples 2 and 4). The access
    check makes the CLI's session document subject to this policy too ("Enforce a session document permission check
    for the AWS CLI")."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "PortForwardThroughTheHost",
                "Effect": "Allow",
                "Action": "ssm:StartSession",
                "Resource": [instance_arn, f"arn:aws:ssm:{region}::document/{PORT_FORWARDING_DOCUMENT}"],
                "Condition": {"BoolIfExists": {"ssm:SessionDocumentAccessCheck": "true"}},
            },
            {
                "Sid": "OwnSessionsOnly",
                "Effect": "Allow",
                "Action": ["ssm:TerminateSession", "ssm:ResumeSession"],
                "Resource": f"arn:aws:ssm:{region}:{account}:session/${{aws:userid}}-*",
            },
        ],
    }


EC2_TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
)


class ApiAccessHost(pulumi.ComponentResource):
    """The SSM-managed host through which a workstation forwards a port to the private API endpoint."""

    instance_id: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    users_policy_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ApiAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(tokens.API_ACCESS_HOST_COMPONENT, name, None, opts)
        tags = dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)
        host_name = f"{args.name}-api-access"

        # No ingress at all: sessions come in over the agent's own outbound connection, to Systems Manager (through
        # the NAT gateway); the API endpoint's security group admits this one on 443.
        security_group = https_group(
            f"{name}-host",
            group_name=host_name,
            description=f"{host_name}: Session Manager host, outbound HTTPS only",
            vpc_id=args.vpc_id,
            tags=tags,
            parent=self,
        )
        role = aws.iam.Role(
            f"{name}-host",
            description=f"Instance role of {host_name}: Systems Manager only",
            assume_role_policy=EC2_TRUST,
            tags=tags,
            opts=child,
        )
        aws.iam.RolePolicyAttachment(f"{name}-host-ssm", role=role.name, policy_arn=SSM_CORE_POLICY_ARN, opts=child)
        profile = aws.iam.InstanceProfile(f"{name}-host", role=role.name, tags=tags, opts=child)
        image = aws.ssm.get_parameter_output(name=AMI_PARAMETER, opts=pulumi.InvokeOutputOptions(parent=self))
        instance = aws.ec2.Instance(
            f"{name}-host",
            ami=image.value,
            instance_type=INSTANCE_TYPE,
            subnet_id=args.subnet_id,
            vpc_security_group_ids=[security_group.id],
            iam_instance_profile=profile.name,
            associate_public_ip_address=False,
            credit_specification={"cpu_credits": "standard"},
            metadata_options={"http_tokens": "required", "http_put_response_hop_limit": 1, "http_endpoint": "enabled"},
            root_block_device={"encrypted": True, "volume_type": "gp3"},
            tags={**tags, "Name": host_name},
            opts=child,
        )
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        policy = aws.iam.Policy(
            f"{name}-users",
            name=f"{host_name}-users",
            description=f"Open a tunnel to the {args.name} API endpoint through {host_name}",
            policy=pulumi.Output.all(account, instance.arn).apply(
                lambda values: json.dumps(users_policy(args.region, values[0], values[1]))
            ),
            tags=tags,
            opts=child,
        )

        self.instance_id = instance.id
        self.security_group_id = security_group.id
        self.users_policy_arn = policy.arn
        self.register_outputs(
            {"instanceId": self.instance_id, "securityGroupId": self.security_group_id, "usersPolicyArn": self.users_policy_arn}
        )
