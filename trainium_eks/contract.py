"""The platform's output contract: the stack outputs other teams and the job launcher rely on.

Semantic versioning: a new key is a minor bump; renaming, removing or changing the meaning of a key is a major
bump. A consumer accepts any platform whose major version equals the one it was written for and whose minor
version is at least the one that introduced the keys it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CONTRACT_VERSION = "1.1.0"

# Key -> the contract version that introduced it.
KEYS: Mapping[str, str] = {
    **dict.fromkeys(
        (
            "contractVersion",
            "environment",
            "region",
            "clusterName",
            "clusterEndpoint",
            "kubeconfig",
            "oidcProviderArn",
            "clusterSecurityGroupId",
            "vpcId",
            "privateSubnetIds",
            "trainiumSubnetId",
            "trainiumAvailabilityZone",
            "trainiumAzId",
            "trainiumNodeGroups",
            "nodeTaints",
            "volcanoQueues",
            "etcdEndpoint",
            "jobNamespace",
            "fsxClaimName",
            "fsxFileSystemId",
            "fsxMountPath",
            "datasetsPath",
            "checkpointsPath",
            "neuronCompileCachePath",
            "tensorboardLogPath",
            "ecrRepositoryUrl",
            "tensorboardService",
        ),
        "1.0.0",
    ),
    "fsxDnsName": "1.1.0",
    "fsxMountName": "1.1.0",
}


class ContractError(Exception):
    """Stack outputs that do not satisfy the contract; the message is one line naming the key and the fix."""


def _version(text: Any) -> tuple[int, int]:
    try:
        major, minor, *_ = str(text).split(".")
        return int(major), int(minor)
    except ValueError:
        raise ContractError(f"contractVersion: '{text}' is not a version; is this a trainium-eks stack?") from None


@dataclass(frozen=True)
class NodeGroup:
    name: str
    instance_type: str
    min_size: int
    desired_size: int
    max_size: int
    neuron_devices_per_node: int
    neuron_cores_per_node: int
    efa_interfaces_per_node: int
    vcpus_per_node: int
    memory_gib_per_node: int
    node_selector: Mapping[str, str]


@dataclass(frozen=True)
class PlatformContract:
    """The outputs, checked and typed. ``kubeconfig`` is None when the outputs hold no readable secret."""

    version: str
    region: str
    cluster_name: str
    kubeconfig: str | None
    node_groups: tuple[NodeGroup, ...]
    node_taints: tuple[Mapping[str, str], ...]
    queues: tuple[str, ...]
    etcd_endpoint: str
    job_namespace: str
    fsx_claim_name: str
    fsx_file_system_id: str
    fsx_dns_name: str
    fsx_mount_name: str
    fsx_mount_path: str
    datasets_path: str
    checkpoints_path: str
    neuron_compile_cache_path: str
    tensorboard_log_path: str
    ecr_repository_url: str

    def tolerations(self) -> list[dict]:
        """Kubernetes tolerations for the platform's node taints (what pods on Trainium nodes need)."""
        return [{"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]} for t in self.node_taints]

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, Any], *, requires: str = CONTRACT_VERSION) -> PlatformContract:
        """Check ``outputs`` (``pulumi stack output --json --show-secrets``) against contract ``requires``."""
        if "contractVersion" not in outputs:
            raise ContractError("contractVersion: missing; these are not the outputs of a trainium-eks stack")
        have, want = _version(outputs["contractVersion"]), _version(requires)
        if have[0] != want[0] or have < want:
            raise ContractError(
                f"contractVersion: the stack publishes {outputs['contractVersion']}, this consumer needs "
                f"{requires} (same major, minor at least); upgrade the platform stack or the consumer"
            )
        needed = [key for key, since in KEYS.items() if _version(since) <= want]
        missing = [key for key in needed if key not in outputs]
        if missing:
            raise ContractError(
                f"{missing[0]}: missing from contract {outputs['contractVersion']} outputs; "
                "the stack was changed without a contract version bump"
            )
        kubeconfig = outputs["kubeconfig"]
        return cls(
            version=str(outputs["contractVersion"]),
            region=outputs["region"],
            cluster_name=outputs["clusterName"],
            kubeconfig=kubeconfig if isinstance(kubeconfig, str) and kubeconfig.startswith("{") else None,
            node_groups=tuple(
                NodeGroup(
                    name=g["name"],
                    instance_type=g["instanceType"],
                    min_size=int(g["minSize"]),
                    desired_size=int(g["desiredSize"]),
                    max_size=int(g["maxSize"]),
                    neuron_devices_per_node=int(g["neuronDevicesPerNode"]),
                    neuron_cores_per_node=int(g["neuronCoresPerNode"]),
                    efa_interfaces_per_node=int(g["efaInterfacesPerNode"]),
                    vcpus_per_node=int(g["vcpusPerNode"]),
                    memory_gib_per_node=int(g["memoryGiBPerNode"]),
                    node_selector=dict(g["nodeSelector"]),
                )
                for g in outputs["trainiumNodeGroups"]
            ),
            node_taints=tuple(dict(t) for t in outputs["nodeTaints"]),
            queues=tuple(q["name"] for q in outputs["volcanoQueues"]),
            etcd_endpoint=outputs["etcdEndpoint"],
            job_namespace=outputs["jobNamespace"],
            fsx_claim_name=outputs["fsxClaimName"],
            fsx_file_system_id=outputs["fsxFileSystemId"],
            fsx_dns_name=outputs["fsxDnsName"],
            fsx_mount_name=outputs["fsxMountName"],
            fsx_mount_path=outputs["fsxMountPath"],
            datasets_path=outputs["datasetsPath"],
            checkpoints_path=outputs["checkpointsPath"],
            neuron_compile_cache_path=outputs["neuronCompileCachePath"],
            tensorboard_log_path=outputs["tensorboardLogPath"],
            ecr_repository_url=outputs["ecrRepositoryUrl"],
        )
