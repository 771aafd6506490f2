"""The stack's keys for running the platform: monitoring and alarms, node health, storage (FSx, etcd), the
registry, jobs and protection. Each is declared with ``key`` (trainium_eks/config/stack_items.py): its type,
bounds and pattern, what it is, its docs table and its default.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import StrictStr

from trainium_eks.config import fields as f
from trainium_eks.config.stack_items import Strict, key

FSX_DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
# etcd needs a majority of its members: 3 survive the loss of one, 5 of two; an even count adds no tolerance.
ETCD_MEMBER_COUNTS = (1, 3, 5)
# CloudWatch Logs retention values (PutRetentionPolicy; listed in pulumi-aws's cloudwatch.LogGroup
# retention_in_days). 0 ("never expire") is left out: the key exists so that logs stop costing after a while.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
# Days of control-plane (audit, API, authenticator ...) logs kept by default: terraform-aws-modules/eks's default for
# the same group (variables.tf, cloudwatch_log_group_retention_in_days: 90).
CONTROL_PLANE_LOG_RETENTION_DAYS = 90
# EKS NodeRepairConfig counts (maxParallelNodesRepairedCount, maxUnhealthyNodeThresholdCount): a minimum of 1 and no
# maximum (EKS API reference, NodeRepairConfig).
RepairCount = Annotated[
    f.Integer, f.rule(lambda v: v >= 1, "{value} is below 1", "use a count of 1 or more"), f.Shown({"minimum": 1})
]

# The tables of docs/configuration.md that list these keys.
MONITORING = "monitoring"
NODE_HEALTH = "node-health"
STORAGE = "storage"
REGISTRY_AND_JOBS = "registry-and-jobs"


class OperationsInput(Strict):
    """The keys that run the platform: monitoring, node health, storage, the registry, jobs and protection."""

    cloudwatch_observability: f.Boolean = key(
        "cloudWatchObservability",
        "The Amazon CloudWatch Observability EKS add-on on its own service-account role: Container Insights with "
        "neuron-monitor's Neuron metrics and EFA metrics, container logs, and the stack's CloudWatch dashboard.",
        section=MONITORING,
        default=True,
        details="The add-on runs at EKS's default build for the cluster version, its role is "
        "`amazon-cloudwatch:cloudwatch-agent` with `CloudWatchAgentServerPolicy`; it runs neuron-monitor on Trainium "
        "nodes, Fluent Bit ships container, data-plane and host logs to CloudWatch Logs, and the dashboard is "
        "`<cluster>-training`. Application Signals is left out. Billed by CloudWatch per metric observation and per GB "
        "of logs (not in the cost estimate).",
    )
    cloudwatch_log_retention_days: Annotated[
        f.Integer,
        f.rule(
            lambda v: v in LOG_RETENTION_DAYS,
            "{value} is not a CloudWatch Logs retention period",
            "use one of " + ", ".join(map(str, LOG_RETENTION_DAYS)),
        ),
        f.Shown({"enum": list(LOG_RETENTION_DAYS)}),
    ] = key(
        "cloudWatchLogRetentionDays",
        "Days the add-on's container, host and performance logs are kept (a CloudWatch Logs retention value).",
        section=MONITORING,
        default=30,
        details="The log groups `/aws/containerinsights/<cluster>/{application,dataplane,host,performance}` are created by "
        "the stack before the add-on, so that none is created without expiry.",
    )
    control_plane_log_retention_days: Annotated[
        f.Integer,
        f.rule(
            lambda v: v in LOG_RETENTION_DAYS,
            "{value} is not a CloudWatch Logs retention period",
            "use one of " + ", ".join(map(str, LOG_RETENTION_DAYS)),
        ),
        f.Shown({"enum": list(LOG_RETENTION_DAYS)}),
    ] = key(
        "controlPlaneLogRetentionDays",
        "Days the EKS control-plane logs (api, audit, authenticator, controllerManager, scheduler) are kept (a "
        "CloudWatch Logs retention value).",
        section=MONITORING,
        default=CONTROL_PLANE_LOG_RETENTION_DAYS,
        details="The group `/aws/eks/<cluster>/cluster` is created by the stack before the cluster and removed by "
        "`pulumi destroy`; the cluster role may not create log groups, so EKS cannot re-create it outside the stack. "
        "Separate from cloudWatchLogRetentionDays: audit logs often have to be kept longer than container logs, and "
        "they are written whether or not the CloudWatch add-on runs.",
    )
    alarm_topic_arn: Annotated[
        StrictStr,
        f.rule(
            lambda v: v == "" or bool(f.SNS_TOPIC_ARN.match(v)),
            "'{value}' is not an SNS topic ARN",
            "use arn:aws:sns:<region>:<account>:<topic>, or an empty string for no alarms",
        ),
    ] = key(
        "alarmTopicArn",
        "Existing SNS topic that receives the stack's CloudWatch alarms (nodes lost or not ready, Neuron ECC errors, FSx "
        "nearly full, etcd without a majority); empty means no alarms. Needs cloudWatchObservability.",
        section=MONITORING,
        default="",
        details="`arn:aws:sns:<region>:<account>:<name>`, notified on alarm and on recovery. The topic is yours (its "
        "subscriptions, its on-call integration); the stack does not create or delete it.",
    )
    node_monitoring_agent: f.Boolean = key(
        "nodeMonitoringAgent",
        "The EKS node monitoring agent add-on: Neuron, kernel, networking, storage and runtime faults become node "
        "conditions (AcceleratedHardwareReady, ...). No AWS charge; a DaemonSet on every node.",
        section=NODE_HEALTH,
        default=True,
        details="`eks-node-monitoring-agent` at EKS's default build for the cluster version, without a service-account "
        "role: it needs no AWS permissions.",
    )
    node_repair: f.Boolean = key(
        "nodeRepair",
        "EKS node auto repair on every Trainium node group: a node whose health condition fails is rebooted or "
        "replaced. Needs nodeMonitoringAgent (without it repair sees only the kubelet's Ready condition).",
        section=NODE_HEALTH,
        default=True,
        details="`nodeRepairConfig`: the node is cordoned first; Neuron DMA, HBM, NeuronCore or SRAM uncorrectable errors "
        "replace it, 10 minutes after detection. Required in prod by the `trainium-node-auto-repair` policy.",
    )
    node_repair_max_parallel: RepairCount = key(
        "nodeRepairMaxParallel",
        "Nodes of one Trainium node group repaired at the same time; at most nodeRepairMaxUnhealthy.",
        section=NODE_HEALTH,
        default=1,
        details="EKS's `maxParallelNodesRepairedCount`.",
    )
    node_repair_max_unhealthy: RepairCount = key(
        "nodeRepairMaxUnhealthy",
        "Unhealthy nodes in one Trainium node group above which repair stops (a fault that hits many nodes at once is "
        "for a person to look at, not for a replacement loop).",
        section=NODE_HEALTH,
        default=1,
        details="EKS's `maxUnhealthyNodeThresholdCount`. EKS itself also halts repair in a group of more than five nodes "
        "with more than 20% unhealthy.",
    )
    fsx_deployment_type: f.one_of(FSX_DEPLOYMENT_TYPES) = key(
        "fsxDeploymentType",
        "FSx for Lustre deployment type.",
        section=STORAGE,
        default="SCRATCH_2",
        details="Persistent types get a KMS key and daily backups kept 7 days.",
    )
    fsx_storage_capacity_gib: f.Integer = key(  # its steps depend on the type
        "fsxStorageCapacityGiB",
        "FSx capacity in GiB: 1200, 2400, then multiples of 2400 (SCRATCH_1: of 3600).",
        section=STORAGE,
        default=1200,
        details="At most the account's FSx for Lustre storage quota in the region (`FSX_LUSTRE_STORAGE_QUOTA_GIB` in "
        "`trainium_eks/catalog.py`).",
    )
    fsx_throughput_per_tib: f.Integer = key(
        "fsxThroughputPerTiB",
        "Persistent throughput in MB/s/TiB: PERSISTENT_1 50, 100 or 200; PERSISTENT_2 125, 250, 500 or 1000; 0 for scratch.",
        section=STORAGE,
        default=0,
    )
    fsx_data_repository_path: f.S3Url = key(
        "fsxDataRepositoryPath",
        "s3://bucket/prefix linked to /datasets-repo through a data repository association (PERSISTENT_2 only).",
        section=STORAGE,
        default="",
        details="Pods see it as `/data/datasets-repo`, with automatic import and export.",
    )
    fsx_claim_name: f.dns_label() = key(
        "fsxClaimName",
        "Name of the ReadWriteMany PersistentVolumeClaim for the file system in jobNamespace.",
        section=STORAGE,
        default="fsx-claim",
    )
    etcd_members: Annotated[
        f.Integer,
        f.rule(
            lambda v: v in ETCD_MEMBER_COUNTS,
            "{value} is not 1, 3 or 5",
            "use an odd count: 1 (no fault tolerance), 3 or 5 (a majority must stay up)",
        ),
        f.Shown({"enum": list(ETCD_MEMBER_COUNTS)}),
    ] = key(
        "etcdMembers",
        "Members of the rendezvous etcd cluster, one per system node; 3 keeps every training job running through the "
        "loss of one member (a node drain, an eviction). Needs systemNodeMinSize >= members.",
        section=STORAGE,
        default=3,
    )
    etcd_storage_gib: f.between(1, 100, "8 GiB is plenty for rendezvous") = key(
        "etcdStorageGiB", "Size of each etcd member's encrypted gp3 persistent volume.", section=STORAGE, default=8
    )
    ecr_repository_name: StrictStr = key(
        "ecrRepositoryName",
        "ECR repository for training images; empty means trainium-eks/<stack>/training.",
        section=REGISTRY_AND_JOBS,
        default="",
    )
    ecr_keep_images: f.between(1, 1000, "keep at least one image") = key(
        "ecrKeepImages",
        "Tagged images kept by the ECR lifecycle policy (older ones expire).",
        section=REGISTRY_AND_JOBS,
        default=30,
    )
    ecr_untagged_expiry_days: f.between(1, 365, "use a number of days") = key(
        "ecrUntaggedExpiryDays", "Days after which untagged ECR images expire.", section=REGISTRY_AND_JOBS, default=7
    )
    tensorboard: f.Boolean = key(
        "tensorboard",
        "Run TensorBoard (a Deployment and a ClusterIP Service, reached by kubectl port-forward) over /data/tensorboard.",
        section=REGISTRY_AND_JOBS,
        default=True,
    )
    job_namespace: Annotated[
        StrictStr,
        f.rule(
            lambda v: bool(f.DNS_LABEL.match(v)) and not v.startswith("kube-"),
            "'{value}' is not a usable namespace",
            "use a DNS label outside kube-*, e.g. training",
        ),
    ] = key(
        "jobNamespace",
        "Namespace of training jobs, the FSx claim, etcd and TensorBoard (a DNS label outside kube-*).",
        section=REGISTRY_AND_JOBS,
        default="training",
    )
    protect_stateful_resources: f.Boolean = key(
        "protectStatefulResources",
        "Protect the file system, ECR repository, KMS keys and cluster from `pulumi destroy`.",
        section=REGISTRY_AND_JOBS,
        default=False,
        details="Pulumi's `protect`, EKS deletion protection, and the gp3 class retains volumes.",
    )
