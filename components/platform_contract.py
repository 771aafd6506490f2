"""The output contract a whole platform publishes: a flat map of stable, camelCase, JSON-friendly values that consumers
read through a StackReference; the keys and their versions are declared in ``trainium_eks/contract.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi

from trainium_eks import fsx_throughput, layout
from trainium_eks.config import PlatformConfig, TrainiumNodeGroupConfig
from trainium_eks.contract import CONTRACT_VERSION

if TYPE_CHECKING:
    from components.cluster import Cluster
    from components.network import Network
    from components.platform import ClusterServices
    from components.registry import Registry
    from components.trainium_node_group import TrainiumNodeGroup


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


def platform_contract(
    config: PlatformConfig,
    network: Network,
    cluster: Cluster,
    node_groups: list[TrainiumNodeGroup],
    services: ClusterServices,
    registry: Registry,
    tensorboard_service: pulumi.Input[str],
) -> dict[str, pulumi.Input]:
    """The output contract of a whole platform (its keys are declared in ``trainium_eks/contract.py``)."""
    scheduling, storage = services.scheduling, services.storage
    return {
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
        "trainiumNodeGroupSoftware": {g.name: software_entry(g, registry.repository_url) for g in config.trainium_node_groups},
        "nodeTaints": [
            {"key": layout.NEURON_TAINT_KEY, "value": layout.NEURON_TAINT_VALUE, "effect": layout.NEURON_TAINT_EFFECT_K8S}
        ],
        "volcanoQueues": scheduling.queues,
        "etcdEndpoint": scheduling.etcd_endpoint,
        "etcdMembers": config.scheduling.etcd_members,
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
        "teams": services.teams.contract,
    }
