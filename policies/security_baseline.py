"""Pack security-baseline: instance metadata, encryption, control-plane access and logging, exposure, IAM, pinned
images and charts, stateful resources, and the platform's in-cluster workloads."""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity

from policies.adapters import resource_policy, stack_policy
from policies.pack import Pack
from policies.rules import access_path, deploy_path, iam, nodes, security, teams, workloads
from trainium_eks import tokens

EKS_TYPES = (security.EKS_COMPONENT, security.EKS_CLUSTER)
LOG_TYPES_SCHEMA = {"type": "array", "items": {"type": "string", "enum": security.CONTROL_PLANE_LOG_TYPES}}

SECURITY_BASELINE = Pack(
    name="security-baseline",
    description="Instance metadata, encryption at rest, control-plane access and logging, network exposure, IAM, "
    "pinned images and charts, and protection of stateful resources.",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=(
        resource_policy(
            "ec2-launch-template-imdsv2-required",
            "Launch templates and Karpenter EC2NodeClasses require IMDSv2 and keep its answers on the node (hop limit 1).",
            Severity.HIGH,
            security.imdsv2_required,
            security.NODE_TEMPLATE_TYPES,
            config={"maxHopLimit": {"type": "integer", "minimum": 1, "maximum": 64, "default": 1}},
        ),
        resource_policy(
            "ec2-launch-template-encrypted-block-devices",
            "Launch templates and Karpenter EC2NodeClasses encrypt every EBS volume.",
            Severity.HIGH,
            security.encrypted_block_devices,
            security.NODE_TEMPLATE_TYPES,
        ),
        resource_policy(
            "kms-encryption-at-rest",
            "EKS Secrets, persistent FSx and ECR are encrypted with KMS.",
            Severity.HIGH,
            security.kms_encryption_at_rest,
            (*EKS_TYPES, security.FSX, security.ECR),
        ),
        resource_policy(
            "eks-control-plane-logging",
            "EKS sends the control-plane logs to CloudWatch.",
            Severity.MEDIUM,
            security.control_plane_logging,
            (security.EKS_COMPONENT,),
            config={"requiredLogTypes": {**LOG_TYPES_SCHEMA, "default": security.CONTROL_PLANE_LOG_TYPES}},
        ),
        resource_policy(
            "eks-authentication-mode-api",
            "EKS authenticates through access entries (API mode).",
            Severity.HIGH,
            security.authentication_mode_api,
            EKS_TYPES,
        ),
        resource_policy(
            "eks-endpoint-public-access",
            "The EKS API endpoint is private unless allowed and CIDR-restricted.",
            Severity.CRITICAL,
            security.endpoint_public_access,
            EKS_TYPES,
            config={"allowPublicEndpoint": {"type": "boolean", "default": False}},
        ),
        resource_policy(
            "service-role-trust-scoped",
            "A role an AWS service assumes (the deploy runner's) is limited to its own resource and account.",
            Severity.HIGH,
            deploy_path.service_role_trust_scoped,
            (iam.IAM_ROLE,),
        ),
        stack_policy(
            "private-endpoint-in-vpc-runner",
            "A cluster with a private-only endpoint has a CodeBuild runner in its VPC that it admits on 443.",
            Severity.HIGH,
            deploy_path.private_endpoint_has_in_vpc_runner,
            config={"requireInVpcRunner": {"type": "boolean", "default": True}},
        ),
        stack_policy(
            "private-endpoint-access-host",
            "A cluster with a private-only endpoint admits an access host on 443, for people's port forwarding.",
            Severity.HIGH,
            access_path.private_endpoint_has_access_host,
            config={"requireApiAccessHost": {"type": "boolean", "default": True}},
        ),
        stack_policy(
            "ec2-instance-closed",
            "EC2 instances take no inbound connection (no ingress, key pair or public address), require IMDSv2 and "
            "encrypt their root volume.",
            Severity.CRITICAL,
            access_path.instances_closed,
        ),
        resource_policy(
            "ssm-session-access-scoped",
            "Grants of ssm:StartSession name their instances and allow AWS's port-forwarding documents only, by exact ARN.",
            Severity.HIGH,
            access_path.session_access_scoped,
            (*iam.IAM_POLICY_TYPES, iam.IAM_ROLE),
        ),
        resource_policy(
            "security-group-no-world-ingress",
            "No security group ingress from 0.0.0.0/0 or ::/0.",
            Severity.CRITICAL,
            security.no_world_ingress,
            (security.SECURITY_GROUP, security.SECURITY_GROUP_RULE, security.VPC_INGRESS_RULE),
        ),
        resource_policy(
            "iam-no-wildcard-admin",
            "No IAM policy allows every action on every resource.",
            Severity.CRITICAL,
            iam.iam_no_wildcard_admin,
            (*iam.IAM_POLICY_TYPES, iam.IAM_ROLE),
        ),
        stack_policy(
            "irsa-no-full-access-policies",
            "Service-account roles carry no *FullAccess managed policy.",
            Severity.HIGH,
            iam.irsa_no_full_access,
        ),
        resource_policy(
            "ecr-immutable-scan-on-push",
            "ECR repositories have immutable tags and scan on push.",
            Severity.HIGH,
            security.ecr_immutable_scan_on_push,
            (security.ECR,),
        ),
        resource_policy(
            "container-images-pinned",
            "Workloads run images with an exact tag or digest, never latest.",
            Severity.HIGH,
            security.images_pinned,
            (*security.POD_TEMPLATE_TYPES, security.POD, security.CRON_JOB),
        ),
        resource_policy(
            "helm-release-pinned",
            "Helm releases pin an exact chart version from an allowed repository.",
            Severity.HIGH,
            security.helm_release_pinned,
            (security.HELM_RELEASE, security.HELM_CHART),
            config={
                "allowedRepositories": {
                    "type": "array",
                    "items": {"type": "string"},
                    "default": security.DEFAULT_ALLOWED_CHART_REPOSITORIES,
                }
            },
        ),
        resource_policy(
            "no-public-load-balancer",
            "No Service is a public LoadBalancer (TensorBoard stays internal).",
            Severity.HIGH,
            security.no_public_load_balancer,
            (security.SERVICE,),
            config={"allowedServices": {"type": "array", "items": {"type": "string"}, "default": []}},
        ),
        stack_policy(
            "stateful-resources-protected",
            "Clusters, file systems, registries and keys are protected.",
            Severity.HIGH,
            security.stateful_resources_protected,
            config={"requireProtection": {"type": "boolean", "default": False}},
        ),
        stack_policy(
            "node-role-least-privilege",
            "Node roles hold no VPC CNI permissions and pull images with AmazonEC2ContainerRegistryPullOnly.",
            Severity.HIGH,
            nodes.node_role_least_privilege,
        ),
        stack_policy(
            "etcd-quorum-disruption-budget",
            "An etcd of several members has a PodDisruptionBudget that keeps its majority up.",
            Severity.HIGH,
            workloads.etcd_quorum_disruption_budget,
        ),
        stack_policy(
            "etcd-access-restricted",
            "etcd admits only chosen clients, under a NetworkPolicy the VPC CNI enforces.",
            Severity.HIGH,
            workloads.etcd_access_restricted,
        ),
        resource_policy(
            "service-account-token-off",
            "Workloads without a service account of their own mount no service-account token.",
            Severity.MEDIUM,
            workloads.service_account_token_off,
            workloads.WORKLOAD_TYPES,
        ),
        resource_policy(
            "workload-liveness-probes",
            "Every container of the platform's workloads has a liveness probe.",
            Severity.MEDIUM,
            workloads.liveness_probes,
            workloads.WORKLOAD_TYPES,
        ),
        resource_policy(
            "namespace-pod-security",
            "The platform's namespaces enforce a Pod Security Standard (baseline or restricted).",
            Severity.HIGH,
            workloads.namespace_pod_security,
            (tokens.K8S_NAMESPACE,),
        ),
        stack_policy(
            "team-access-namespaced",
            "A team's members act in the team's namespace only: their access entries carry the team's group alone, and "
            "no cluster-scoped access policy, ClusterRoleBinding or other namespace's RoleBinding names them.",
            Severity.CRITICAL,
            teams.team_access_namespaced,
        ),
        stack_policy(
            "team-role-bounded",
            "A team's Role holds no wildcard, only reads the team's quota, NetworkPolicies, Volcano queues and "
            "PodGroups, and holds no bind or escalate on Roles.",
            Severity.CRITICAL,
            teams.team_role_bounded,
        ),
        resource_policy(
            "team-volume-own-directory",
            "A team's volume mounts the team's own directory of the file system, reserved for the team's namespace.",
            Severity.HIGH,
            teams.team_volume_own_directory,
            (tokens.K8S_PERSISTENT_VOLUME,),
        ),
    ),
)
