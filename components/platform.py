"""Platform: composes every component and publishes the output contract other teams consume
(``components/platform_contract.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.alarms import Alarms, AlarmsArgs
from components.api_access import ApiAccessArgs, ApiAccessHost
from components.capacity_blocks import CapacityBlockEvents, CapacityBlockEventsArgs
from components.cluster import Cluster, ClusterArgs, ClusterHandle
from components.deploy_runner import DeployRunner, DeployRunnerArgs, refuse_an_existing_cluster
from components.device_plugins import DevicePlugins, DevicePluginsArgs
from components.endpoints import endpoint_services
from components.karpenter import Karpenter, KarpenterArgs
from components.monitoring import Monitoring, MonitoringArgs
from components.network import Network, NetworkArgs
from components.observability import Observability, ObservabilityArgs
from components.platform_contract import BuiltPlatform, bootstrap_contract, platform_contract
from components.registry import Registry, RegistryArgs
from components.scheduling import Scheduling, SchedulingArgs
from components.storage import Storage, StorageArgs
from components.teams import Teams, TeamsArgs
from components.trainium_node_group import ElasticCapacity, TrainiumNodeGroup, TrainiumNodeGroupArgs
from trainium_eks import layout, shares
from trainium_eks.config import PlatformConfig


@dataclass(frozen=True)
class ClusterServices:
    """What runs in the cluster for training, as the later stages and the contract need it."""

    scheduling: Scheduling
    storage: Storage
    teams: Teams


class TrainiumPlatform(pulumi.ComponentResource):
    """The whole Trainium training platform of one stack, built in stages: the network and the ways into it, the
    cluster, the Trainium capacity, the services in the cluster, monitoring, then the contract."""

    contract: dict[str, pulumi.Input]

    def __init__(
        self,
        name: str,
        config: PlatformConfig,
        opts: pulumi.ResourceOptions | None = None,
        *,
        deploy_runner_only: bool = False,
    ):
        """``deploy_runner_only``: a new private stack's first step, run from outside the VPC, which no Kubernetes API
        call can be made from: the network and the deploy runner, under the names the whole platform gives them."""
        super().__init__("trainium-eks:index:Platform", name, None, opts)
        if deploy_runner_only:
            refuse_an_existing_cluster(config.cluster.name)
        network = self._network(name, config)
        runner = self._deploy_runner(name, config, network)
        if deploy_runner_only and runner is not None:
            self.contract = bootstrap_contract(config, network, runner)
            self.register_outputs(self.contract)
            return
        access = self._api_access_host(name, config, network)
        cluster = self._cluster(name, config, network, runner, access)
        node_groups = self._trainium_capacity(name, config, network, cluster.handle)
        services = self._cluster_services(name, config, network, cluster.handle)
        registry = Registry(
            f"{name}-registry", RegistryArgs(config.registry, config.tags, config.protect_stateful), opts=self._child()
        )
        self._alerting(name, config, cluster.handle, services.storage)
        built = BuiltPlatform(
            network=network,
            cluster=cluster,
            node_groups=tuple(node_groups),
            scheduling=services.scheduling,
            storage=services.storage,
            teams=services.teams,
            registry=registry,
            tensorboard_service=self._tensorboard(name, config, cluster.handle, services),
            access=access,
        )
        self.contract = platform_contract(config, built)
        self.register_outputs(self.contract)

    def _child(self) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self)

    def _in_cluster(self, cluster: ClusterHandle) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, provider=cluster.provider)  # inherited by Kubernetes children

    def _network(self, name: str, config: PlatformConfig) -> Network:
        """The VPC, with the endpoints the stack's features call."""
        return Network(
            f"{name}-network",
            NetworkArgs(
                config=config.network,
                cluster_name=config.cluster.name,
                trainium_instance_types=[g.instance_type for g in config.trainium_node_groups],
                tags=config.tags,
                region=config.region,
                endpoint_services=endpoint_services(
                    elastic=any(g.elastic for g in config.trainium_node_groups),
                    cloudwatch=config.monitoring.cloudwatch_observability,
                ),
            ),
            opts=self._child(),
        )

    def _deploy_runner(self, name: str, config: PlatformConfig, network: Network) -> DeployRunner | None:
        """The in-VPC deploy runner, when the stack configures one."""
        if config.deploy_runner is None:
            return None
        return DeployRunner(
            f"{name}-deploy-runner",
            DeployRunnerArgs(config.deploy_runner, config.region, network.vpc_id, network.private_subnet_ids, config.tags),
            opts=self._child(),
        )

    def _api_access_host(self, name: str, config: PlatformConfig, network: Network) -> ApiAccessHost | None:
        """A private-only endpoint answers from the VPC alone: the deploy runner reaches it there, and people through
        the access host's port forwarding."""
        if config.cluster.endpoint_public_access:
            return None
        return ApiAccessHost(
            f"{name}-api-access",
            ApiAccessArgs(
                config.cluster.name,
                config.region,
                network.vpc_id,
                network.private_subnet_ids.apply(lambda ids: ids[0]),
                config.tags,
            ),
            opts=self._child(),
        )

    def _cluster(
        self,
        name: str,
        config: PlatformConfig,
        network: Network,
        runner: DeployRunner | None,
        access: ApiAccessHost | None,
    ) -> Cluster:
        """The EKS cluster, its API reachable from the in-VPC clients (the deploy runner, the access host)."""
        api_clients = [client for client in (runner, access) if client is not None]
        return Cluster(
            f"{name}-cluster",
            ClusterArgs(
                config=config.cluster,
                region=config.region,
                vpc_id=network.vpc_id,
                private_subnet_ids=network.private_subnet_ids,
                public_subnet_ids=network.public_subnet_ids,
                node_routing=network.private_routing,
                tags=config.tags,
                protect=config.protect_stateful,
                node_monitoring_agent=config.node_health.monitoring_agent,
                api_client_security_group_ids=[client.security_group_id for client in api_clients],
                api_access_path=[network, *api_clients],
            ),
            opts=self._child(),
        )

    def _trainium_capacity(
        self, name: str, config: PlatformConfig, network: Network, cluster: ClusterHandle
    ) -> list[TrainiumNodeGroup]:
        """The Trainium node groups, and Karpenter when any of them is elastic."""
        elastic = None
        if any(group.elastic for group in config.trainium_node_groups):
            karpenter = Karpenter(
                f"{name}-karpenter",
                KarpenterArgs(cluster, node_repair=config.node_health.repair is not None),
                opts=self._in_cluster(cluster),
            )
            elastic = ElasticCapacity(karpenter.node_role_name, karpenter.controller)
        return [
            TrainiumNodeGroup(
                f"{name}-{group.name}",
                TrainiumNodeGroupArgs(
                    config=group,
                    cluster=cluster,
                    vpc_id=network.vpc_id,
                    subnet_id=network.trainium_subnet_id,
                    az_id=config.network.trainium_az_id,
                    repair=config.node_health.repair,
                    routing=network.private_routing,
                    elastic=elastic,
                ),
                opts=self._child(),
            )
            for group in config.trainium_node_groups
        ]

    def _cluster_services(self, name: str, config: PlatformConfig, network: Network, cluster: ClusterHandle) -> ClusterServices:
        """The device plugins, scheduling (Volcano, etcd, the job namespace), the shared file system and the teams."""
        in_cluster = self._in_cluster(cluster)
        DevicePlugins(
            f"{name}-device-plugins",
            DevicePluginsArgs(cluster),
            opts=in_cluster,
        )
        scheduling = Scheduling(
            f"{name}-scheduling",
            SchedulingArgs(
                config=config.scheduling,
                cluster=cluster,
                node_groups=config.trainium_node_groups,
            ),
            opts=in_cluster,
        )
        storage = Storage(
            f"{name}-storage",
            StorageArgs(
                config=config.storage,
                vpc_id=network.vpc_id,
                subnet_id=network.trainium_subnet_id,
                cluster=cluster,
                job_namespace=scheduling.job_namespace,
                protect=config.protect_stateful,
            ),
            opts=in_cluster,
        )
        teams = Teams(
            f"{name}-teams",
            TeamsArgs(
                teams=config.scheduling.teams,
                cluster=cluster,
                node_groups=shares.fleet(config.trainium_node_groups),
                storage=config.storage,
                file_system_id=storage.file_system.id,
                file_system_dns_name=storage.file_system.dns_name,
                file_system_mount_name=storage.file_system.mount_name,
                job_namespace=scheduling.job_namespace,
                root_claim_name=storage.claim_name,
                volcano=scheduling.volcano,
            ),
            opts=in_cluster,
        )
        return ClusterServices(scheduling, storage, teams)

    def _alerting(self, name: str, config: PlatformConfig, cluster: ClusterHandle, storage: Storage) -> None:
        """Container Insights, the dashboard and the alarms; the Capacity Block notices when alarms have a topic."""
        if config.monitoring.cloudwatch_observability:
            self._monitor(name, config, cluster, storage, self._child())
        if any(group.in_capacity_block for group in config.trainium_node_groups) and config.monitoring.alarms:
            CapacityBlockEvents(
                f"{name}-capacity-blocks",
                CapacityBlockEventsArgs(cluster, config.monitoring.alarm_topic_arn),
                opts=self._child(),
            )

    def _tensorboard(
        self, name: str, config: PlatformConfig, cluster: ClusterHandle, services: ClusterServices
    ) -> pulumi.Input[str]:
        """TensorBoard over the shared file system; its in-cluster address, or "" when it is off (the contract keeps
        the key)."""
        if not config.tensorboard:
            return ""
        namespace = services.scheduling.job_namespace
        observability = Observability(
            f"{name}-observability",
            ObservabilityArgs(namespace, services.storage.claim_name, cluster),
            opts=self._in_cluster(cluster),
        )
        return pulumi.Output.concat(
            observability.service_name, ".", namespace, ".svc.cluster.local:", str(layout.TENSORBOARD_PORT)
        )

    def _monitor(
        self, name: str, config: PlatformConfig, cluster: ClusterHandle, storage: Storage, opts: pulumi.ResourceOptions
    ) -> None:
        """Container Insights and the dashboard; the alarms when the stack names a topic for them."""
        monitoring = Monitoring(
            f"{name}-monitoring",
            MonitoringArgs(
                config=config.monitoring,
                cluster=cluster,
                job_namespace=config.scheduling.job_namespace,
                file_system_id=storage.file_system.id,
            ),
            opts=opts,
        )
        if config.monitoring.alarms:
            Alarms(
                f"{name}-alarms",
                AlarmsArgs(
                    topic_arn=config.monitoring.alarm_topic_arn,
                    cluster=cluster,
                    job_namespace=config.scheduling.job_namespace,
                    etcd_members=config.scheduling.etcd_members,
                    file_system_id=storage.file_system.id,
                    fsx_capacity_gib=config.storage.capacity_gib,
                    depends_on=[monitoring.addon],
                ),
                opts=opts,
            )
