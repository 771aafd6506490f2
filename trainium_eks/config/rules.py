"""Rules across fields of a validated ``StackInput``, and the ``PlatformConfig`` the components receive.

Each rule names the key it is about and the fix. Names the platform derives from the project and stack
(the EKS cluster, the node groups) are checked against EKS's limits here, where both are known.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from trainium_eks import catalog, names, shares
from trainium_eks.config import platform as p
from trainium_eks.config.addresses import nodes_fit
from trainium_eks.config.checks import NODE_GROUP_NAME_MAX, Key, check, scaling
from trainium_eks.config.fields import ECR_NAME
from trainium_eks.config.node_groups import node_groups, node_kubernetes_version
from trainium_eks.config.stack import StackInput
from trainium_eks.config.teams import share_holds_a_node, teams

FSX_THROUGHPUT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
# EKS CreateCluster: name up to 100 of [0-9A-Za-z-_], starting alphanumeric; CreateNodegroup: name up to 63.
CLUSTER_NAME = re.compile(r"\A[0-9A-Za-z][0-9A-Za-z_-]{0,99}\Z")  # \Z: no trailing newline
SYSTEM_NODE_GROUP_SUFFIX = "-system"
DEPLOY_RUNNER_SUFFIX = "-deploy"  # the runner's CodeBuild project is <cluster name>-deploy


def platform(stack_input: StackInput, *, project: str, stack: str, region: str, key: Key) -> p.PlatformConfig:
    s = stack_input
    cluster_name = f"{project}-{stack}"
    check(
        bool(CLUSTER_NAME.match(cluster_name)) and len(cluster_name) + len(SYSTEM_NODE_GROUP_SUFFIX) <= NODE_GROUP_NAME_MAX,
        f"stack {stack}",
        f"the cluster name '{cluster_name}' breaks EKS's naming rules",
        f"use a stack name of letters, digits, '-' and '_' that keeps '{cluster_name}{SYSTEM_NODE_GROUP_SUFFIX}' "
        f"within {NODE_GROUP_NAME_MAX} characters",
    )
    network = _network(s, region, key)
    groups = node_groups(s, cluster_name, region, key)
    cluster = _cluster(s, cluster_name, key)
    _principals_in_partition(s, region, key)
    nodes_fit(network, groups, cluster, key)
    _reservations_used_once(groups, key)
    return p.PlatformConfig(
        project=project,
        stack=stack,
        region=region,
        environment=s.environment,
        tags=MappingProxyType(
            {
                "environment": s.environment,
                "owner": s.owner,
                "cost-center": s.cost_center,
                "managed-by": "pulumi",
                "pulumi-project": project,
                "pulumi-stack": stack,
            }
        ),
        network=network,
        cluster=cluster,
        trainium_node_groups=groups,
        monitoring=_monitoring(s, key),
        node_health=_node_health(s, key),
        scheduling=_scheduling(s, key, groups),
        storage=_storage(s, region, key),
        registry=_registry(s, stack, key),
        tensorboard=s.tensorboard,
        protect_stateful=s.protect_stateful_resources,
        deploy_runner=_deploy_runner(s, cluster_name, key),
    )


def _reservations_used_once(groups: tuple[p.TrainiumNodeGroupConfig, ...], key: Key) -> None:
    """A capacity reservation holds instances of one type in one AZ, and a group targeting it counts on all of them
    (its maxSize is checked against the reservation's instances): two groups on one reservation overbook it, or name
    it with two types or sizes, and the estimate would bill it twice."""
    first_user: dict[str, int] = {}
    for index, group in enumerate(groups):
        if group.capacity_reservation is None or group.capacity_reservation.reservation_id is None:
            continue  # blocks selected by their tag carry each group's own tag value: no two groups share them
        reservation = group.capacity_reservation.reservation_id
        earlier = first_user.setdefault(reservation, index)
        check(
            earlier == index,
            f"{key('trainiumNodeGroups')}[{index}].capacityReservation.id",
            f"{reservation} is already the reservation of trainiumNodeGroups[{earlier}] ({groups[earlier].name})",
            "give each group its own reservation, or one group the reservation's whole instance count",
        )


def _network(s: StackInput, region: str, key: Key) -> p.NetworkConfig:
    az_ids = catalog.REGIONS[region]
    check(
        s.trainium_az_id in az_ids,
        key("trainiumAzId"),
        f"{s.trainium_az_id} is not an AZ ID of {region}",
        f"use one of {', '.join(az_ids)} (AZ IDs, not names like {region}a)",
    )
    max_azs = min(4, len(az_ids))
    check(
        2 <= s.availability_zone_count <= max_azs,
        key("availabilityZoneCount"),
        f"{s.availability_zone_count} is outside 2..{max_azs}",
        f"use 2 to {max_azs} (EKS needs two AZs)",
    )
    existing = None
    if s.existing_vpc_id:
        subnets = s.existing_private_subnet_ids
        check(
            len(subnets) >= 2,
            key("existingPrivateSubnetIds"),
            "needs private subnets in at least two AZs",
            "list two or more subnet-... IDs",
        )
        check(
            s.existing_trainium_subnet_id in subnets,
            key("existingTrainiumSubnetId"),
            f"'{s.existing_trainium_subnet_id}' is not one of existingPrivateSubnetIds",
            "name the private subnet that lies in trainiumAzId",
        )
        existing = p.ExistingVpc(s.existing_vpc_id, tuple(subnets), s.existing_trainium_subnet_id)
    else:
        for orphan, value in (
            ("existingPrivateSubnetIds", s.existing_private_subnet_ids),
            ("existingTrainiumSubnetId", s.existing_trainium_subnet_id),
        ):
            check(not value, key(orphan), "set without existingVpcId", "set existingVpcId too, or remove it")
    return p.NetworkConfig(s.vpc_cidr, s.availability_zone_count, s.nat_gateways, s.trainium_az_id, existing)


def _node_health(s: StackInput, key: Key) -> p.NodeHealthConfig:
    if not s.node_repair:
        return p.NodeHealthConfig(s.node_monitoring_agent, None)
    # Auto repair alone reacts only to the kubelet's Ready condition; the Neuron conditions (AcceleratedHardwareReady)
    # come from the node monitoring agent (EKS user guide, "Enable node auto repair and investigate node health").
    check(
        s.node_monitoring_agent,
        key("nodeRepair"),
        "is on while nodeMonitoringAgent is false: repair would never see a Neuron fault",
        "set nodeMonitoringAgent: true, or nodeRepair: false",
    )
    check(
        s.node_repair_max_parallel <= s.node_repair_max_unhealthy,
        key("nodeRepairMaxParallel"),
        f"{s.node_repair_max_parallel} is above nodeRepairMaxUnhealthy {s.node_repair_max_unhealthy}, past which repair stops",
        "repair at most nodeRepairMaxUnhealthy nodes at once",
    )
    return p.NodeHealthConfig(True, p.NodeRepair(s.node_repair_max_parallel, s.node_repair_max_unhealthy))


def _cluster(s: StackInput, name: str, key: Key) -> p.ClusterConfig:
    if s.endpoint_public_access:
        check(
            bool(s.public_access_cidrs),
            key("publicAccessCidrs"),
            "empty while endpointPublicAccess is true",
            "list the CIDRs allowed to reach the API (an empty list would mean 0.0.0.0/0)",
        )
    else:
        check(
            not s.public_access_cidrs,
            key("publicAccessCidrs"),
            "set while endpointPublicAccess is false",
            "remove it or enable the public endpoint",
        )

    def system_key(name: str) -> str:
        return key("systemNode" + name[0].upper() + name[1:])

    return p.ClusterConfig(
        name,
        s.kubernetes_version,
        s.endpoint_public_access,
        tuple(s.public_access_cidrs),
        tuple(s.cluster_admin_principal_arns),
        s.system_node_instance_type,
        scaling(system_key, s.system_node_min_size, s.system_node_desired_size, s.system_node_max_size),
        node_kubernetes_version(s, key, "systemNodeKubernetesVersion", s.system_node_kubernetes_version),
        s.control_plane_log_retention_days,
    )


def _principals_in_partition(s: StackInput, region: str, key: Key) -> None:
    """Every principal given an access entry is of the region's partition (``names.partition``: no other reaches it)."""
    listed = [(key("clusterAdminPrincipalArns"), s.cluster_admin_principal_arns)]
    listed += [(f"{key('teams')}[{index}].principalArns", team.principal_arns) for index, team in enumerate(s.teams)]
    for where, arns in listed:
        for position, arn in enumerate(arns):
            check(
                names.arn_partition(arn) == names.partition(region),
                f"{where}[{position}]",
                f"'{arn}' is in partition {names.arn_partition(arn)}, the {region} cluster in {names.partition(region)}",
                f"use the principal's ARN in {region}'s account: arn:{names.partition(region)}:iam::<account>:role/<name>",
            )


def _deploy_runner(s: StackInput, cluster_name: str, key: Key) -> p.DeployRunnerConfig | None:
    """Both runner keys or neither. Whether a private stack needs the runner depends on whether the pipeline deploys
    it, which the workflows say: ``tests/workflows.py`` checks that rule against them."""
    for needed, given, other in (
        ("ciRunnerConnectionArn", s.ci_runner_repository, s.ci_runner_connection_arn),
        ("ciRunnerRepository", s.ci_runner_connection_arn, s.ci_runner_repository),
    ):
        check(not given or other, key(needed), "empty while the other ciRunner key is set", "set both ciRunner keys, or neither")
    if not s.ci_runner_repository:
        return None
    return p.DeployRunnerConfig(f"{cluster_name}{DEPLOY_RUNNER_SUFFIX}", s.ci_runner_repository, s.ci_runner_connection_arn)


def _monitoring(s: StackInput, key: Key) -> p.MonitoringConfig:
    check(
        not s.alarm_topic_arn or s.cloudwatch_observability,
        key("alarmTopicArn"),
        "set while cloudWatchObservability is false",
        "turn cloudWatchObservability on (the node, Neuron and etcd alarms read its Container Insights metrics) "
        "or set alarmTopicArn to an empty string",
    )
    return p.MonitoringConfig(s.cloudwatch_observability, s.cloudwatch_log_retention_days, s.alarm_topic_arn)


def _scheduling(s: StackInput, key: Key, groups: tuple[p.TrainiumNodeGroupConfig, ...]) -> p.SchedulingConfig:
    names = set()
    fleet = shares.fleet(groups)
    for index, queue in enumerate(s.volcano_queues):
        check(
            queue.name not in names,
            f"{key('volcanoQueues')}[{index}].name",
            f"'{queue.name}' is taken",
            "use a unique name other than Volcano's built-in 'default'",
        )
        names.add(queue.name)
        share_holds_a_node(float(queue.neuron_share), fleet, f"{key('volcanoQueues')}[{index}].neuronShare")
    check(
        s.etcd_members <= s.system_node_min_size,
        key("etcdMembers"),
        f"{s.etcd_members} members but systemNodeMinSize is {s.system_node_min_size}",
        "raise systemNodeMinSize to the member count (each member needs a node of its own) or lower etcdMembers",
    )
    queues = tuple(p.QueueConfig(q.name, q.weight, float(q.neuron_share)) for q in s.volcano_queues)
    return p.SchedulingConfig(s.job_namespace, queues, s.etcd_members, s.etcd_storage_gib, teams(s, key, groups))


def _storage(s: StackInput, region: str, key: Key) -> p.StorageConfig:
    deployment, capacity = s.fsx_deployment_type, s.fsx_storage_capacity_gib
    # FSx API Reference, CreateFileSystem StorageCapacity: SSD sizes are 1200, 2400 and increments of 2400 GiB
    # (SCRATCH_1: of 3600).
    step = 3600 if deployment == "SCRATCH_1" else 2400
    check(
        capacity in (1200, 2400) or (capacity > 0 and capacity % step == 0),
        key("fsxStorageCapacityGiB"),
        f"{capacity} is not a valid {deployment} size",
        f"use 1200, 2400 or a multiple of {step}",
    )
    # No per-file-system maximum is documented: the account's regional storage quota bounds one file system.
    quota = catalog.FSX_LUSTRE_STORAGE_QUOTA_GIB[region]
    check(
        capacity <= quota,
        key("fsxStorageCapacityGiB"),
        f"{capacity:,} GiB is above the account's default FSx for Lustre storage quota in {region} ({quota:,} GiB for "
        "all file systems), so CreateFileSystem would refuse it",
        f"use at most {quota - quota % step:,} GiB; for more, have AWS Support raise the quota first and record it in "
        "trainium_eks/catalog.py FSX_LUSTRE_STORAGE_QUOTA_GIB",
    )
    allowed = FSX_THROUGHPUT.get(deployment, (0,))
    check(
        s.fsx_throughput_per_tib in allowed,
        key("fsxThroughputPerTiB"),
        f"{s.fsx_throughput_per_tib} is not valid for {deployment}",
        f"use one of {', '.join(map(str, allowed))}",
    )
    if s.fsx_data_repository_path:
        check(
            deployment == "PERSISTENT_2",
            key("fsxDataRepositoryPath"),
            f"needs PERSISTENT_2, not {deployment}",
            "set fsxDeploymentType to PERSISTENT_2 or remove the data repository",
        )
    return p.StorageConfig(deployment, capacity, s.fsx_throughput_per_tib, s.fsx_data_repository_path, s.fsx_claim_name)


def _registry(s: StackInput, stack: str, key: Key) -> p.RegistryConfig:
    name = s.ecr_repository_name or f"trainium-eks/{stack.lower()}/training"
    check(
        2 <= len(name) <= 256 and bool(ECR_NAME.match(name)),
        key("ecrRepositoryName"),
        f"'{name}' is not a valid ECR name",
        "use lowercase letters, digits, and . _ - / between them",
    )
    return p.RegistryConfig(name, s.ecr_keep_images, s.ecr_untagged_expiry_days)
