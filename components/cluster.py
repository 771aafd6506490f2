"""Cluster: the EKS control plane, its secrets key, the node IAM role, the system node group, a Kubernetes
provider, encrypted gp3 block storage (EBS CSI add-on and StorageClass) for stateful add-ons such as etcd, and the
EKS node monitoring agent add-on that node auto repair relies on.

The control plane comes from pulumi-eks (API authentication mode with access entries, OIDC for IRSA, every
control-plane log type, KMS envelope encryption of Secrets). Node groups are plain ``aws.eks.NodeGroup``
resources so that tests and policies see every property of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components.irsa import irsa_role
from components.launch_template import LaunchTemplateArgs, node_launch_template
from trainium_eks import layout, versions
from trainium_eks.config import ClusterConfig

CONTROL_PLANE_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
# What every EKS node needs: join the cluster, pull images (EKS's node IAM role guide now names PullOnly, which
# cannot list or describe repositories), be reachable by SSM (no SSH). The VPC CNI's permissions are not here:
# the vpc-cni add-on gets them through its own service-account role, so pods cannot borrow them from the node.
NODE_MANAGED_POLICIES = {
    "worker": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "ecr": "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
    "ssm": "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
}
VPC_CNI_SERVICE_ACCOUNT = "aws-node"
VPC_CNI_POLICY = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"
# The add-on's network policy agent enforces NetworkPolicy objects (EKS user guide, "Limit pod traffic with
# Kubernetes network policies"); etcd's policy relies on it.
VPC_CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
SYSTEM_ROOT_VOLUME_GIB = 100
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
EBS_CSI_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
BLOCK_STORAGE_CLASS = "gp3-encrypted"


@dataclass(frozen=True)
class ClusterArgs:
    config: ClusterConfig
    vpc_id: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[list]
    public_subnet_ids: pulumi.Input[list]
    node_routing: Sequence[pulumi.Resource]  # nodes join the cluster through NAT: create it before them
    tags: Mapping[str, str]
    protect: bool
    node_monitoring_agent: bool  # the eks-node-monitoring-agent add-on


class Cluster(pulumi.ComponentResource):
    """EKS control plane plus what every other component needs from it."""

    name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    node_role_dependencies: list[aws.iam.RolePolicyAttachment]
    system_node_group: aws.eks.NodeGroup
    provider: k8s.Provider
    block_storage_class: pulumi.Output[str]

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:cluster:Cluster", name, None, opts)
        cfg = args.config
        tags = dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)
        stateful = pulumi.ResourceOptions(parent=self, protect=args.protect)

        secrets_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"Envelope encryption of Kubernetes Secrets in {cfg.name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=tags,
            opts=stateful,
        )
        aws.kms.Alias(f"{name}-secrets", name=f"alias/{cfg.name}-eks-secrets", target_key_id=secrets_key.key_id, opts=child)

        access_entries = {
            f"admin-{i}": eks.AccessEntryArgs(
                principal_arn=arn,
                access_policies={
                    "cluster-admin": eks.AccessPolicyAssociationArgs(
                        policy_arn=CLUSTER_ADMIN_POLICY,
                        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    )
                },
            )
            for i, arn in enumerate(cfg.admin_principal_arns)
        }
        control_plane = eks.Cluster(
            f"{name}-eks",
            name=cfg.name,
            version=cfg.kubernetes_version,
            vpc_id=args.vpc_id,
            private_subnet_ids=args.private_subnet_ids,
            public_subnet_ids=args.public_subnet_ids,
            skip_default_node_group=True,
            skip_default_security_groups=True,  # managed node groups use the EKS-created cluster security group
            create_oidc_provider=True,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=access_entries,
            enabled_cluster_log_types=CONTROL_PLANE_LOG_TYPES,
            encryption_config_key_arn=secrets_key.arn,
            endpoint_private_access=True,
            endpoint_public_access=cfg.endpoint_public_access,
            public_access_cidrs=list(cfg.public_access_cidrs) or None,
            node_associate_public_ip_address=False,
            deletion_protection=args.protect,
            tags=tags,
            opts=stateful,
        )

        node_role = aws.iam.Role(
            f"{name}-node",
            description=f"Instance role of the managed node groups of {cfg.name}",
            assume_role_policy=aws.iam.get_policy_document_output(
                statements=[
                    {
                        "actions": ["sts:AssumeRole"],
                        "principals": [{"type": "Service", "identifiers": ["ec2.amazonaws.com"]}],
                    }
                ]
            ).json,
            tags=tags,
            opts=child,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(f"{name}-node-{short}", role=node_role.name, policy_arn=arn, opts=child)
            for short, arn in NODE_MANAGED_POLICIES.items()
        ]

        system_template = node_launch_template(
            f"{name}-system",
            LaunchTemplateArgs(
                description=f"System nodes of {cfg.name}",
                root_volume_gib=SYSTEM_ROOT_VOLUME_GIB,
                tags=tags,
                instance_tags={"Name": f"{cfg.name}-system"},
            ),
            parent=self,
        )
        # EKS starts every cluster with a self-managed VPC CNI; the add-on takes it over (with its own role) before
        # any node joins, so no node ever runs it on the node role's permissions.
        vpc_cni = self._addon(
            name,
            "vpc-cni",
            versions.VPC_CNI_ADDON,
            cfg,
            control_plane,
            tags,
            service_account=VPC_CNI_SERVICE_ACCOUNT,
            policy_arn=VPC_CNI_POLICY,
            configuration=VPC_CNI_CONFIGURATION,
        )
        scaling = cfg.system_scaling
        self.system_node_group = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=control_plane.eks_cluster.name,
            node_group_name=f"{cfg.name}-system",
            node_role_arn=node_role.arn,
            subnet_ids=args.private_subnet_ids,
            instance_types=[cfg.system_instance_type],
            ami_type=SYSTEM_AMI_TYPE,
            capacity_type="ON_DEMAND",
            scaling_config={"min_size": scaling.min_size, "desired_size": scaling.desired_size, "max_size": scaling.max_size},
            update_config={"max_unavailable": 1},
            launch_template={"id": system_template.id, "version": system_template.latest_version.apply(str)},
            labels={layout.NODE_ROLE_LABEL: layout.SYSTEM_NODE_ROLE},
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*attachments, vpc_cni, *args.node_routing]),
        )

        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=control_plane.kubeconfig_json,
            enable_server_side_apply=True,
            opts=child,
        )

        self.block_storage_class = self._block_storage(name, cfg, control_plane, tags, args.protect)
        if args.node_monitoring_agent:
            # Node conditions for Neuron, kernel, networking, storage and runtime faults, which node auto repair acts on.
            # No service-account role: the add-on "doesn't require additional permissions" (EKS user guide, available
            # add-ons); its chart tolerates every taint, so it runs on Trainium nodes too. ACTIVE once its DaemonSet runs.
            self._addon(
                name,
                "node-monitoring",
                versions.NODE_MONITORING_AGENT_ADDON,
                cfg,
                control_plane,
                tags,
                depends_on=[self.system_node_group],
            )

        self.name = control_plane.eks_cluster.name
        self.endpoint = control_plane.eks_cluster.endpoint
        self.kubeconfig = pulumi.Output.secret(control_plane.kubeconfig_json)
        self.oidc_provider_arn = control_plane.oidc_provider_arn
        self.oidc_issuer = control_plane.oidc_issuer
        self.cluster_security_group_id = control_plane.eks_cluster.vpc_config.cluster_security_group_id
        self.node_role_arn = node_role.arn
        self.node_role_dependencies = [*attachments, vpc_cni]
        self.register_outputs({"name": self.name, "endpoint": self.endpoint, "oidcProviderArn": self.oidc_provider_arn})

    def _addon(
        self,
        name: str,
        short: str,
        addon_name: str,
        cfg: ClusterConfig,
        control_plane: eks.Cluster,
        tags: dict,
        *,
        service_account: str | None = None,
        policy_arn: str | None = None,
        configuration: dict | None = None,
        depends_on: list | None = None,
    ) -> aws.eks.Addon:
        """An EKS add-on at EKS's default build for the cluster version, with a role for its service account when
        it calls AWS (``service_account`` and ``policy_arn``)."""
        role, waits_for = None, list(depends_on or [])
        if service_account is not None and policy_arn is not None:
            role = irsa_role(
                f"{name}-{short}",
                description=f"{addon_name} add-on",
                oidc_provider_arn=control_plane.oidc_provider_arn,
                oidc_issuer=control_plane.oidc_issuer,
                namespace="kube-system",
                service_account=service_account,
                tags=tags,
                parent=self,
            )
            waits_for.append(
                aws.iam.RolePolicyAttachment(
                    f"{name}-{short}", role=role.name, policy_arn=policy_arn, opts=pulumi.ResourceOptions(parent=self)
                )
            )
        addon_version = aws.eks.get_addon_version_output(
            addon_name=addon_name,
            kubernetes_version=cfg.kubernetes_version,
            most_recent=False,
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        return aws.eks.Addon(
            f"{name}-{short}",
            cluster_name=control_plane.eks_cluster.name,
            addon_name=addon_name,
            addon_version=addon_version.version,
            service_account_role_arn=role.arn if role else None,
            configuration_values=json.dumps(configuration) if configuration else None,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="PRESERVE",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits_for),
        )

    def _block_storage(
        self, name: str, cfg: ClusterConfig, control_plane: eks.Cluster, tags: dict, protect: bool
    ) -> pulumi.Output[str]:
        """The EBS CSI add-on and an encrypted gp3 class."""
        addon = self._addon(
            name,
            "ebs-csi",
            versions.EBS_CSI_ADDON,
            cfg,
            control_plane,
            tags,
            service_account=EBS_CSI_SERVICE_ACCOUNT,
            policy_arn=EBS_CSI_POLICY,
            # The add-on turns ACTIVE only once its controller runs, which needs the system nodes.
            depends_on=[self.system_node_group],
        )
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-gp3",
            metadata={"name": BLOCK_STORAGE_CLASS},
            provisioner="ebs.csi.aws.com",
            parameters={"type": "gp3", "encrypted": "true"},
            volume_binding_mode="WaitForFirstConsumer",
            reclaim_policy="Retain" if protect else "Delete",
            allow_volume_expansion=True,
            opts=pulumi.ResourceOptions(parent=self, provider=self.provider, depends_on=[addon]),
        )
        return storage_class.metadata.name
