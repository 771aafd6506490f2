"""Storage: FSx for Lustre shared by every training pod, with its CSI driver and a static volume and claim.

The file system sits in the Trainium subnet, so nodes read it without crossing an AZ. It is exposed to
Kubernetes as a static PersistentVolume (the file system exists before any claim) bound to a ReadWriteMany
claim in the job namespace. Layout on the volume (mounted at /data by jobs and TensorBoard):

    /data/datasets/               training data (tokenised HDF5 shards)
    /data/datasets-repo/          the S3 data repository, when one is configured (PERSISTENT_2)
    /data/checkpoints/<job>/      checkpoints
    /data/neuron-compile-cache/   Neuron compiler cache shared by precompile and training jobs
    /data/tensorboard/<job>/      event files read by TensorBoard
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import ClusterHandle
from components.irsa import irsa_role
from components.kube import helm_release, system_node_selector
from trainium_eks import layout, versions
from trainium_eks.config import StorageConfig

LUSTRE_PORT = 988
LUSTRE_CLIENT_PORTS = (1018, 1023)  # Lustre clients connect from these reserved ports
LUSTRE_VERSION = "2.15"
FSX_CSI_DRIVER = "fsx.csi.aws.com"
FSX_CSI_SERVICE_ACCOUNT = "fsx-csi-controller-sa"
PERSISTENT_BACKUP_DAYS = 7


@dataclass(frozen=True)
class StorageArgs:
    config: StorageConfig
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    cluster: ClusterHandle  # the CSI controller runs on its system nodes; its release waits for them
    job_namespace: pulumi.Input[str]
    protect: bool


LUSTRE_PORT_RANGES = {"lustre": (LUSTRE_PORT, LUSTRE_PORT), "lustre-clients": LUSTRE_CLIENT_PORTS}


def fsx_csi_policy(file_system_arn: str) -> str:
    """What the FSx CSI controller needs for a static volume: describe it, and expand this file system only."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "Describe", "Effect": "Allow", "Action": ["fsx:DescribeFileSystems"], "Resource": "*"},
                {"Sid": "Expand", "Effect": "Allow", "Action": ["fsx:UpdateFileSystem"], "Resource": file_system_arn},
            ],
        }
    )


class Storage(pulumi.ComponentResource):
    file_system: aws.fsx.LustreFileSystem
    claim_name: pulumi.Output[str]

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:storage:Storage", name, None, opts)
        tags = dict(args.cluster.tags)
        security_group = self._security_group(name, args, tags)
        self.file_system = self._file_system(name, args, security_group, tags)
        self._csi_driver(name, args, tags)
        k8s_opts = pulumi.ResourceOptions(parent=self)
        claim = static_claim(
            f"{name}-fsx",
            FsxVolume(
                volume_name=pulumi.Output.concat(args.job_namespace, "-", args.config.claim_name),
                namespace=args.job_namespace,
                claim_name=args.config.claim_name,
                capacity_gib=args.config.capacity_gib,
                handle=self.file_system.id,
                dns_name=self.file_system.dns_name,
                mount_name=self.file_system.mount_name,
                labels={"app.kubernetes.io/part-of": "trainium-eks"},
            ),
            volume_opts=k8s_opts,
            claim_opts=k8s_opts,
        )

        self.claim_name = claim.metadata.name
        self.register_outputs({"fileSystemId": self.file_system.id, "claimName": self.claim_name})

    def _security_group(self, name: str, args: StorageArgs, tags: dict) -> aws.ec2.SecurityGroup:
        """The file system's security group: Lustre ports from the cluster's nodes and between the servers."""
        child = pulumi.ResourceOptions(parent=self)
        # Rules are separate resources (never inline, which would be authoritative over them): the file system
        # then needs only its group and subnet, and is created while the EKS control plane is.
        security_group = aws.ec2.SecurityGroup(
            f"{name}-lustre",
            description="FSx for Lustre: Lustre ports from cluster nodes and between servers",
            vpc_id=args.vpc_id,
            tags={**tags, "Name": f"{name}-lustre"},
            opts=child,
        )
        sources = {"self": security_group.id, "nodes": args.cluster.security_group_id}
        for (rule, (low, high)), (source, source_group) in itertools.product(LUSTRE_PORT_RANGES.items(), sources.items()):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-{rule}-from-{source}",
                security_group_id=security_group.id,
                referenced_security_group_id=source_group,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description=f"TCP {low}-{high} from {source}",
                tags=tags,
                opts=child,
            )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-lustre-egress",
            security_group_id=security_group.id,
            ip_protocol="-1",
            cidr_ipv4="0.0.0.0/0",
            description="Outbound",
            tags=tags,
            opts=child,
        )
        return security_group

    def _file_system(
        self, name: str, args: StorageArgs, security_group: aws.ec2.SecurityGroup, tags: dict
    ) -> aws.fsx.LustreFileSystem:
        """The Lustre file system (with its key and backups when persistent) and its S3 data repository, if any."""
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self)
        stateful = pulumi.ResourceOptions(parent=self, protect=args.protect)
        persistent = {}
        if cfg.persistent:
            key = aws.kms.Key(
                f"{name}-fsx",
                description="FSx for Lustre data at rest",
                enable_key_rotation=True,
                deletion_window_in_days=30,
                tags=tags,
                opts=stateful,
            )
            persistent = {
                "kms_key_id": key.arn,
                "per_unit_storage_throughput": cfg.throughput_per_tib,
                "automatic_backup_retention_days": PERSISTENT_BACKUP_DAYS,
                "copy_tags_to_backups": True,
                "skip_final_backup": False,  # destroying the file system leaves a backup behind
            }
        # Scratch file systems are encrypted at rest with FSx-managed keys; a customer key is not accepted.
        file_system = aws.fsx.LustreFileSystem(
            f"{name}-lustre",
            subnet_ids=args.subnet_id,
            security_group_ids=[security_group.id],
            deployment_type=cfg.deployment_type,
            storage_type="SSD",
            storage_capacity=cfg.capacity_gib,
            file_system_type_version=LUSTRE_VERSION,
            data_compression_type="LZ4",
            tags={**tags, "Name": f"{name}-lustre"},
            opts=stateful,
            **persistent,
        )
        if cfg.data_repository_path:
            aws.fsx.DataRepositoryAssociation(
                f"{name}-s3",
                file_system_id=file_system.id,
                file_system_path=layout.DATA_REPOSITORY_DIR,
                data_repository_path=cfg.data_repository_path,
                batch_import_meta_data_on_create=True,
                s3={
                    "auto_import_policy": {"events": ["NEW", "CHANGED", "DELETED"]},
                    "auto_export_policy": {"events": ["NEW", "CHANGED", "DELETED"]},
                },
                tags=tags,
                opts=child,
            )
        return file_system

    def _csi_driver(self, name: str, args: StorageArgs, tags: dict) -> None:
        """The FSx CSI driver, its controller on a service-account role that may expand this file system only."""
        child = pulumi.ResourceOptions(parent=self)
        fsx_role = irsa_role(
            f"{name}-fsx-csi",
            description="FSx for Lustre CSI controller",
            oidc_provider_arn=args.cluster.oidc_provider_arn,
            oidc_issuer=args.cluster.oidc_issuer,
            namespace="kube-system",
            service_account=FSX_CSI_SERVICE_ACCOUNT,
            tags=tags,
            parent=self,
        )
        aws.iam.RolePolicy(f"{name}-fsx-csi", role=fsx_role.id, policy=self.file_system.arn.apply(fsx_csi_policy), opts=child)
        helm_release(
            name,
            "aws-fsx-csi-driver",
            versions.FSX_CSI_CHART,
            namespace="kube-system",
            values={
                "controller": {
                    "serviceAccount": {
                        "create": True,
                        "name": FSX_CSI_SERVICE_ACCOUNT,
                        "annotations": {"eks.amazonaws.com/role-arn": fsx_role.arn},
                    },
                    "nodeSelector": system_node_selector(),
                },
                "node": {"tolerateAllTaints": True},  # the mount helper must run on the tainted Trainium nodes
            },
            parent=self,
            depends_on=[args.cluster.system_nodes],
        )


@dataclass(frozen=True)
class FsxVolume:
    """A statically provisioned volume on the FSx file system (or on one directory of it) and the claim bound to it."""

    volume_name: pulumi.Input[str]
    namespace: pulumi.Input[str]
    claim_name: str
    capacity_gib: int  # the file system's: the volume follows it; the claim requests it when created (CLAIM_REQUEST)
    handle: pulumi.Input[str]  # the kubelet keys a CSI volume's mounts by its handle: one per distinct mount
    dns_name: pulumi.Input[str]
    mount_name: pulumi.Input[str]  # the file system's mount name, followed by a directory to mount that directory alone
    labels: dict[str, str]
    reserved: bool = False  # a claimRef: only the claim in ``namespace`` can bind the volume


# A claim's request is set once, when the claim is created. The API server refuses to grow a statically bound claim
# (admission plugin PersistentVolumeClaimResize: "only dynamically provisioned pvc can be resized and the storageclass
# that provisions the pvc must support resize") and to shrink any bound claim below its status.capacity
# (ValidatePersistentVolumeClaimUpdate), so the engine keeps the request it created the claim with (its
# processIgnoreChanges) while the file system grows. The volume's capacity follows the file system: a PersistentVolume's
# spec.capacity is mutable (ValidatePersistentVolumeUpdate holds only its source, volumeMode and nodeAffinity), and a
# claim stays bound to a volume at least as large as its request.
CLAIM_REQUEST = "spec.resources.requests.storage"


def static_claim(
    name: str, volume: FsxVolume, volume_opts: pulumi.ResourceOptions, claim_opts: pulumi.ResourceOptions
) -> k8s.core.v1.PersistentVolumeClaim:
    capacity = f"{volume.capacity_gib}Gi"
    reservation = {"claimRef": {"namespace": volume.namespace, "name": volume.claim_name}} if volume.reserved else {}
    persistent_volume = k8s.core.v1.PersistentVolume(
        name,
        metadata={"name": volume.volume_name, "labels": volume.labels},
        spec={
            "capacity": {"storage": capacity},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",  # the file system outlives the claim
            "storageClassName": "",
            "mountOptions": ["flock"],
            **reservation,
            "csi": {
                "driver": FSX_CSI_DRIVER,
                "volumeHandle": volume.handle,
                # NodePublishVolume mounts <dnsname>@tcp:/<mountname> (aws-fsx-csi-driver pkg/driver/node.go)
                "volumeAttributes": {"dnsname": volume.dns_name, "mountname": volume.mount_name},
            },
        },
        opts=volume_opts,
    )
    return k8s.core.v1.PersistentVolumeClaim(
        name,
        metadata={"name": volume.claim_name, "namespace": volume.namespace, "labels": volume.labels},
        spec={
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": persistent_volume.metadata.name,
            "resources": {"requests": {"storage": capacity}},
        },
        opts=pulumi.ResourceOptions.merge(claim_opts, pulumi.ResourceOptions(ignore_changes=[CLAIM_REQUEST])),
    )
