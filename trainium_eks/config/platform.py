"""What the components receive: the validated stack configuration, grouped by concept, as frozen dataclasses.

Built by ``trainium_eks.config.parse`` from the stack's typed input model once every rule has passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trainium_eks import catalog, hardware, layout, versions


@dataclass(frozen=True)
class Scaling:
    min_size: int
    desired_size: int
    max_size: int


@dataclass(frozen=True)
class CapacityReservation:
    kind: str  # "odcr" or "capacity-block"
    reservation_id: str | None  # None: an elastic group's Capacity Blocks, selected by their tag alone
    az_id: str
    instance_count: int  # the instances the reservation holds, billed whether they run or not
    hourly_usd: float | None = None  # a Capacity Block's price per instance-hour; None: an ODCR, at the on-demand rate


@dataclass(frozen=True)
class NodeImage:
    """The EKS-optimised AL2023 release a Trainium group's nodes boot, whichever kind provisions them, at the
    Kubernetes version the managed groups run."""

    release: str  # the amazon-eks-ami release tag, e.g. v20260625
    kubernetes_version: str  # the group's: kubernetesVersion, or the version it is held at during an upgrade
    kubelet_version: str  # that release's kubelet for kubernetes_version, e.g. 1.35.6

    @property
    def release_version(self) -> str:
        """An EKS managed node group's ``releaseVersion``: ``<kubelet version>-<release date>``."""
        return f"{self.kubelet_version}-{self.release.removeprefix('v')}"

    @property
    def karpenter_alias(self) -> str:
        """A Karpenter EC2NodeClass ``amiSelectorTerms`` alias pinned to the release."""
        return f"al2023@{self.release}"


MANAGED = "managed"
KARPENTER = "karpenter"


@dataclass(frozen=True)
class TrainiumNodeGroupConfig:
    name: str
    instance_type: str
    scaling: Scaling  # an elastic group's is 0..0..maxSize: no node runs until a job waits
    efa: bool
    root_volume_gib: int
    labels: Mapping[str, str]
    capacity_reservation: CapacityReservation | None
    node_image: NodeImage
    training_stack: str  # a versions.TRAINING_STACKS name: the image jobs run and the runtime the driver must suit
    provisioning: str = MANAGED  # MANAGED or KARPENTER
    idle_minutes: int | None = None  # KARPENTER only: an empty node is removed after this long

    @property
    def elastic(self) -> bool:
        return self.provisioning == KARPENTER

    @property
    def in_capacity_block(self) -> bool:
        return self.capacity_reservation is not None and self.capacity_reservation.kind == "capacity-block"

    @property
    def spec(self) -> hardware.InstanceType:
        return catalog.INSTANCE_TYPES[self.instance_type]

    @property
    def stack(self) -> versions.TrainingStack:
        return versions.TRAINING_STACKS[self.training_stack]

    @property
    def release(self) -> versions.NodeImageRelease:
        return versions.NODE_IMAGE_RELEASES[self.node_image.release]

    @property
    def efa_interfaces(self) -> int:
        """EFA interfaces per node: one per network card when EFA is on."""
        return self.spec.max_efa_interfaces if self.efa else 0

    @property
    def network_interfaces(self) -> tuple[hardware.NetworkInterfaceSlot, ...]:
        """The launch template's interfaces: the type's EFA layout when EFA is on, else none (the default NIC)."""
        return self.spec.efa_layout() if self.efa else ()

    @property
    def private_ips_per_node(self) -> int:
        """Private IPs a node's interfaces take (the VPC CNI's warm pod IPs excluded)."""
        return sum(1 for slot in self.network_interfaces if slot.has_ip_address) or 1

    @property
    def uses_placement_group(self) -> bool:
        # A cluster placement group only pays off for EFA traffic between nodes.
        return self.efa_interfaces > 0


@dataclass(frozen=True)
class ExistingVpc:
    vpc_id: str
    private_subnet_ids: tuple[str, ...]
    trainium_subnet_id: str


@dataclass(frozen=True)
class NetworkConfig:
    vpc_cidr: str
    az_count: int
    nat_gateways: str
    trainium_az_id: str
    existing: ExistingVpc | None


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    kubernetes_version: str
    endpoint_public_access: bool
    public_access_cidrs: tuple[str, ...]
    admin_principal_arns: tuple[str, ...]
    system_instance_type: str
    system_scaling: Scaling
    system_kubernetes_version: str  # kubernetes_version, or the version the system nodes are held at in an upgrade
    log_retention_days: int  # of the control-plane log group


@dataclass(frozen=True)
class DeployRunnerConfig:
    """The stack's in-VPC CI runner: a CodeBuild project that takes the repository's GitHub Actions jobs."""

    project_name: str
    github_repository: str  # owner/name
    connection_arn: str

    @property
    def connection_service(self) -> str:
        """``codeconnections``, or ``codestar-connections`` for a connection made before the service's rename."""
        return self.connection_arn.split(":")[2]

    @property
    def runs_on(self) -> str:
        """The `runs-on` label of a job for this runner: CodeBuild starts one build per queued job that names the
        project (AWS CodeBuild User Guide, "Tutorial: Configure a CodeBuild-hosted GitHub Actions runner")."""
        return f"codebuild-{self.project_name}-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}"


@dataclass(frozen=True)
class MonitoringConfig:
    cloudwatch_observability: bool  # the CloudWatch Observability add-on, its logs and the dashboard
    log_retention_days: int
    alarm_topic_arn: str  # empty: no alarms

    @property
    def alarms(self) -> bool:
        return bool(self.alarm_topic_arn)


@dataclass(frozen=True)
class NodeRepair:
    """EKS node auto repair of a managed node group: how many nodes at once, and when to stop."""

    max_parallel: int  # nodes repaired at the same time
    max_unhealthy: int  # unhealthy nodes above which repair stops


@dataclass(frozen=True)
class NodeHealthConfig:
    monitoring_agent: bool  # the eks-node-monitoring-agent add-on
    repair: NodeRepair | None  # on every Trainium node group; None: off


@dataclass(frozen=True)
class QueueConfig:
    name: str
    weight: int
    neuron_share: float


@dataclass(frozen=True)
class TeamConfig:
    """A team that trains in a workspace of its own: namespace, queue, quota, access and directory."""

    name: str
    weight: int
    neuron_share: float  # of each Trainium group, in whole nodes: the team's queue capability and namespace quota
    principal_arns: tuple[str, ...]  # IAM roles or users of its members, given access to the namespace only

    @property
    def namespace(self) -> str:
        return layout.team_namespace(self.name)

    @property
    def queue(self) -> str:
        return layout.team_namespace(self.name)

    @property
    def directory(self) -> str:
        return layout.team_directory(self.name)


@dataclass(frozen=True)
class SchedulingConfig:
    job_namespace: str
    queues: tuple[QueueConfig, ...]
    etcd_members: int
    etcd_storage_gib: int
    teams: tuple[TeamConfig, ...] = ()


@dataclass(frozen=True)
class StorageConfig:
    deployment_type: str
    capacity_gib: int
    throughput_per_tib: int
    data_repository_path: str
    claim_name: str

    @property
    def persistent(self) -> bool:
        return self.deployment_type.startswith("PERSISTENT")


@dataclass(frozen=True)
class RegistryConfig:
    repository_name: str
    keep_images: int
    untagged_expiry_days: int


@dataclass(frozen=True)
class PlatformConfig:
    project: str
    stack: str
    region: str
    environment: str
    tags: Mapping[str, str]
    network: NetworkConfig
    cluster: ClusterConfig
    trainium_node_groups: tuple[TrainiumNodeGroupConfig, ...]
    monitoring: MonitoringConfig
    node_health: NodeHealthConfig
    scheduling: SchedulingConfig
    storage: StorageConfig
    registry: RegistryConfig
    tensorboard: bool
    protect_stateful: bool
    deploy_runner: DeployRunnerConfig | None = None
