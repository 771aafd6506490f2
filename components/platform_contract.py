"""The output contract a whole platform publishes: a flat map of stable, camelCase, JSON-friendly values that consumers
read through a StackReference; the keys and their versions are declared in ``trainium_eks/contract.py``. Built here
alone: the whole platform's (``platform_contract``, from the parts it built, ``BuiltPlatform``) and a private stack's
first step's (``bootstrap_contract``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi

from components.api_access import PORT_FORWARDING_DOCUMENT
from trainium_eks import fsx_throughput, layout
from trainium_eks.config import PlatformConfig, TrainiumNodeGroupConfig
from trainium_eks.contract import CONTRACT_VERSION

if TYPE_CHECKING:
    from components.api_access import ApiAccessHost
    from components.cluster import Cluster
    from components.deploy_runner import DeployRunner
    from components.network import Network
    from components.registry import Registry
    from components.scheduling import Scheduling
    from components.storage import Storage
    from components.teams import Teams
    from components.trainium_node_group import TrainiumNodeGroup


@dataclass(frozen=True)
class BuiltPlatform:
    """The parts of a built platform that the contract publishes."""

    network: Network
    cluster: Cluster
    node_groups: Sequence[TrainiumNodeGroup]
    scheduling: Scheduling
    storage: Storage
    teams: Teams
    registry: Registry
    tensorboard_service: pulumi.Input[str]  # its in-cluster address, or "" when it is off
    access: ApiAccessHost | None  # the access host of a private-only endpoint


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


def bootstrap_contract(config: PlatformConfig, network: Network, runner: DeployRunner) -> dict[str, pulumi.Input]:
    """A private stack's first step's outputs, the network and the deploy runner: not the contract, so consumers refuse
    the stack (no ``contractVersion``) until the whole platform runs."""
    return {
        "environment": config.environment,
        "region": config.region,
        "vpcId": network.vpc_id,
        "deployRunnerProject": runner.project_name,
    }


def platform_contract(config: PlatformConfig, built: BuiltPlatform) -> dict[str, pulumi.Input]:
    """The output contract of a whole platform (its keys are declared in ``trainium_eks/contract.py``)."""
    network, node_groups, registry = built.network, built.node_groups, built.registry
    scheduling, storage, cluster = built.scheduling, built.storage, built.cluster.handle
    contract = {
        "contractVersion": CONTRACT_VERSION,
        "environment": config.environment,
        "region": config.region,
        "clusterName": cluster.name,
        "clusterEndpoint": cluster.endpoint,
        "kubeconfig": built.cluster.kubeconfig,
        "oidcProviderArn": cluster.oidc_provider_arn,
        "clusterSecurityGroupId": cluster.security_group_id,
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
        "tensorboardService": built.tensorboard_service,
        "teams": built.teams.contract,
    }
    if built.access is not None:
        contract["apiAccess"] = {
            "hostInstanceId": built.access.instance_id,
            "usersPolicyArn": built.access.users_policy_arn,
            "document": PORT_FORWARDING_DOCUMENT,
        }
    return contract
