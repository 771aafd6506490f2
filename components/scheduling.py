"""Scheduling: the job namespace, the Volcano batch scheduler with its queues, and the rendezvous etcd cluster.

A queue's capability is its share of each node group in whole nodes, times the devices, cores and EFA interfaces of
one node (``trainium_eks.shares``), so a queue can never promise more accelerators than the node groups can hold, every
whole node it is entitled to fits its capability on every resource, scaling within maxSize leaves the queues untouched,
and CPU and memory are never capped (the tutorial's ``capability: {cpu: 2}`` blocked every pod that asked for CPU;
Volcano takes a capability without them as unlimited: release-1.15 pkg/scheduler/plugins/proportion/proportion.go
L120-127). etcd runs the v2 API, which
torch's ``etcd`` and ``etcd-v2`` rendezvous backends (python-etcd) speak.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.cluster import ClusterHandle
from components.kube import helm_release, system_node_selector
from components.rendezvous import Rendezvous, RendezvousArgs
from trainium_eks import shares, versions
from trainium_eks.config import SchedulingConfig, TrainiumNodeGroupConfig

VOLCANO_NAMESPACE = "volcano-system"

# The scheduler's configuration: Volcano's default (chart release-1.15 config/volcano-scheduler.conf: actions
# "enqueue, allocate, backfill"; tiers priority, gang, conformance | overcommit, drf, predicates, proportion,
# nodeorder, binpack) without the enqueue action and the overcommit plugin, so that a job waiting for elastic
# Trainium capacity gets pods Karpenter can see:
# - With enqueue on, a PodGroup stays Pending while the cluster lacks idle capacity, and the job controller creates no
#   pod until it is Inqueue (syncJob), so an autoscaler never sees a pending pod (volcano-sh/volcano#3910, #2558).
#   Without enqueue, allocate moves a Pending PodGroup to Inqueue itself ("no enqueue action is configured":
#   pkg/scheduler/actions/allocate/allocate.go, release-1.15; made optional for this in PR #2309). overcommit only
#   votes in enqueue, so it goes too.
# - Gang stays: allocate commits a job's placements only when gang's JobReady holds (minAvailable), else discards
#   them; pods that fit no node get PodScheduled=False, reason Unschedulable, which is what Karpenter provisions for.
#   backfill places request-less pods one by one; every pod of the platform's jobs has requests.
# - The queues' capability stays a cap: proportion's AllocatableFn is checked per pod inside allocate.
SCHEDULER_ACTIONS = "allocate, backfill"
SCHEDULER_TIERS = [
    {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
    {
        "plugins": [
            {"name": "drf", "enablePreemptable": False},
            {"name": "predicates"},
            {"name": "proportion"},
            {"name": "nodeorder"},
            {"name": "binpack"},
        ]
    },
]


def scheduler_config() -> str:
    """The volcano-scheduler.conf the chart writes from ``custom.scheduler_config_override`` (templates/scheduler.yaml)."""
    return yaml.safe_dump({"actions": SCHEDULER_ACTIONS, "tiers": SCHEDULER_TIERS}, sort_keys=False)


@dataclass(frozen=True)
class SchedulingArgs:
    config: SchedulingConfig
    # Its Kubernetes version is the Pod Security Standards version the job namespace enforces; Volcano's controllers
    # run on its system nodes (the release waits for them), etcd's volumes are of its block storage class.
    cluster: ClusterHandle
    node_groups: Sequence[TrainiumNodeGroupConfig]


def pod_security_labels(kubernetes_version: str) -> dict[str, str]:
    """Pod Security admission for the job namespace: enforce "baseline", the strictest level the training pods
    pass (the Neuron training image runs as root); warn and audit at "restricted" to show what is left."""
    version = f"v{kubernetes_version}"
    return {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/enforce-version": version,
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": version,
        "pod-security.kubernetes.io/audit": "restricted",
        "pod-security.kubernetes.io/audit-version": version,
    }


class Scheduling(pulumi.ComponentResource):
    """Volcano, its queues, and the rendezvous etcd in the job namespace."""

    job_namespace: pulumi.Output[str]
    queues: list[dict]  # name, weight and capability of each queue, as the output contract publishes them
    etcd_endpoint: str
    volcano: pulumi.Resource  # the Volcano release: custom resources of its CRDs wait for it

    def __init__(self, name: str, args: SchedulingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:kubernetes:Scheduling", name, None, opts)
        cfg = args.config
        k8s_opts = pulumi.ResourceOptions(parent=self)

        namespace = k8s.core.v1.Namespace(
            f"{name}-jobs",
            metadata={
                "name": cfg.job_namespace,
                "labels": {"app.kubernetes.io/part-of": "trainium-eks", **pod_security_labels(args.cluster.kubernetes_version)},
            },
            opts=k8s_opts,
        )
        volcano = helm_release(
            name,
            "volcano",
            versions.VOLCANO_CHART,
            namespace=VOLCANO_NAMESPACE,
            create_namespace=True,
            values={
                "basic": {"image_pull_policy": "IfNotPresent"},
                "custom": {
                    "default_ns": system_node_selector(),  # controllers stay off Trainium nodes
                    "scheduler_config_override": scheduler_config(),
                },
            },
            parent=self,
            depends_on=[args.cluster.system_nodes],
        )
        groups = shares.fleet(args.node_groups)
        self.queues = []
        for queue in cfg.queues:
            capability = shares.share_capability(queue.neuron_share, groups)
            self.queues.append({"name": queue.name, "weight": queue.weight, "capability": capability})
            k8s.apiextensions.CustomResource(
                f"{name}-queue-{queue.name}",
                api_version="scheduling.volcano.sh/v1beta1",
                kind="Queue",
                metadata={"name": queue.name, "labels": {"app.kubernetes.io/part-of": "trainium-eks"}},
                spec={"weight": queue.weight, "reclaimable": False, "capability": capability},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[volcano]),
            )

        rendezvous = Rendezvous(
            f"{name}-rendezvous",
            RendezvousArgs(
                namespace=namespace.metadata.name,
                namespace_name=cfg.job_namespace,
                members=cfg.etcd_members,
                storage_gib=cfg.etcd_storage_gib,
                block_storage_class=args.cluster.block_storage_class,
                team_namespaces=tuple(team.namespace for team in cfg.teams),
            ),
            opts=k8s_opts,
        )
        self.volcano = volcano
        self.job_namespace = namespace.metadata.name
        self.etcd_endpoint = rendezvous.endpoint
        self.register_outputs({"jobNamespace": self.job_namespace, "etcdEndpoint": self.etcd_endpoint})
