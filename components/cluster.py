"""Cluster: the EKS control plane, its secrets key, the node IAM role, the system node group, a Kubernetes
provider, encrypted gp3 block storage (EBS CSI add-on and StorageClass) for stateful add-ons such as etcd, and the
EKS node monitoring agent add-on that node auto repair relies on.

The control plane comes from pulumi-eks (API authentication mode with access entries, OIDC for IRSA, every
control-plane log type, KMS envelope encryption of Secrets). Its log group is the stack's, created first with a
retention, so that EKS never creates it without one and `pulumi destroy` removes it. Node groups are plain
``aws.eks.NodeGroup`` resources so that tests and policies see every property of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components.addons import eks_addon, service_account_addon
from components.node_role import node_role as node_role_with_policies
from components.node_template import NodeTemplate, launch_template
from trainium_eks import layout, versions
from trainium_eks.config import ClusterConfig

CONTROL_PLANE_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
# EKS writes the control-plane logs to the group /aws/eks/<cluster>/cluster (EKS user guide, "Send control plane logs to
# CloudWatch Logs") and creates it when missing, keeping log data indefinitely, CloudWatch Logs' default for a group
# without retention (CloudWatch Logs User Guide, "Change log data retention"). Logs written while a destroy runs would
# re-create a deleted group outside the stack's state: the cluster role may not create log groups (as
# terraform-aws-modules/eks did from #1594 to #3163, after its issue #920).
DENY_LOG_GROUP_CREATION = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Deny", "Action": ["logs:CreateLogGroup"], "Resource": "*"}],
}
CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
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


def control_plane_log_group(cluster_name: str) -> str:
    return f"/aws/eks/{cluster_name}/cluster"


@dataclass(frozen=True)
class ClusterArgs:
    config: ClusterConfig
    region: str
    vpc_id: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[list]
    public_subnet_ids: pulumi.Input[list]
    node_routing: Sequence[pulumi.Resource]  # nodes join the cluster through NAT: create it before them
    tags: Mapping[str, str]
    protect: bool
    node_monitoring_agent: bool  # the eks-node-monitoring-agent add-on
    # Security groups inside the VPC whose members reach the API endpoint (the deploy runner's, the access host's):
    # the private endpoint answers from the VPC only where the cluster security group admits 443 from the client.
    api_client_security_group_ids: Sequence[pulumi.Input[str]] = ()
    # What `pulumi destroy` reaches the API through (the network, the deploy runner, the access host): the Kubernetes
    # provider depends on it, so that every Kubernetes object is deleted before any of it (preflight/destroy_access.py).
    api_access_path: Sequence[pulumi.Resource] = ()


@dataclass(frozen=True)
class ClusterHandle:
    """What every later stage takes of the cluster, whole, as pulumi-eks hands its cluster to node groups and the
    terraform-aws-modules/eks submodules take the cluster's outputs: what the stack configured of it (known before it
    exists: resource names, log groups, metric dimensions) and what it outputs."""

    config_name: str  # the configured name
    kubernetes_version: str
    region: str
    tags: Mapping[str, str]
    name: pulumi.Output[str]  # the control plane's, as it outputs it: an input of it waits for the cluster
    endpoint: pulumi.Output[str]
    provider: k8s.Provider
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    security_group_id: pulumi.Output[str]  # the cluster security group, which every node joins
    node_role_arn: pulumi.Output[str]  # the managed node groups' instance role
    node_role_dependencies: Sequence[pulumi.Resource]  # its policies and the VPC CNI: a node joins once they exist
    system_nodes: aws.eks.NodeGroup  # where the add-ons' controllers run; their releases wait for them
    block_storage_class: pulumi.Output[str]


class Cluster(pulumi.ComponentResource):
    """EKS control plane plus what every other component needs from it (``handle``)."""

    handle: ClusterHandle
    kubeconfig: pulumi.Output[str]  # for the contract alone: no stage reaches the API but through ``handle.provider``

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:cluster:Cluster", name, None, opts)
        cfg = args.config
        tags = dict(args.tags)
        control_plane = self._control_plane(name, args, tags)
        node_role, attachments = node_role_with_policies(
            f"{name}-node", description=f"Instance role of the managed node groups of {cfg.name}", tags=tags, parent=self
        )
        vpc_cni = self._system_nodes(name, args, control_plane, node_role, attachments, tags)
        self._kube_provider = self._kubernetes_provider(name, args, control_plane, tags)
        block_storage_class = self._block_storage(name, cfg, control_plane, tags, args.protect)
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
                depends_on=[self._system_node_group],
            )

        self.kubeconfig = pulumi.Output.secret(control_plane.kubeconfig_json)
        self.handle = ClusterHandle(
            config_name=cfg.name,
            kubernetes_version=cfg.kubernetes_version,
            region=args.region,
            tags=args.tags,
            name=control_plane.eks_cluster.name,
            endpoint=control_plane.eks_cluster.endpoint,
            provider=self._kube_provider,
            oidc_provider_arn=control_plane.oidc_provider_arn,
            oidc_issuer=control_plane.oidc_issuer,
            security_group_id=control_plane.eks_cluster.vpc_config.cluster_security_group_id,
            node_role_arn=node_role.arn,
            node_role_dependencies=(*attachments, vpc_cni),
            system_nodes=self._system_node_group,
            block_storage_class=block_storage_class,
        )
        handle = self.handle
        self.register_outputs({"name": handle.name, "endpoint": handle.endpoint, "oidcProviderArn": handle.oidc_provider_arn})

    def _control_plane(self, name: str, args: ClusterArgs, tags: dict) -> eks.Cluster:
        """The EKS control plane with its Secrets key, its log group, and a cluster role that cannot create log groups."""
        cfg = args.config
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
        # Encrypted at rest by CloudWatch Logs' own keys (CloudWatch Logs User Guide, "Encrypt log data in CloudWatch
        # Logs using AWS KMS": log data is always encrypted); the stack encrypts no log group with a key of its own.
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs",
            name=control_plane_log_group(cfg.name),
            retention_in_days=cfg.log_retention_days,
            tags=tags,
            opts=child,
        )
        control_plane = eks.Cluster(
            f"{name}-eks",
            # The name flows from the log group so that the aws:eks/cluster pulumi-eks creates waits for the group: a
            # remote component's depends_on reaches the component, not its children, while its inputs carry their
            # dependencies to them (pulumi/pulumi sdk/nodejs/provider/server.ts, construct).
            name=log_group.name.apply(lambda _: cfg.name),
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
        aws.iam.RolePolicy(
            f"{name}-no-log-group-creation",
            # pulumi-eks's cluster role has no path: its name is the ARN's last part (nodejs/eks/servicerole.ts)
            role=control_plane.eks_cluster.role_arn.apply(lambda arn: arn.rsplit("/", 1)[-1]),
            policy=json.dumps(DENY_LOG_GROUP_CREATION),
            opts=child,
        )
        return control_plane

    def _system_nodes(
        self,
        name: str,
        args: ClusterArgs,
        control_plane: eks.Cluster,
        node_role: aws.iam.Role,
        attachments: Sequence[aws.iam.RolePolicyAttachment],
        tags: dict,
    ) -> aws.eks.Addon:
        """The system node group (``self._system_node_group``), after the VPC CNI add-on it needs, which it returns."""
        cfg = args.config
        system_template = launch_template(
            f"{name}-system",
            NodeTemplate(
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
        self._system_node_group = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=control_plane.eks_cluster.name,
            node_group_name=f"{cfg.name}-system",
            node_role_arn=node_role.arn,
            subnet_ids=args.private_subnet_ids,
            instance_types=[cfg.system_instance_type],
            ami_type=SYSTEM_AMI_TYPE,
            # Stated, not left to EKS: the nodes keep their version until an upgrade's system-node step moves them.
            version=cfg.system_kubernetes_version,
            # No release pinned: system nodes run no Neuron driver, so EKS's newest release for the version serves
            # (taken at creation and at each version step), and EKS cannot roll a group back to an older release.
            capacity_type="ON_DEMAND",
            scaling_config={"min_size": scaling.min_size, "desired_size": scaling.desired_size, "max_size": scaling.max_size},
            update_config={"max_unavailable": 1},
            launch_template={"id": system_template.id, "version": system_template.latest_version.apply(str)},
            labels={layout.NODE_ROLE_LABEL: layout.SYSTEM_NODE_ROLE},
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*attachments, vpc_cni, *args.node_routing]),
        )
        return vpc_cni

    def _kubernetes_provider(self, name: str, args: ClusterArgs, control_plane: eks.Cluster, tags: dict) -> k8s.Provider:
        """The Kubernetes provider, and the ingress rules that let the in-VPC API clients reach the endpoint."""
        # EKS user guide, "Cluster API server endpoint": with private access, the cluster security group must allow
        # ingress on 443 from the network the client is in.
        api_clients = [
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-api-from-client-{i}",
                security_group_id=control_plane.eks_cluster.vpc_config.cluster_security_group_id,
                referenced_security_group_id=group_id,
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                description="Kubernetes API from an in-VPC client (the deploy runner, the API access host)",
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for i, group_id in enumerate(args.api_client_security_group_ids)
        ]
        return k8s.Provider(
            f"{name}-k8s",
            kubeconfig=control_plane.kubeconfig_json,
            enable_server_side_apply=True,
            # Reach the API before using it, and keep the way there until the last Kubernetes object is deleted. The
            # SDK records a component dependency as one on each of its resources (pulumi sdk/python/lib/pulumi/runtime/
            # rpc.py, _add_dependency). The engine updates or replaces a resource for its inputs, provider, replaceWith
            # or deletedWith, never its dependencies (pkg/resource/deploy/step_generator.go, diff): no deployed
            # resource changes.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*api_clients, *args.api_access_path]),
        )

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
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> aws.eks.Addon:
        """An EKS add-on of this cluster; its service account, in kube-system, gets a role of its own when it calls
        AWS (``service_account`` and ``policy_arn``)."""
        common = {
            "addon_name": addon_name,
            "cluster_name": control_plane.eks_cluster.name,
            "kubernetes_version": cfg.kubernetes_version,
            "tags": tags,
            "parent": self,
            "configuration": configuration,
            "depends_on": depends_on,
        }
        if service_account is None or policy_arn is None:
            return eks_addon(f"{name}-{short}", **common)
        return service_account_addon(
            f"{name}-{short}",
            oidc_provider_arn=control_plane.oidc_provider_arn,
            oidc_issuer=control_plane.oidc_issuer,
            namespace="kube-system",
            service_account=service_account,
            policy_arn=policy_arn,
            **common,
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
            depends_on=[self._system_node_group],
        )
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-gp3",
            metadata={"name": BLOCK_STORAGE_CLASS},
            provisioner="ebs.csi.aws.com",
            parameters={"type": "gp3", "encrypted": "true"},
            volume_binding_mode="WaitForFirstConsumer",
            reclaim_policy="Retain" if protect else "Delete",
            allow_volume_expansion=True,
            opts=pulumi.ResourceOptions(parent=self, provider=self._kube_provider, depends_on=[addon]),
        )
        return storage_class.metadata.name
