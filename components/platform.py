"""Platform: composes every component and publishes the output contract other teams consume.

The contract is a flat map of stable, camelCase, JSON-friendly values. Consumers read it through a
StackReference; the keys and their versions are declared in ``trainium_eks/contract.py``.
"""

from __future__ import annotations

import pulumi

from components.alarms import Alarms, AlarmsArgs
from components.api_access import PORT_FORWARDING_DOCUMENT, ApiAccessArgs, ApiAccessHost
from components.capacity_blocks import CapacityBlockEvents, CapacityBlockEventsArgs
from components.cluster import Cluster, ClusterArgs
from components.deploy_runner import DeployRunner, DeployRunnerArgs, refuse_an_existing_cluster
from components.device_plugins import DevicePlugins, DevicePluginsArgs
from components.endpoints import endpoint_services
from components.karpenter import Karpenter, KarpenterArgs
from components.monitoring import Monitoring, MonitoringArgs
from components.network import Network, NetworkArgs
from components.observability import Observability, ObservabilityArgs
from components.registry import Registry, RegistryArgs
from components.scheduling import Scheduling, SchedulingArgs
from components.storage import Storage, StorageArgs
from components.teams import Teams, TeamsArgs
from components.trainium_node_group import ElasticCapacity, TrainiumNodeGroup, TrainiumNodeGroupArgs
from trainium_eks import fsx_throughput, layout, shares
from trainium_eks.config import PlatformConfig, TrainiumNodeGroupConfig
from trainium_eks.contract import CONTRACT_VERSION


def software_entry(group: TrainiumNodeGroupConfig, repository_url: pulumi.Input[str]) -> dict:
    """What the group runs, for the contract's ``trainiumNodeGroupSoftware``: its generation, its training stack's image
    in the stack's repository (the tag ``make image`` pushes), backend and runtime, and its node image and driver."""
    stack, release = group.stack, group.release
    return {
        "generation": group.spec.generation,
        "trainingStack": stack.name,
        "trainingImage": pulumi.Output.concat(repository_url, ":", stack.image_tag),
        "backend": stack.backend.name,
        "neuronRuntime": stack.runtime.library,
        "nodeImageRelease": release.tag,
        "neuronDriver": release.neuron_driver,
    }


class TrainiumPlatform(pulumi.ComponentResource):
    """The whole Trainium training platform of one stack."""

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
        child = pulumi.ResourceOptions(parent=self)
        tags = config.tags
        protect = config.protect_stateful
        if deploy_runner_only:
            refuse_an_existing_cluster(config.cluster.name)

        network = Network(
            f"{name}-network",
            NetworkArgs(
                config=config.network,
                cluster_name=config.cluster.name,
                trainium_instance_types=[g.instance_type for g in config.trainium_node_groups],
                tags=tags,
                region=config.region,
                endpoint_services=endpoint_services(
                    elastic=any(g.elastic for g in config.trainium_node_groups),
                    cloudwatch=config.monitoring.cloudwatch_observability,
                ),
            ),
            opts=child,
        )
        runner = None
        if config.deploy_runner is not None:
            runner = DeployRunner(
                f"{name}-deploy-runner",
                DeployRunnerArgs(config.deploy_runner, config.region, network.vpc_id, network.private_subnet_ids, tags),
                opts=child,
            )
        if deploy_runner_only and runner is not None:
            # Not the contract: consumers refuse a stack without contractVersion until the whole platform runs.
            self.contract = {
                "environment": config.environment,
                "region": config.region,
                "vpcId": network.vpc_id,
                "deployRunnerProject": runner.project_name,
            }
            self.register_outputs(self.contract)
            return
        # A private-only endpoint answers from the VPC alone: the deploy runner reaches it there, and people through
        # the access host's port forwarding.
        access = None
        if not config.cluster.endpoint_public_access:
            access = ApiAccessHost(
                f"{name}-api-access",
                ApiAccessArgs(
                    config.cluster.name,
                    config.region,
                    network.vpc_id,
                    network.private_subnet_ids.apply(lambda ids: ids[0]),
                    tags,
                ),
                opts=child,
            )
        api_clients = [client.security_group_id for client in (runner, access) if client is not None]
        cluster = Cluster(
            f"{name}-cluster",
            ClusterArgs(
                config=config.cluster,
                vpc_id=network.vpc_id,
                private_subnet_ids=network.private_subnet_ids,
                public_subnet_ids=network.public_subnet_ids,
                node_routing=network.private_routing,
                tags=tags,
                protect=protect,
                node_monitoring_agent=config.node_health.monitoring_agent,
                api_client_security_group_ids=api_clients,
                api_access_path=[network, *(client for client in (runner, access) if client is not None)],
            ),
            opts=child,
        )
        in_cluster = pulumi.ResourceOptions(parent=self, provider=cluster.provider)  # inherited by Kubernetes children
        elastic = None
        if any(group.elastic for group in config.trainium_node_groups):
            karpenter = Karpenter(
                f"{name}-karpenter",
                KarpenterArgs(
                    cluster_name=config.cluster.name,
                    cluster_endpoint=cluster.endpoint,
                    region=config.region,
                    oidc_provider_arn=cluster.oidc_provider_arn,
                    oidc_issuer=cluster.oidc_issuer,
                    system_nodes=cluster.system_node_group,
                    node_repair=config.node_health.repair is not None,
                    tags=tags,
                ),
                opts=in_cluster,
            )
            elastic = ElasticCapacity(karpenter.node_role_name, cluster.provider, karpenter.controller)
        node_groups = [
            TrainiumNodeGroup(
                f"{name}-{group.name}",
                TrainiumNodeGroupArgs(
                    config=group,
                    cluster_name=cluster.name,
                    node_role_arn=cluster.node_role_arn,
                    cluster_security_group_id=cluster.cluster_security_group_id,
                    vpc_id=network.vpc_id,
                    subnet_id=network.trainium_subnet_id,
                    az_id=config.network.trainium_az_id,
                    region=config.region,
                    capacity_block_tag_value=layout.capacity_block_tag_value(config.cluster.name, group.name),
                    tags=tags,
                    repair=config.node_health.repair,
                    depends_on=[*cluster.node_role_dependencies, *network.private_routing],
                    elastic=elastic,
                ),
                opts=child,
            )
            for group in config.trainium_node_groups
        ]
        DevicePlugins(
            f"{name}-device-plugins",
            DevicePluginsArgs(cluster.system_node_group, config.region),
            opts=in_cluster,
        )
        scheduling = Scheduling(
            f"{name}-scheduling",
            SchedulingArgs(
                config=config.scheduling,
                kubernetes_version=config.cluster.kubernetes_version,
                node_groups=config.trainium_node_groups,
                block_storage_class=cluster.block_storage_class,
                system_nodes=cluster.system_node_group,
            ),
            opts=in_cluster,
        )
        storage = Storage(
            f"{name}-storage",
            StorageArgs(
                config=config.storage,
                vpc_id=network.vpc_id,
                subnet_id=network.trainium_subnet_id,
                cluster_security_group_id=cluster.cluster_security_group_id,
                oidc_provider_arn=cluster.oidc_provider_arn,
                oidc_issuer=cluster.oidc_issuer,
                job_namespace=scheduling.job_namespace,
                system_nodes=cluster.system_node_group,
                tags=tags,
                protect=protect,
            ),
            opts=in_cluster,
        )
        teams = Teams(
            f"{name}-teams",
            TeamsArgs(
                teams=config.scheduling.teams,
                kubernetes_version=config.cluster.kubernetes_version,
                node_groups=shares.fleet(config.trainium_node_groups),
                cluster_name=cluster.name,
                storage=config.storage,
                file_system_id=storage.file_system.id,
                file_system_dns_name=storage.file_system.dns_name,
                file_system_mount_name=storage.file_system.mount_name,
                job_namespace=scheduling.job_namespace,
                root_claim_name=storage.claim_name,
                volcano=scheduling.volcano,
                tags=tags,
            ),
            opts=in_cluster,
        )
        registry = Registry(f"{name}-registry", RegistryArgs(config.registry, tags, protect), opts=child)
        if config.monitoring.cloudwatch_observability:
            self._monitor(name, config, cluster, storage, child)
        if any(group.in_capacity_block for group in config.trainium_node_groups) and config.monitoring.alarms:
            CapacityBlockEvents(
                f"{name}-capacity-blocks",
                CapacityBlockEventsArgs(config.cluster.name, config.monitoring.alarm_topic_arn, tags),
                opts=child,
            )
        tensorboard_service = ""  # the contract keeps the key; empty means TensorBoard is off
        if config.tensorboard:
            observability = Observability(
                f"{name}-observability",
                ObservabilityArgs(scheduling.job_namespace, storage.claim_name, cluster.system_node_group),
                opts=in_cluster,
            )
            tensorboard_service = pulumi.Output.concat(
                observability.service_name, ".", scheduling.job_namespace, ".svc.cluster.local:", str(layout.TENSORBOARD_PORT)
            )

        self.contract = {
            "contractVersion": CONTRACT_VERSION,
            "environment": config.environment,
            "region": config.region,
            "clusterName": cluster.name,
            "clusterEndpoint": cluster.endpoint,
            "kubeconfig": cluster.kubeconfig,
            "oidcProviderArn": cluster.oidc_provider_arn,
            "clusterSecurityGroupId": cluster.cluster_security_group_id,
            "vpcId": network.vpc_id,
            "privateSubnetIds": network.private_subnet_ids,
            "trainiumSubnetId": network.trainium_subnet_id,
            "trainiumAvailabilityZone": network.trainium_availability_zone,
            "trainiumAzId": network.trainium_az_id,
            "trainiumNodeGroups": [ng.contract_entry() for ng in node_groups],
            "trainiumPrivateIpsPerNode": {g.name: g.private_ips_per_node for g in config.trainium_node_groups},
            "trainiumNodeGroupScaling": {ng.config.name: ng.scaling_entry() for ng in node_groups},
            "trainiumNodeGroupSoftware": {
                g.name: software_entry(g, registry.repository_url) for g in config.trainium_node_groups
            },
            "nodeTaints": [
                {"key": layout.NEURON_TAINT_KEY, "value": layout.NEURON_TAINT_VALUE, "effect": layout.NEURON_TAINT_EFFECT_K8S}
            ],
            "volcanoQueues": scheduling.queues,
            "etcdEndpoint": scheduling.etcd_endpoint,
            "jobNamespace": scheduling.job_namespace,
            "fsxClaimName": storage.claim_name,
            "fsxFileSystemId": storage.file_system.id,
            "fsxDnsName": storage.file_system.dns_name,
            "fsxMountName": storage.file_system.mount_name,
            "fsxMountPath": layout.FSX_MOUNT_PATH,
            "fsxThroughputMBps": fsx_throughput.write_mb_s(
                config.storage.deployment_type, config.storage.capacity_gib, config.storage.throughput_per_tib
            ),
            "datasetsPath": layout.DATASETS_DIR,
            "checkpointsPath": layout.CHECKPOINTS_DIR,
            "neuronCompileCachePath": layout.NEURON_COMPILE_CACHE_DIR,
            "tensorboardLogPath": layout.TENSORBOARD_LOG_DIR,
            "ecrRepositoryUrl": registry.repository_url,
            "tensorboardService": tensorboard_service,
            "teams": teams.contract,
        }
        if access is not None:
            self.contract["apiAccess"] = {
                "hostInstanceId": access.instance_id,
                "usersPolicyArn": access.users_policy_arn,
                "document": PORT_FORWARDING_DOCUMENT,
            }
        self.register_outputs(self.contract)

    def _monitor(
        self, name: str, config: PlatformConfig, cluster: Cluster, storage: Storage, opts: pulumi.ResourceOptions
    ) -> None:
        """Container Insights and the dashboard; the alarms when the stack names a topic for them."""
        monitoring = Monitoring(
            f"{name}-monitoring",
            MonitoringArgs(
                config=config.monitoring,
                cluster_name=config.cluster.name,
                kubernetes_version=config.cluster.kubernetes_version,
                region=config.region,
                oidc_provider_arn=cluster.oidc_provider_arn,
                oidc_issuer=cluster.oidc_issuer,
                job_namespace=config.scheduling.job_namespace,
                file_system_id=storage.file_system.id,
                system_nodes=cluster.system_node_group,
                tags=config.tags,
            ),
            opts=opts,
        )
        if config.monitoring.alarms:
            Alarms(
                f"{name}-alarms",
                AlarmsArgs(
                    topic_arn=config.monitoring.alarm_topic_arn,
                    cluster_name=config.cluster.name,
                    job_namespace=config.scheduling.job_namespace,
                    etcd_members=config.scheduling.etcd_members,
                    file_system_id=storage.file_system.id,
                    fsx_capacity_gib=config.storage.capacity_gib,
                    tags=config.tags,
                    depends_on=[monitoring.addon],
                ),
                opts=opts,
            )
