"""The stack's configuration as it enters: one frozen model per object, keyed by the stack file's names.

Every field states its type, bound and pattern; unknown keys are refused. Each key also says what it is, which
table of docs/configuration.md lists it and the default Pulumi.yaml declares (``stack_items.key``): ``make docs``
generates Pulumi.yaml's ``config:`` block and the guide's key tables from these models
(``trainium_eks.config.schema_docs``). The Pulumi CLI applies those defaults (and so does ``preflight``, which reads
stack files as the CLI does), so this model requires each key. Rules across fields (an instance type offered in the
chosen AZ, a reservation in that AZ, member counts against node counts) are in ``trainium_eks.config.rules``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import StrictStr

from trainium_eks import catalog, versions
from trainium_eks.config import fields as f
from trainium_eks.config.key_values import (
    CONTROL_PLANE_LOG_RETENTION_DAYS,
    ETCD_MEMBER_COUNTS,
    FSX_DEPLOYMENT_TYPES,
    PUBLIC_ACCESS_CIDRS_MAX,
    NodeKubernetesVersion,
    RepairCount,
    RetentionDays,
)
from trainium_eks.config.stack_items import NodeCount, NodeGroupInput, PrincipalArn, QueueInput, Strict, TeamInput, key

# Keys that no longer exist, with what replaced them: a stack file that still sets one gets this fix.
RETIRED_KEYS = {
    "neuronMonitor": (
        "removed: it switched the Neuron node problem detector, not neuron-monitor",
        "remove it: the EKS node monitoring agent (nodeMonitoringAgent) reports Neuron faults and nodeRepair acts on "
        "them; neuron-monitor's metrics come with cloudWatchObservability",
    ),
    "nodeImageRelease": (
        "moved to each Trainium node group: each generation boots the release its training stack runs on",
        "remove it, or set nodeImageRelease on the groups of trainiumNodeGroups that must stay on that release",
    ),
}


# The tables of docs/configuration.md that list these keys.
REQUIRED = "required"
NODE_IMAGE = "node-image"
NETWORK = "network"
CLUSTER = "cluster"
DEPLOY_RUNNER = "deploy-runner"
MONITORING = "monitoring"
NODE_HEALTH = "node-health"
STORAGE = "storage"
REGISTRY_AND_JOBS = "registry-and-jobs"


class StackInput(Strict):
    """Every key of the project's namespace (``trainium-eks:<key>``), as the CLI hands them to the program: the keys
    that build the platform (names and tags, the network, the cluster, the node image, the deploy runner), those that
    run it (monitoring, node health, storage, the registry, jobs and protection), and the lists of objects
    (``stack_items``)."""

    environment: f.dns_label(16, "use lowercase letters, digits and '-', e.g. dev") = key(
        "environment",
        "Environment name, a DNS label (dev, staging, prod, ...): part of resource names and the environment tag.",
        section=REQUIRED,
    )
    owner: f.TagValue = key("owner", "Team that owns the stack: the owner tag on every taggable AWS resource.", section=REQUIRED)
    cost_center: f.TagValue = key("costCenter", "The cost-center tag on every taggable AWS resource.", section=REQUIRED)
    trainium_az_id: StrictStr = key(
        "trainiumAzId",
        "AZ ID (not name: names differ per account, IDs do not) of the Trainium subnet, node groups and FSx, e.g. "
        "usw2-az4. It must offer every configured Trainium type.",
        section=REQUIRED,
        details="Checked offline against the catalog and, at deploy time, against `ec2:DescribeInstanceTypeOfferings`.",
    )
    vpc_cidr: f.VpcCidr = key(
        "vpcCidr",
        "IPv4 CIDR of the new VPC, /16 to /20, in a private range (RFC 1918). Ignored with existingVpcId.",
        section=NETWORK,
        default="10.0.0.0/16",
        details="Private subnets take the first half, four equal blocks; public subnets are small blocks of the second half.",
    )
    availability_zone_count: f.Integer = key(
        "availabilityZoneCount",
        "AZs with private subnets (EKS needs two); the first is the Trainium AZ.",
        section=NETWORK,
        default=2,
        details="2 to 4 (at most the region's AZs); the others are picked by AZ ID at deploy time.",
    )
    nat_gateways: f.one_of(("single", "perAz"), "use single or perAz") = key(
        "natGateways",
        "single: one NAT gateway, cheaper; perAz: one per AZ, survives an AZ outage.",
        section=NETWORK,
        default="single",
    )
    existing_vpc_id: Annotated[
        StrictStr, f.rule(lambda v: v == "" or bool(f.VPC_ID.match(v)), "'{value}' is not a VPC ID", "use the vpc-... ID")
    ] = key(
        "existingVpcId",
        "Bring your own VPC instead of creating one (with existingPrivateSubnetIds and existingTrainiumSubnetId).",
        section=NETWORK,
        default="",
    )
    existing_private_subnet_ids: Annotated[
        list[f.matching(f.SUBNET_ID, "'{value}' is not a subnet ID", "use subnet-... IDs")],
        f.Structured,
        f.rule(lambda v: len(set(v)) == len(v), "lists a subnet twice", "list each subnet once"),
    ] = key(
        "existingPrivateSubnetIds", "With existingVpcId: its private subnets, in two or more AZs.", section=NETWORK, default=[]
    )
    existing_trainium_subnet_id: StrictStr = key(
        "existingTrainiumSubnetId",
        "With existingVpcId: its private subnet in trainiumAzId (checked at deploy time).",
        section=NETWORK,
        default="",
    )
    kubernetes_version: f.one_of(versions.SUPPORTED_KUBERNETES_VERSIONS) = key(
        "kubernetesVersion",
        "EKS Kubernetes version (the supported list is trainium_eks/versions.py's).",
        section=CLUSTER,
        default="1.35",
        details='Quote it in YAML (`"1.30"` would otherwise read as 1.3).',
    )
    # The nodes' Kubernetes version during an upgrade: "" follows kubernetesVersion; an older supported version holds
    # the managed groups on it while the control plane and add-ons move first (README, "Upgrading").
    system_node_kubernetes_version: NodeKubernetesVersion = key(
        "systemNodeKubernetesVersion",
        "The system node group's Kubernetes version during an upgrade: empty follows kubernetesVersion; an older "
        "supported version holds the nodes there while the control plane and add-ons move (README, Upgrading).",
        section=NODE_IMAGE,
        default="",
        details="Newer than `kubernetesVersion` is refused (EKS does not run nodes newer than the control plane). The "
        "system nodes take EKS's newest AMI release for their version (they run no Neuron driver), at creation and at "
        "each version step.",
    )
    trainium_node_kubernetes_version: NodeKubernetesVersion = key(
        "trainiumNodeKubernetesVersion",
        "The same for the managed Trainium node groups, at each group's node image release's build for that version: "
        "the last step of "
        "an upgrade, taken between jobs because it replaces every node.",
        section=NODE_IMAGE,
        default="",
        details="Elastic pools have no such key: Karpenter replaces their nodes as drifted when the control plane moves, "
        "and never a node whose pod carries `karpenter.sh/do-not-disrupt`.",
    )
    endpoint_public_access: f.Boolean = key(
        "endpointPublicAccess",
        "Expose the Kubernetes API endpoint publicly, to publicAccessCidrs only. The private endpoint is always on.",
        section=CLUSTER,
        default=False,
    )
    public_access_cidrs: Annotated[
        list[f.PublicCidr],
        f.Structured,
        f.rule(lambda v: len(set(v)) == len(v), "lists a range twice", "list each range once"),
        # EKS User Guide, "Amazon EKS service quotas": 40 public endpoint access CIDR ranges per cluster, not adjustable
        f.rule(lambda v: len(v) <= PUBLIC_ACCESS_CIDRS_MAX, "lists more than 40 ranges, EKS's fixed limit", "merge ranges"),
        f.Shown({"maxItems": PUBLIC_ACCESS_CIDRS_MAX}),
    ] = key(
        "publicAccessCidrs",
        "Public CIDRs allowed to reach a public API endpoint: required with endpointPublicAccess, forbidden without it.",
        section=CLUSTER,
        default=[],
        details="At most 40 ranges, EKS's fixed quota.",
    )
    cluster_admin_principal_arns: Annotated[list[PrincipalArn], f.Structured] = key(
        "clusterAdminPrincipalArns",
        "IAM roles or users given an EKS access entry with AmazonEKSClusterAdminPolicy.",
        section=CLUSTER,
        default=[],
        details="The identity that runs `pulumi up` is cluster admin as the creator.",
    )
    ci_runner_repository: f.matching_or_empty(
        f.GITHUB_REPOSITORY, "'{value}' is not a GitHub repository", "use owner/name, e.g. example-org/trainium-eks"
    ) = key(
        "ciRunnerRepository",
        "GitHub repository (owner/name) whose workflow jobs the stack's in-VPC CodeBuild runner takes; empty means no "
        "runner. The pipeline deploys a stack with a private endpoint only from this runner.",
        section=DEPLOY_RUNNER,
        default="",
        details="The runner (`components/deploy_runner.py`) is a CodeBuild project `<project>-<stack>-deploy` in the private "
        "subnets, reached from the workflows with `runs-on: codebuild-<project>-<stack>-deploy-${{ github.run_id }}-"
        "${{ github.run_attempt }}`.",
    )
    ci_runner_connection_arn: f.matching_or_empty(
        f.CONNECTION_ARN,
        "'{value}' is not a CodeConnections connection ARN",
        "use arn:aws:codeconnections:<region>:<account>:connection/<id>",
    ) = key(
        "ciRunnerConnectionArn",
        "The CodeConnections (or CodeStar Connections) connection to GitHub the runner authenticates with.",
        section=DEPLOY_RUNNER,
        default="",
        details="`arn:aws:codeconnections:<region>:<account>:connection/<id>`. Set both keys or neither.",
    )
    system_node_instance_type: f.one_of(tuple(catalog.GENERAL_TYPES), what="a system type in the catalog") = key(
        "systemNodeInstanceType",
        "Instance type of the system node group (CoreDNS, controllers, Volcano, etcd, TensorBoard).",
        section=CLUSTER,
        default="m6i.xlarge",
    )
    system_node_min_size: NodeCount = key(
        "systemNodeMinSize", "Minimum size of the system node group.", section=CLUSTER, default=2
    )
    system_node_desired_size: NodeCount = key(
        "systemNodeDesiredSize", "Desired size of the system node group.", section=CLUSTER, default=2
    )
    system_node_max_size: NodeCount = key(
        "systemNodeMaxSize", "Maximum size of the system node group.", section=CLUSTER, default=4
    )
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
    cloudwatch_log_retention_days: RetentionDays = key(
        "cloudWatchLogRetentionDays",
        "Days the add-on's container, host and performance logs are kept (a CloudWatch Logs retention value).",
        section=MONITORING,
        default=30,
        details="The log groups `/aws/containerinsights/<cluster>/{application,dataplane,host,performance}` are created by "
        "the stack before the add-on, so that none is created without expiry.",
    )
    control_plane_log_retention_days: RetentionDays = key(
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
    trainium_node_groups: Annotated[
        list[NodeGroupInput],
        f.Structured,
        f.rule(bool, "empty", "add at least one Trainium node group"),
        f.Shown({"minItems": 1}),
    ] = key("trainiumNodeGroups", "The Trainium node groups, at least one.", section="trainium-node-groups")
    volcano_queues: Annotated[
        list[QueueInput],
        f.Structured,
        f.rule(bool, "empty", "list at least one queue or remove the key (one queue by default)"),
        f.Shown({"minItems": 1}),
    ] = key(
        "volcanoQueues",
        "Volcano queues sharing the Trainium capacity; one queue by default.",
        section="volcano-queues",
        default=[{"name": "trainium", "weight": 1, "neuronShare": 1.0}],
    )
    teams: Annotated[list[TeamInput], f.Structured] = key(
        "teams",
        "Teams that train on the platform in workspaces of their own: namespace and queue team-<name> (docs/teams.md).",
        section="teams",
        default=[],
    )
