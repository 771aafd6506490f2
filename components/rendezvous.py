"""Rendezvous: the etcd cluster through which the TorchElastic agents of a training job find each other.

torch's ``etcd-v2`` backend keeps a job's rendezvous state in one key that every agent rewrites on each
heartbeat, over etcd's v2 API (so etcd stays on the 3.5 line, the last with ``--enable-v2``). Its client
(python-etcd, created with ``allow_reconnect=True``) asks the first member it reaches for the cluster's
advertised client URLs and fails over to them when that member goes away. So each member advertises a
stable URL of its own (its pod name under a headless Service), and with three members a drained node, an
eviction or an OOM of one member leaves every running job training. Jobs reach the cluster through a
ClusterIP Service over the ready members (``etcdEndpoint`` in the outputs).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.kube import from_namespace, ingress_policy, system_node_selector
from trainium_eks import layout, versions
from trainium_eks.pod_security import restricted_container_security_context, restricted_pod_security_context

ETCD_NAME = "etcd"
MEMBERS_SERVICE = "etcd-members"  # headless: one DNS name per member, published before the member is ready
ETCD_PEER_PORT = 2380
# The image is distroless; run as an unprivileged user that owns the data volume (fsGroup), above 10000 so it is
# no user of the node's. A volume written by an earlier UID is handed over by the kubelet's fsGroup change.
ETCD_UID = 10001
DATA_DIR = "/var/lib/etcd"
HEALTH_PATH = "/health"  # healthy once the member has a leader and serves requests
# The members' claims go with the StatefulSet, so that `pulumi destroy` leaves no EBS volume behind (the gp3 class
# reclaims with Delete outside protected stacks), and stay when it scales in, so a member that comes back finds its data
# (Kubernetes docs, StatefulSets, "PersistentVolumeClaim retention", stable since 1.32). An existing StatefulSet takes it
# in place: kubernetes pkg/apis/apps/validation ValidateStatefulSetUpdate lists it among the spec's mutable fields.
CLAIM_RETENTION = {"whenDeleted": "Delete", "whenScaled": "Retain"}


@dataclass(frozen=True)
class RendezvousArgs:
    namespace: pulumi.Input[str]
    namespace_name: str  # the same namespace as a plain string: member URLs are built from it
    members: int
    storage_gib: int
    block_storage_class: pulumi.Input[str]
    team_namespaces: tuple[str, ...] = ()  # the teams' namespaces, whose jobs meet here too


def client_endpoint(namespace: str) -> str:
    """host:port of the ClusterIP Service the jobs use."""
    return f"{ETCD_NAME}.{namespace}.svc.cluster.local:{layout.ETCD_CLIENT_PORT}"


def quorum(members: int) -> int:
    """Members that must stay up for etcd to serve: a majority."""
    return members // 2 + 1


def member_url(member: str, namespace: str, port: int) -> str:
    """A member's own stable URL: its pod name under the headless Service."""
    return f"http://{member}.{MEMBERS_SERVICE}.{namespace}.svc.cluster.local:{port}"


def member_flags(namespace: str, members: int) -> list[str]:
    """etcd's command line, the same for every member; ``$(POD_NAME)`` is expanded by the kubelet."""
    this_member = "$(POD_NAME)"
    initial_cluster = ",".join(
        f"{ETCD_NAME}-{i}={member_url(f'{ETCD_NAME}-{i}', namespace, ETCD_PEER_PORT)}" for i in range(members)
    )
    return [
        f"--name={this_member}",
        f"--data-dir={DATA_DIR}/data",
        "--enable-v2=true",  # torch's etcd rendezvous backends speak the v2 API
        f"--listen-client-urls=http://0.0.0.0:{layout.ETCD_CLIENT_PORT}",
        f"--advertise-client-urls={member_url(this_member, namespace, layout.ETCD_CLIENT_PORT)}",
        f"--listen-peer-urls=http://0.0.0.0:{ETCD_PEER_PORT}",
        f"--initial-advertise-peer-urls={member_url(this_member, namespace, ETCD_PEER_PORT)}",
        f"--initial-cluster={initial_cluster}",
        "--initial-cluster-state=new",  # read only on a member's first start; later starts use its data dir
        f"--initial-cluster-token={ETCD_NAME}-{namespace}",
        "--auto-compaction-mode=periodic",
        "--auto-compaction-retention=1h",  # rendezvous keys churn; keep the database small
        "--quota-backend-bytes=2147483648",
    ]


class Rendezvous(pulumi.ComponentResource):
    """An etcd cluster of ``members`` members on the system nodes, one per node, each with its own volume."""

    endpoint: str

    def __init__(self, name: str, args: RendezvousArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:kubernetes:Rendezvous", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = {"app.kubernetes.io/name": ETCD_NAME, "app.kubernetes.io/part-of": "trainium-eks"}
        client_port = {"name": "client", "port": layout.ETCD_CLIENT_PORT, "targetPort": "client", "protocol": "TCP"}
        peer_port = {"name": "peer", "port": ETCD_PEER_PORT, "targetPort": "peer", "protocol": "TCP"}
        members_service = k8s.core.v1.Service(
            f"{name}-members",
            metadata={"name": MEMBERS_SERVICE, "namespace": args.namespace, "labels": labels},
            spec={
                "type": "ClusterIP",
                "clusterIP": "None",
                "publishNotReadyAddresses": True,  # members must find each other before any of them is ready
                "selector": labels,
                "ports": [client_port, peer_port],
            },
            opts=child,
        )
        k8s.core.v1.Service(
            f"{name}-client",
            metadata={"name": ETCD_NAME, "namespace": args.namespace, "labels": labels},
            spec={"type": "ClusterIP", "selector": labels, "ports": [client_port]},
            opts=child,
        )
        k8s.apps.v1.StatefulSet(
            f"{name}-etcd",
            metadata={"name": ETCD_NAME, "namespace": args.namespace, "labels": labels},
            spec={
                "serviceName": members_service.metadata.name,
                "replicas": args.members,
                "podManagementPolicy": "Parallel",  # a member is ready only with a quorum: start them together
                "persistentVolumeClaimRetentionPolicy": CLAIM_RETENTION,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": self._pod_spec(args, labels)},
                "volumeClaimTemplates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "storageClassName": args.block_storage_class,
                            "resources": {"requests": {"storage": f"{args.storage_gib}Gi"}},
                        },
                    }
                ],
            },
            # Deleted before the gp3 class and so before the EBS CSI add-on it depends on: the driver's controller still
            # runs to delete the volumes of the claims that go with the StatefulSet.
            opts=child,
        )
        ingress_policy(
            f"{name}-access",
            name=ETCD_NAME,
            namespace=args.namespace,
            labels=labels,
            ingress=[
                # clients: the pods of the job namespace (training jobs, acceptance checks) and of the teams'
                # namespaces, and nothing else
                from_namespace(args.namespace, layout.ETCD_CLIENT_PORT),
                *(from_namespace(team, layout.ETCD_CLIENT_PORT) for team in args.team_namespaces),
                {  # peers: the other members
                    "from": [{"podSelector": {"matchLabels": labels}}],
                    "ports": [{"port": ETCD_PEER_PORT, "protocol": "TCP"}],
                },
            ],
            parent=self,
        )
        if args.members > 1:  # a single member has no majority to keep: draining its node interrupts the jobs
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-quorum",
                metadata={"name": ETCD_NAME, "namespace": args.namespace, "labels": labels},
                spec={"minAvailable": quorum(args.members), "selector": {"matchLabels": labels}},
                opts=child,
            )
        self.endpoint = client_endpoint(args.namespace_name)
        self.register_outputs({"endpoint": self.endpoint})

    @staticmethod
    def _pod_spec(args: RendezvousArgs, labels: dict) -> dict:
        return {
            "nodeSelector": system_node_selector(),
            "automountServiceAccountToken": False,  # etcd never calls the Kubernetes API
            "affinity": {  # one member per node: a node drain takes at most one member
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
                    ]
                }
            },
            "topologySpreadConstraints": [  # and across AZs where the system nodes allow it
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": labels},
                }
            ],
            "securityContext": restricted_pod_security_context(ETCD_UID, owns_volumes=True),
            "containers": [member_container(args.namespace_name, args.members)],
        }


def member_container(namespace: str, members: int) -> dict:
    """The etcd member's container, the same for every member (``jobs.rehearsal`` runs it locally as well)."""
    return {
        "name": ETCD_NAME,
        "image": versions.ETCD_IMAGE,
        "command": ["/usr/local/bin/etcd"],
        "args": member_flags(namespace, members),
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [
            {"name": "client", "containerPort": layout.ETCD_CLIENT_PORT, "protocol": "TCP"},
            {"name": "peer", "containerPort": ETCD_PEER_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": {
            "httpGet": {"path": HEALTH_PATH, "port": "client"},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
        },
        # Alive is listening: /health fails on every member while quorum is lost, and restarting
        # them all then would only make it worse.
        "livenessProbe": {
            "tcpSocket": {"port": "client"},
            "initialDelaySeconds": 15,
            "periodSeconds": 20,
            "timeoutSeconds": 5,
            "failureThreshold": 5,
        },
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "securityContext": restricted_container_security_context(),
        "volumeMounts": [{"name": "data", "mountPath": DATA_DIR}],
    }
