"""Alarms for the stack's owner: CloudWatch alarms that notify the stack's SNS topic when something stops training.

Five conditions, each from a metric AWS publishes (Container Insights through the CloudWatch Observability
add-on, FSx natively), each notified when it starts and when it clears:

- nodes lost or failing: ``cluster_failed_node_count``, which the agent leading the cluster counts from the
  Kubernetes API: nodes whose MemoryPressure, DiskPressure, PIDPressure or NetworkUnavailable condition is not
  False. A node whose kubelet stops reporting (a dead instance) has those set to Unknown by Kubernetes' node
  lifecycle controller, so it counts although it reports nothing itself.
- nodes not ready: ``node_status_condition_ready``, which each node's agent reports for its node (1 while Ready);
  the cluster-wide minimum drops when a running node turns NotReady.
- Neuron hardware errors: ``node_neurondevice_hw_ecc_events_total``, the corrected and uncorrected ECC events
  of the devices' SRAM and HBM, which the agent turns into a count per interval.
- FSx nearly full: ``FreeDataStorageCapacity`` (``AWS/FSx``; ``Sum`` over one minute is the bytes free in the
  file system).
- etcd without a majority: ``service_number_of_running_pods`` of etcd's client Service, which only ready members
  back.

Container Insights gives node metrics no node-group dimension, so the two node alarms cover system nodes as well
as Trainium nodes. Sources: CloudWatch User Guide, "Amazon EKS and Kubernetes Container Insights with enhanced
observability metrics"; amazon-contributing/opentelemetry-collector-contrib internal/aws/k8s/k8sclient/node.go
(failedNodeConditions) and receiver/awscontainerinsightreceiver/internal/k8sapiserver (the leader's cluster
metrics); kubernetes/kubernetes pkg/controller/nodelifecycle (conditions set to Unknown); aws/amazon-cloudwatch-agent
translator (the Neuron counters go through its cumulative-to-delta processor); FSx for Lustre User Guide, "Amazon
FSx for Lustre metrics and dimensions".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.cluster import ClusterHandle
from components.monitoring import CONTAINER_INSIGHTS, FSX_NAMESPACE
from components.rendezvous import ETCD_NAME

GIB = 2**30  # FSx storage capacity is provisioned in GiB
FSX_FREE_FRACTION = 0.10  # warn with a tenth left, room for a few more checkpoints while old ones are cleared
FSX_METRIC_PERIOD_SECONDS = 60  # FSx's own publishing interval (see the FSx alarm)


@dataclass(frozen=True)
class AlarmRule:
    short: str
    description: str
    namespace: str
    metric: str
    dimensions: Mapping[str, pulumi.Input[str]]
    statistic: str
    comparison: str
    threshold: float
    period_seconds: int
    evaluation_periods: int  # consecutive periods that must breach
    treat_missing_data: str


@dataclass(frozen=True)
class AlarmsArgs:
    topic_arn: str
    cluster: ClusterHandle  # its configured name is the metrics' ClusterName dimension
    job_namespace: str
    etcd_members: int
    file_system_id: pulumi.Input[str]
    fsx_capacity_gib: int
    depends_on: Sequence[pulumi.Resource]  # the add-on: an alarm created before metrics flow starts in alarm


def etcd_majority(members: int) -> int:
    return members // 2 + 1


def alarm_rules(args: AlarmsArgs) -> tuple[AlarmRule, ...]:
    cluster = {"ClusterName": args.cluster.config_name}
    majority = etcd_majority(args.etcd_members)
    return (
        AlarmRule(
            "nodes-failed",
            "A node of the cluster (Trainium or system) has been lost (its kubelet stopped reporting) or has reported "
            "memory, disk or PID pressure or an unavailable network for 5 minutes: jobs on it stop, and Volcano cannot "
            "place a job that needs it. kubectl get nodes shows which.",
            CONTAINER_INSIGHTS,
            "cluster_failed_node_count",
            cluster,
            "Maximum",
            "GreaterThanOrEqualToThreshold",
            1,
            60,
            # Five minutes rides out a node that is joining or rebooting; longer, it will not recover by itself.
            5,
            # The leader agent reports this every minute; silence means the cluster is not being watched at all.
            "breaching",
        ),
        AlarmRule(
            "nodes-not-ready",
            "A running node of the cluster (Trainium or system) has reported NotReady for 5 minutes: the scheduler "
            "places nothing on it and its jobs are evicted. kubectl get nodes shows which.",
            CONTAINER_INSIGHTS,
            "node_status_condition_ready",
            cluster,
            "Minimum",
            "LessThanThreshold",
            1,
            60,
            5,
            # A node that stops reporting altogether is the nodes-failed alarm's case.
            "notBreaching",
        ),
        AlarmRule(
            "neuron-ecc-errors",
            "A Neuron device reported ECC memory errors in the last 5 minutes: a device that keeps reporting them "
            "is failing, and its node should be drained and replaced before it stops a run.",
            CONTAINER_INSIGHTS,
            "node_neurondevice_hw_ecc_events_total",
            cluster,
            "Sum",
            "GreaterThanOrEqualToThreshold",
            1,
            300,
            1,
            # No data: no Trainium node is reporting, which the node alarm covers (or none runs, e.g. at minSize 0).
            "notBreaching",
        ),
        AlarmRule(
            "fsx-free-capacity-low",
            f"The shared FSx file system has less than {FSX_FREE_FRACTION:.0%} of its "
            f"{args.fsx_capacity_gib} GiB free: checkpoint writes will soon fail. Delete old checkpoints or raise "
            "fsxStorageCapacityGiB.",
            FSX_NAMESPACE,
            "FreeDataStorageCapacity",
            {"FileSystemId": args.file_system_id},
            "Sum",
            "LessThanThreshold",
            args.fsx_capacity_gib * GIB * FSX_FREE_FRACTION,
            # FSx publishes each storage target's free bytes once a minute (FSx for Lustre User Guide, "Monitoring
            # with Amazon CloudWatch"), so only a 60-second Sum is the file system's free bytes: a 300-second Sum
            # adds five minutes up and would fire at a fifth of the threshold.
            FSX_METRIC_PERIOD_SECONDS,
            15,  # a quarter of an hour: one large checkpoint written and removed again is no trend
            "missing",  # neither full nor empty can be read from silence: keep the last state
        ),
        AlarmRule(
            "etcd-majority-lost",
            f"Fewer than {majority} of the {args.etcd_members} rendezvous etcd members have been ready for 2 minutes: "
            "running jobs lose their rendezvous and restart, and new jobs cannot start.",
            CONTAINER_INSIGHTS,
            "service_number_of_running_pods",
            {"Service": ETCD_NAME, "Namespace": args.job_namespace, "ClusterName": args.cluster.config_name},
            "Minimum",
            "LessThanThreshold",
            majority,
            60,
            2,
            # A Service without ready endpoints can drop out of the metric: silence is the outage itself.
            "breaching",
        ),
    )


class Alarms(pulumi.ComponentResource):
    """One CloudWatch alarm per rule, notifying the topic on alarm and on recovery."""

    alarm_names: list[pulumi.Output[str]]

    def __init__(self, name: str, args: AlarmsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:monitoring:Alarms", name, None, opts)
        self.alarm_names = [
            aws.cloudwatch.MetricAlarm(
                f"{name}-{rule.short}",
                name=f"{args.cluster.config_name}-{rule.short}",
                alarm_description=rule.description,
                namespace=rule.namespace,
                metric_name=rule.metric,
                dimensions=dict(rule.dimensions),
                statistic=rule.statistic,
                comparison_operator=rule.comparison,
                threshold=rule.threshold,
                period=rule.period_seconds,
                evaluation_periods=rule.evaluation_periods,
                treat_missing_data=rule.treat_missing_data,
                alarm_actions=[args.topic_arn],
                ok_actions=[args.topic_arn],
                tags=dict(args.cluster.tags),
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)),
            ).name
            for rule in alarm_rules(args)
        ]
        self.register_outputs({"alarmNames": self.alarm_names})
