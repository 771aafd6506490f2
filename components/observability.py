"""Observability: TensorBoard over the training logs on the shared volume, reachable only inside the cluster.

No LoadBalancer and no Ingress: the tutorial's public load balancer with a basic-auth password is replaced by
a ClusterIP Service that engineers reach with their own Kubernetes credentials:

    kubectl -n <jobNamespace> port-forward svc/tensorboard 6006:6006   # then open http://localhost:6006

Cluster, Neuron and EFA metrics are in ``components/monitoring.py``, the alarms in ``components/alarms.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.cluster import ClusterHandle
from components.kube import from_namespace, ingress_policy, system_node_selector
from trainium_eks import layout, versions
from trainium_eks.pod_security import restricted_container_security_context, restricted_pod_security_context

TENSORBOARD_NAME = "tensorboard"
TENSORBOARD_UID = 10001  # unprivileged, and above 10000 so it is no user of the node's


@dataclass(frozen=True)
class ObservabilityArgs:
    job_namespace: pulumi.Input[str]
    claim_name: pulumi.Input[str]
    cluster: ClusterHandle  # the pod runs on its system nodes; the Deployment is ready only once they are


class Observability(pulumi.ComponentResource):
    service_name: pulumi.Output[str]

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:observability:Observability", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self)
        labels = {"app.kubernetes.io/name": TENSORBOARD_NAME, "app.kubernetes.io/part-of": "trainium-eks"}
        k8s.apps.v1.Deployment(
            f"{name}-tensorboard",
            metadata={"name": TENSORBOARD_NAME, "namespace": args.job_namespace, "labels": labels},
            spec={
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": system_node_selector(),
                        "automountServiceAccountToken": False,  # TensorBoard never calls the Kubernetes API
                        "securityContext": restricted_pod_security_context(TENSORBOARD_UID),
                        "containers": [
                            {
                                "name": TENSORBOARD_NAME,
                                "image": versions.TENSORBOARD_IMAGE,
                                "command": ["tensorboard"],
                                "args": [
                                    f"--logdir={layout.TENSORBOARD_LOG_DIR}",
                                    "--bind_all",
                                    f"--port={layout.TENSORBOARD_PORT}",
                                    "--reload_interval=30",
                                ],
                                "ports": [{"name": "http", "containerPort": layout.TENSORBOARD_PORT, "protocol": "TCP"}],
                                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 15},
                                # Restart a TensorBoard that stops answering (it can wedge reloading a large logdir).
                                "livenessProbe": {
                                    "httpGet": {"path": "/", "port": "http"},
                                    "initialDelaySeconds": 30,
                                    "periodSeconds": 30,
                                    "timeoutSeconds": 10,
                                    "failureThreshold": 5,
                                },
                                "resources": {
                                    "requests": {"cpu": "250m", "memory": "1Gi"},
                                    "limits": {"cpu": "2", "memory": "4Gi"},
                                },
                                "securityContext": restricted_container_security_context(),
                                "env": [{"name": "HOME", "value": "/tmp"}],
                                "volumeMounts": [
                                    {"name": "shared", "mountPath": layout.FSX_MOUNT_PATH, "readOnly": True},
                                    {"name": "tmp", "mountPath": "/tmp"},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "shared", "persistentVolumeClaim": {"claimName": args.claim_name, "readOnly": True}},
                            {"name": "tmp", "emptyDir": {}},
                        ],
                    },
                },
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.cluster.system_nodes]),
        )
        service = k8s.core.v1.Service(
            f"{name}-tensorboard",
            metadata={"name": TENSORBOARD_NAME, "namespace": args.job_namespace, "labels": labels},
            spec={
                "type": "ClusterIP",
                "selector": labels,
                "ports": [{"name": "http", "port": layout.TENSORBOARD_PORT, "targetPort": "http", "protocol": "TCP"}],
            },
            opts=k8s_opts,
        )
        # Only the job namespace's pods reach TensorBoard over the network. port-forward connects inside the pod and
        # the kubelet probes from the node: a NetworkPolicy restricts neither (Kubernetes docs, Network Policies:
        # what you can't do; the VPC CNI's policy agent always admits the node's IP).
        ingress_policy(
            f"{name}-tensorboard",
            name=TENSORBOARD_NAME,
            namespace=args.job_namespace,
            labels=labels,
            ingress=[from_namespace(args.job_namespace, layout.TENSORBOARD_PORT)],
            parent=self,
        )
        self.service_name = service.metadata.name
        self.register_outputs({"serviceName": self.service_name})
