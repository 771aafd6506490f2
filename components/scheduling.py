"""Scheduling: the job namespace, the Volcano batch scheduler with its queues, and etcd for TorchElastic rendezvous.

A queue's capability is derived from the Neuron capacity the node groups provision (their maximum size times the
devices, cores and EFA interfaces per node), so a queue can never promise more accelerators than the node groups
can hold, scaling within maxSize leaves the queues untouched, and CPU and memory are never capped (the
tutorial's ``capability: {cpu: 2}`` blocked every pod that asked for CPU). etcd runs the v2 API, which
torch's ``etcd`` and ``etcd-v2`` rendezvous backends (python-etcd) speak.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.kube import (
    helm_release,
    restricted_container_security_context,
    restricted_pod_security_context,
    system_node_selector,
)
from trainium_eks import layout, versions
from trainium_eks.config import QueueConfig, SchedulingConfig, TrainiumNodeGroupConfig

VOLCANO_NAMESPACE = "volcano-system"
ETCD_NAME = "etcd"
ETCD_PEER_PORT = 2380
ETCD_UID = 1000  # the image is distroless; run as an unprivileged user that owns the data volume


@dataclass(frozen=True)
class SchedulingArgs:
    config: SchedulingConfig
    node_groups: Sequence[TrainiumNodeGroupConfig]
    block_storage_class: pulumi.Input[str]
    provider: k8s.Provider
    system_nodes: pulumi.Resource  # Volcano's controllers run there; its release waits for them


def provisioned_capacity(node_groups: Sequence[TrainiumNodeGroupConfig]) -> dict[str, int]:
    """Extended resources the node groups provide at their maximum size."""
    return {
        layout.NEURON_DEVICE_RESOURCE: sum(g.scaling.max_size * g.spec.neuron_devices for g in node_groups),
        layout.NEURON_CORE_RESOURCE: sum(g.scaling.max_size * g.spec.neuron_cores for g in node_groups),
        layout.EFA_RESOURCE: sum(g.scaling.max_size * g.efa_interfaces for g in node_groups),
    }


def queue_capability(queue: QueueConfig, capacity: dict[str, int]) -> dict[str, int]:
    """The queue's share of the provisioned capacity, rounded down; resources the platform lacks are omitted."""
    return {resource: math.floor(amount * queue.neuron_share) for resource, amount in capacity.items() if amount}


def etcd_endpoint(namespace: str) -> str:
    return f"{ETCD_NAME}.{namespace}.svc.cluster.local:{layout.ETCD_CLIENT_PORT}"


class Scheduling(pulumi.ComponentResource):
    """Volcano, its queues, and the rendezvous etcd in the job namespace."""

    job_namespace: pulumi.Output[str]
    queues: list[dict]  # name, weight and capability of each queue, as the output contract publishes them
    etcd_endpoint: str

    def __init__(self, name: str, args: SchedulingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:kubernetes:Scheduling", name, None, opts)
        cfg = args.config
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)

        namespace = k8s.core.v1.Namespace(
            f"{name}-jobs",
            metadata={"name": cfg.job_namespace, "labels": {"app.kubernetes.io/part-of": "trainium-eks"}},
            opts=k8s_opts,
        )
        volcano = helm_release(
            "volcano",
            versions.VOLCANO_CHART,
            namespace=VOLCANO_NAMESPACE,
            create_namespace=True,
            values={
                "basic": {"image_pull_policy": "IfNotPresent"},
                "custom": {"default_ns": system_node_selector()},  # controllers stay off Trainium nodes
            },
            parent=self,
            provider=args.provider,
            depends_on=[args.system_nodes],
        )
        capacity = provisioned_capacity(args.node_groups)
        self.queues = []
        for queue in cfg.queues:
            capability = queue_capability(queue, capacity)
            self.queues.append({"name": queue.name, "weight": queue.weight, "capability": capability})
            k8s.apiextensions.CustomResource(
                f"{name}-queue-{queue.name}",
                api_version="scheduling.volcano.sh/v1beta1",
                kind="Queue",
                metadata={"name": queue.name, "labels": {"app.kubernetes.io/part-of": "trainium-eks"}},
                spec={"weight": queue.weight, "reclaimable": False, "capability": capability},
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[volcano]),
            )

        self._etcd(name, cfg, namespace, args.block_storage_class, k8s_opts)
        self.job_namespace = namespace.metadata.name
        self.etcd_endpoint = etcd_endpoint(cfg.job_namespace)
        self.register_outputs({"jobNamespace": self.job_namespace, "etcdEndpoint": self.etcd_endpoint})

    def _etcd(self, name: str, cfg: SchedulingConfig, namespace: k8s.core.v1.Namespace, storage_class, k8s_opts) -> None:
        labels = {"app.kubernetes.io/name": ETCD_NAME, "app.kubernetes.io/part-of": "trainium-eks"}
        client_url = f"http://{etcd_endpoint(cfg.job_namespace)}"
        peer_url = f"http://127.0.0.1:{ETCD_PEER_PORT}"  # a single member: peers only on loopback
        probe_port = layout.ETCD_CLIENT_PORT
        service = k8s.core.v1.Service(
            f"{name}-etcd",
            metadata={"name": ETCD_NAME, "namespace": namespace.metadata.name, "labels": labels},
            spec={
                "type": "ClusterIP",
                "selector": labels,
                "ports": [{"name": "client", "port": layout.ETCD_CLIENT_PORT, "targetPort": "client", "protocol": "TCP"}],
            },
            opts=k8s_opts,
        )
        k8s.apps.v1.StatefulSet(
            f"{name}-etcd",
            metadata={"name": ETCD_NAME, "namespace": namespace.metadata.name, "labels": labels},
            spec={
                "serviceName": service.metadata.name,
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": system_node_selector(),
                        "securityContext": restricted_pod_security_context(ETCD_UID, owns_volumes=True),
                        "containers": [
                            {
                                "name": ETCD_NAME,
                                "image": versions.ETCD_IMAGE,
                                "command": ["/usr/local/bin/etcd"],
                                "args": [
                                    "--name=etcd-0",
                                    "--data-dir=/var/lib/etcd/data",
                                    "--enable-v2=true",  # torch's etcd rendezvous uses the v2 API
                                    f"--listen-client-urls=http://0.0.0.0:{layout.ETCD_CLIENT_PORT}",
                                    f"--advertise-client-urls={client_url}",
                                    f"--listen-peer-urls={peer_url}",
                                    f"--initial-advertise-peer-urls={peer_url}",
                                    f"--initial-cluster=etcd-0={peer_url}",
                                    "--initial-cluster-state=new",
                                    "--auto-compaction-mode=periodic",
                                    "--auto-compaction-retention=1h",  # rendezvous keys churn; keep the DB small
                                    "--quota-backend-bytes=2147483648",
                                ],
                                "ports": [{"name": "client", "containerPort": layout.ETCD_CLIENT_PORT, "protocol": "TCP"}],
                                "readinessProbe": {
                                    "httpGet": {"path": "/health", "port": probe_port},
                                    "periodSeconds": 10,
                                    "timeoutSeconds": 5,
                                },
                                "livenessProbe": {
                                    "httpGet": {"path": "/health", "port": probe_port},
                                    "initialDelaySeconds": 15,
                                    "periodSeconds": 20,
                                    "timeoutSeconds": 5,
                                    "failureThreshold": 5,
                                },
                                "resources": {
                                    "requests": {"cpu": "250m", "memory": "512Mi"},
                                    "limits": {"cpu": "1", "memory": "1Gi"},
                                },
                                "securityContext": restricted_container_security_context(),
                                "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
                            }
                        ],
                    },
                },
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "storageClassName": storage_class,
                            "resources": {"requests": {"storage": f"{cfg.etcd_storage_gib}Gi"}},
                        },
                    }
                ],
            },
            opts=k8s_opts,
        )
