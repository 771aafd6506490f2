"""The stack's configuration as it enters: one frozen model per object, keyed by the stack file's names.

Every field states its type, bound and pattern; unknown keys are refused. Defaults of the keys declared in
Pulumi.yaml are applied by the Pulumi CLI (and by ``preflight``, which reads stack files as the CLI does), so
this model requires each of them. Rules across fields (an instance type offered in the chosen AZ, a
reservation in that AZ, member counts against node counts) are in ``trainium_eks.config.rules``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from trainium_eks import catalog, versions
from trainium_eks.config import fields as f

FSX_DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
# etcd needs a majority of its members: 3 survive the loss of one, 5 of two; an even count adds no tolerance.
ETCD_MEMBER_COUNTS = (1, 3, 5)
DEFAULT_ROOT_VOLUME_GIB = 500  # the tutorial's NodeVolumeSize: room for images and the local compile cache
# CloudWatch Logs retention values (PutRetentionPolicy; listed in pulumi-aws's cloudwatch.LogGroup
# retention_in_days). 0 ("never expire") is left out: the key exists so that logs stop costing after a while.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
# Keys that no longer exist, with what replaced them: a stack file that still sets one gets this fix.
RETIRED_KEYS = {
    "neuronMonitor": (
        "removed: it switched the Neuron node problem detector, not neuron-monitor",
        "remove it: the EKS node monitoring agent (nodeMonitoringAgent) reports Neuron faults and nodeRepair acts on "
        "them; neuron-monitor's metrics come with cloudWatchObservability",
    ),
}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False)


# Node counts have no upper bound here: EKS's limits on them are service quotas, which an account can raise.
PUBLIC_ACCESS_CIDRS_MAX = 40
NodeCount = f.Integer  # the order of min, desired and max is a rule across fields
# EKS NodeRepairConfig counts (maxParallelNodesRepairedCount, maxUnhealthyNodeThresholdCount): a minimum of 1 and no
# maximum (EKS API reference, NodeRepairConfig).
RepairCount = Annotated[f.Integer, f.rule(lambda v: v >= 1, "{value} is below 1", "use a count of 1 or more")]


NodeKubernetesVersion = f.one_of(
    ("", *versions.SUPPORTED_KUBERNETES_VERSIONS),
    'use "" (kubernetesVersion) or one of ' + ", ".join(versions.SUPPORTED_KUBERNETES_VERSIONS),
    what="a supported Kubernetes version",
)


class CapacityReservationInput(Strict):
    type: f.one_of(("odcr", "capacity-block"), "use odcr or capacity-block")
    id: f.matching(f.RESERVATION_ID, "'{value}' is not a capacity reservation ID", "use the cr-... ID")
    az_id: StrictStr = Field(alias="azId")
    # A reservation is billed for its instances whether they run or not (an ODCR at the on-demand rate; a Capacity
    # Block up front at its own price: EC2 User Guide, "Capacity Blocks pricing and billing"), so the cost estimate
    # needs both; AWS publishes no fixed Capacity Block price (it follows supply and demand).
    instance_count: f.between(1, 10_000, "use the reservation's instance count") = Field(alias="instanceCount")
    hourly_usd: (
        Annotated[f.Number, f.rule(lambda v: v > 0, "{value} is not a price", "use the block's USD per instance-hour")] | None
    ) = Field(None, alias="hourlyUsd")


# How a Trainium node group is provisioned: an EKS managed node group of a fixed size, or a Karpenter NodePool that
# brings nodes when jobs wait and removes them when idle.
PROVISIONING = ("managed", "karpenter")
# Karpenter removes an empty elastic node after this many minutes (NodePool consolidateAfter): long enough for the
# next job of a queue to find the node, its pulled image and its warm local compile cache, short enough that an idle
# trn1.32xlarge (about 21.50 USD/hour) is not kept for long.
DEFAULT_IDLE_MINUTES = 30
MAX_IDLE_MINUTES = 24 * 60


class NodeGroupInput(Strict):
    name: f.dns_label(32)
    instance_type: f.one_of(tuple(catalog.TRAINIUM_TYPES), what="a Trainium type in the catalog") = Field(alias="instanceType")
    provisioning: f.one_of(PROVISIONING, "use managed (a fixed-size EKS managed node group) or karpenter (elastic)") = "managed"
    # A managed group needs all three sizes; an elastic group only maxSize (rules.py checks each kind).
    min_size: NodeCount | None = Field(None, alias="minSize")
    desired_size: NodeCount | None = Field(None, alias="desiredSize")
    max_size: NodeCount = Field(alias="maxSize")
    idle_minutes: f.between(1, MAX_IDLE_MINUTES, "use whole minutes from 1 to 1440") | None = Field(None, alias="idleMinutes")
    efa: f.JsonBoolean | None = None  # None: what the instance type supports
    root_volume_gib: f.between(100, 16384, "use at least 100 GiB") = Field(DEFAULT_ROOT_VOLUME_GIB, alias="rootVolumeGiB")
    labels: dict[f.LabelKey, f.LabelValue] = Field(default_factory=dict, max_length=64)
    capacity_reservation: CapacityReservationInput | None = Field(None, alias="capacityReservation")


PrincipalArn = f.matching(f.PRINCIPAL_ARN, "'{value}' is not an IAM role or user ARN", "use arn:aws:iam::<account>:role/<name>")
Share = Annotated[f.Number, f.rule(lambda v: 0 < v <= 1, "{value} is outside (0, 1]", "use a fraction such as 0.5")]


class QueueInput(Strict):
    name: Annotated[
        f.dns_label(),
        f.rule(lambda v: v != "default", "'{value}' is taken", "use a unique name other than Volcano's built-in 'default'"),
    ]
    weight: f.between(1, 65535, "use a positive weight") = 1
    neuron_share: Share = Field(1.0, alias="neuronShare")


class TeamInput(Strict):
    # The namespace and queue are team-<name>; 20 characters leave room for the volume's and groups' names.
    name: f.dns_label(20, "use up to 20 lowercase letters, digits and '-', e.g. nlp")
    neuron_share: Share = Field(alias="neuronShare")
    weight: f.between(1, 65535, "use a positive weight") = 1
    principal_arns: Annotated[list[PrincipalArn], f.Structured] = Field(default_factory=list, alias="principalArns")


class StackInput(Strict):
    """Every key of the project's namespace (``trainium-eks:<key>``), as the CLI hands them to the program."""

    environment: f.dns_label(16, "use lowercase letters, digits and '-', e.g. dev")
    owner: f.TagValue
    cost_center: f.TagValue = Field(alias="costCenter")
    trainium_az_id: StrictStr = Field(alias="trainiumAzId")
    vpc_cidr: f.VpcCidr = Field(alias="vpcCidr")
    availability_zone_count: f.Integer = Field(alias="availabilityZoneCount")
    nat_gateways: f.one_of(("single", "perAz"), "use single or perAz") = Field(alias="natGateways")
    existing_vpc_id: Annotated[
        StrictStr, f.rule(lambda v: v == "" or bool(f.VPC_ID.match(v)), "'{value}' is not a VPC ID", "use the vpc-... ID")
    ] = Field(alias="existingVpcId")
    existing_private_subnet_ids: Annotated[
        list[f.matching(f.SUBNET_ID, "'{value}' is not a subnet ID", "use subnet-... IDs")],
        f.Structured,
        f.rule(lambda v: len(set(v)) == len(v), "lists a subnet twice", "list each subnet once"),
    ] = Field(alias="existingPrivateSubnetIds")
    existing_trainium_subnet_id: StrictStr = Field(alias="existingTrainiumSubnetId")
    kubernetes_version: f.one_of(versions.SUPPORTED_KUBERNETES_VERSIONS) = Field(alias="kubernetesVersion")
    node_image_release: Annotated[
        StrictStr,
        f.rule(
            lambda v: v in versions.NODE_IMAGE_RELEASES,
            lambda v: (
                "'latest' floats: a new node would get whatever driver EKS published that day"
                if v.lower().endswith("latest")
                else f"'{v}' is not a node image release of trainium_eks/versions.py"
            ),
            "pin one of " + ", ".join(versions.NODE_IMAGE_RELEASES),
        ),
    ] = Field(alias="nodeImageRelease")
    # The nodes' Kubernetes version during an upgrade: "" follows kubernetesVersion; an older supported version holds
    # the managed groups on it while the control plane and add-ons move first (README, "Upgrading").
    system_node_kubernetes_version: NodeKubernetesVersion = Field(alias="systemNodeKubernetesVersion")
    trainium_node_kubernetes_version: NodeKubernetesVersion = Field(alias="trainiumNodeKubernetesVersion")
    endpoint_public_access: f.Boolean = Field(alias="endpointPublicAccess")
    public_access_cidrs: Annotated[
        list[f.PublicCidr],
        f.Structured,
        f.rule(lambda v: len(set(v)) == len(v), "lists a range twice", "list each range once"),
        # EKS User Guide, "Amazon EKS service quotas": 40 public endpoint access CIDR ranges per cluster, not adjustable
        f.rule(lambda v: len(v) <= PUBLIC_ACCESS_CIDRS_MAX, "lists more than 40 ranges, EKS's fixed limit", "merge ranges"),
    ] = Field(alias="publicAccessCidrs")
    cluster_admin_principal_arns: Annotated[list[PrincipalArn], f.Structured] = Field(alias="clusterAdminPrincipalArns")
    ci_runner_repository: f.matching_or_empty(
        f.GITHUB_REPOSITORY, "'{value}' is not a GitHub repository", "use owner/name, e.g. example-org/trainium-eks"
    ) = Field(alias="ciRunnerRepository")
    ci_runner_connection_arn: f.matching_or_empty(
        f.CONNECTION_ARN,
        "'{value}' is not a CodeConnections connection ARN",
        "use arn:aws:codeconnections:<region>:<account>:connection/<id>",
    ) = Field(alias="ciRunnerConnectionArn")
    system_node_instance_type: f.one_of(tuple(catalog.GENERAL_TYPES), what="a system type in the catalog") = Field(
        alias="systemNodeInstanceType"
    )
    system_node_min_size: NodeCount = Field(alias="systemNodeMinSize")
    system_node_desired_size: NodeCount = Field(alias="systemNodeDesiredSize")
    system_node_max_size: NodeCount = Field(alias="systemNodeMaxSize")
    cloudwatch_observability: f.Boolean = Field(alias="cloudWatchObservability")
    cloudwatch_log_retention_days: Annotated[
        f.Integer,
        f.rule(
            lambda v: v in LOG_RETENTION_DAYS,
            "{value} is not a CloudWatch Logs retention period",
            "use one of " + ", ".join(map(str, LOG_RETENTION_DAYS)),
        ),
    ] = Field(alias="cloudWatchLogRetentionDays")
    alarm_topic_arn: Annotated[
        StrictStr,
        f.rule(
            lambda v: v == "" or bool(f.SNS_TOPIC_ARN.match(v)),
            "'{value}' is not an SNS topic ARN",
            "use arn:aws:sns:<region>:<account>:<topic>, or an empty string for no alarms",
        ),
    ] = Field(alias="alarmTopicArn")
    node_monitoring_agent: f.Boolean = Field(alias="nodeMonitoringAgent")
    node_repair: f.Boolean = Field(alias="nodeRepair")
    node_repair_max_parallel: RepairCount = Field(alias="nodeRepairMaxParallel")
    node_repair_max_unhealthy: RepairCount = Field(alias="nodeRepairMaxUnhealthy")
    fsx_deployment_type: f.one_of(FSX_DEPLOYMENT_TYPES) = Field(alias="fsxDeploymentType")
    fsx_storage_capacity_gib: f.Integer = Field(alias="fsxStorageCapacityGiB")  # its steps depend on the type
    fsx_throughput_per_tib: f.Integer = Field(alias="fsxThroughputPerTiB")
    fsx_data_repository_path: f.S3Url = Field(alias="fsxDataRepositoryPath")
    fsx_claim_name: f.dns_label() = Field(alias="fsxClaimName")
    etcd_members: Annotated[
        f.Integer,
        f.rule(
            lambda v: v in ETCD_MEMBER_COUNTS,
            "{value} is not 1, 3 or 5",
            "use an odd count: 1 (no fault tolerance), 3 or 5 (a majority must stay up)",
        ),
    ] = Field(alias="etcdMembers")
    etcd_storage_gib: f.between(1, 100, "8 GiB is plenty for rendezvous") = Field(alias="etcdStorageGiB")
    ecr_repository_name: StrictStr = Field(alias="ecrRepositoryName")
    ecr_keep_images: f.between(1, 1000, "keep at least one image") = Field(alias="ecrKeepImages")
    ecr_untagged_expiry_days: f.between(1, 365, "use a number of days") = Field(alias="ecrUntaggedExpiryDays")
    tensorboard: f.Boolean
    job_namespace: Annotated[
        StrictStr,
        f.rule(
            lambda v: bool(f.DNS_LABEL.match(v)) and not v.startswith("kube-"),
            "'{value}' is not a usable namespace",
            "use a DNS label outside kube-*, e.g. training",
        ),
    ] = Field(alias="jobNamespace")
    protect_stateful_resources: f.Boolean = Field(alias="protectStatefulResources")
    trainium_node_groups: Annotated[
        list[NodeGroupInput],
        f.Structured,
        f.rule(bool, "empty", "add at least one Trainium node group"),
    ] = Field(alias="trainiumNodeGroups")
    volcano_queues: Annotated[
        list[QueueInput],
        f.Structured,
        f.rule(bool, "empty", "list at least one queue or remove the key (one queue by default)"),
    ] = Field(alias="volcanoQueues")
    teams: Annotated[list[TeamInput], f.Structured]
