"""Monitoring: Container Insights through the Amazon CloudWatch Observability EKS add-on, and the stack's dashboard.

The add-on is AWS's managed install of the CloudWatch agent and Fluent Bit; on Trainium and Inferentia nodes it
also runs neuron-monitor, which the agent reads for Neuron metrics, and the agent reads the EFA devices'
counters. Everything lands in the ``ContainerInsights`` metric namespace with ``ClusterName`` (and per-node,
per-pod, per-device) dimensions (CloudWatch User Guide, "Amazon EKS and Kubernetes Container Insights with
enhanced observability metrics"; aws/amazon-cloudwatch-agent translator/translate/otel/exporter/awsemf/
kubernetes.go). Its tolerations default to every taint, so the agent and neuron-monitor run on the tainted
Trainium nodes too (User Guide, "Install the CloudWatch agent with the Amazon CloudWatch Observability EKS add-on",
"Manage Kubernetes tolerations"; aws-observability/helm-charts amazon-cloudwatch-observability values.yaml:
``neuronMonitor`` selects trn1.2xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge among others).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.addons import service_account_addon
from components.cluster import ClusterHandle
from components.rendezvous import ETCD_NAME
from trainium_eks import versions
from trainium_eks.config import MonitoringConfig

CONTAINER_INSIGHTS = "ContainerInsights"
FSX_NAMESPACE = "AWS/FSx"
# The agent's namespace and service account, and the managed policy the add-on's IRSA install attaches to it
# (User Guide, add-on install "Option 3: Install using IAM service account role").
ADDON_NAMESPACE = "amazon-cloudwatch"
AGENT_SERVICE_ACCOUNT = "cloudwatch-agent"
AGENT_POLICY = "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy"
# Fluent Bit writes container, data-plane and host logs to /aws/containerinsights/<cluster>/{application,
# dataplane,host} and creates the groups if they are missing, with no retention (helm-charts values.yaml:
# auto_create_group true); the agent writes its performance log events to .../performance (User Guide, "Set up
# the CloudWatch agent to collect cluster metrics"). Creating them first gives every one the stack's retention.
LOG_GROUPS = ("application", "dataplane", "host", "performance")
# Only Container Insights with enhanced observability, with the accelerated compute metrics (NVIDIA, Neuron, EFA)
# it collects by default spelled out, because the alarms and the dashboard read them. A custom agent
# configuration replaces the default one, so Application Signals, which instruments nothing here, is left out;
# and its auto-monitor, which would inject instrumentation into every workload behind a Service (etcd,
# TensorBoard), is off (User Guide, add-on install, "Use a custom CloudWatch agent configuration", "Opt out of
# accelerated compute metrics collection", "Application Signals Auto monitor").
CONTAINER_INSIGHTS_COLLECTION = {"enhanced_container_insights": True, "accelerated_compute_metrics": True}
ADDON_CONFIGURATION = {
    "agent": {"config": {"logs": {"metrics_collected": {"kubernetes": CONTAINER_INSIGHTS_COLLECTION}}}},
    "manager": {"applicationSignals": {"autoMonitor": {"monitorAllServices": False}}},
}
# One point a minute: the agent's default collection and ingestion interval (the User Guide gives it for the
# accelerated compute metrics); shorter periods would only show gaps.
PERIOD_SECONDS = 60


@dataclass(frozen=True)
class Series:
    metric: str
    stat: str
    label: str
    namespace: str = CONTAINER_INSIGHTS
    dimensions: tuple[tuple[str, str], ...] = ()  # empty: the cluster-wide ClusterName series


@dataclass(frozen=True)
class Chart:
    title: str
    series: tuple[Series, ...]


def dashboard_charts(cluster_name: str, job_namespace: str, file_system_id: str) -> tuple[Chart, ...]:
    """What a training run is watched by: Neuron compute and memory, EFA traffic and errors, nodes, storage, etcd."""
    fsx = (("FileSystemId", file_system_id),)
    etcd = (("Service", ETCD_NAME), ("Namespace", job_namespace), ("ClusterName", cluster_name))
    return (
        Chart(
            "NeuronCore utilisation (%)",
            (
                Series("node_neuroncore_utilization", "Average", "mean over NeuronCores"),
                Series("node_neuroncore_utilization", "Minimum", "least busy NeuronCore"),
            ),
        ),
        Chart(
            "Neuron device memory (bytes)",
            (
                Series("node_neurondevice_runtime_memory_used_bytes", "Maximum", "fullest node"),
                Series("node_neuroncore_memory_usage_tensors", "Maximum", "tensors, fullest NeuronCore"),
            ),
        ),
        Chart(
            "EFA traffic (bytes/s, all nodes)",
            (
                Series("node_efa_rx_bytes", "Sum", "received"),
                Series("node_efa_tx_bytes", "Sum", "sent"),
                Series("node_efa_rdma_read_bytes", "Sum", "RDMA read"),
                Series("node_efa_rdma_write_bytes", "Sum", "RDMA write"),
            ),
        ),
        Chart("EFA receive drops (packets/s, all nodes)", (Series("node_efa_rx_dropped", "Sum", "dropped"),)),
        Chart(
            "Neuron errors (per minute)",
            (
                Series("node_neuron_execution_errors_total", "Sum", "execution errors"),
                Series("node_neurondevice_hw_ecc_events_total", "Sum", "ECC events"),
            ),
        ),
        Chart(
            "Nodes",
            (
                Series("cluster_node_count", "Maximum", "nodes"),
                Series("cluster_failed_node_count", "Maximum", "failed (a node condition)"),
            ),
        ),
        Chart(
            "FSx free capacity (bytes)",
            (Series("FreeDataStorageCapacity", "Sum", "free", namespace=FSX_NAMESPACE, dimensions=fsx),),
        ),
        Chart(
            "etcd members ready",
            (Series("service_number_of_running_pods", "Minimum", "ready members", dimensions=etcd),),
        ),
    )


def dashboard_body(charts: Sequence[Chart], *, cluster_name: str, region: str) -> str:
    """The DashboardBody JSON: two charts per row of the 24-column grid (CloudWatch API Reference, "Dashboard Body
    Structure and Syntax")."""
    width, height = 12, 6
    widgets = []
    for index, chart in enumerate(charts):
        metrics = [
            [s.namespace, s.metric, *[part for pair in (s.dimensions or (("ClusterName", cluster_name),)) for part in pair]]
            + [{"stat": s.stat, "label": s.label}]
            for s in chart.series
        ]
        widgets.append(
            {
                "type": "metric",
                "x": (index % 2) * width,
                "y": (index // 2) * height,
                "width": width,
                "height": height,
                "properties": {
                    "title": chart.title,
                    "metrics": metrics,
                    "view": "timeSeries",
                    "region": region,
                    "period": PERIOD_SECONDS,
                },
            }
        )
    return json.dumps({"widgets": widgets}, sort_keys=True)


@dataclass(frozen=True)
class MonitoringArgs:
    config: MonitoringConfig
    # Its configured name, known before the cluster exists, names the log groups and metric dimensions; the add-on
    # turns ACTIVE once its operator runs on the system nodes (and so after the cluster).
    cluster: ClusterHandle
    job_namespace: str
    file_system_id: pulumi.Input[str]


class Monitoring(pulumi.ComponentResource):
    """The CloudWatch Observability add-on on its own role, its log groups, and the stack's dashboard."""

    addon: aws.eks.Addon
    dashboard_name: pulumi.Output[str]

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:monitoring:Monitoring", name, None, opts)
        cluster = args.cluster.config_name
        log_groups = [
            aws.cloudwatch.LogGroup(
                f"{name}-{kind}",
                name=f"/aws/containerinsights/{cluster}/{kind}",
                retention_in_days=args.config.log_retention_days,
                tags=dict(args.cluster.tags),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for kind in LOG_GROUPS
        ]
        self.addon = service_account_addon(
            f"{name}-cloudwatch",
            addon_name=versions.CLOUDWATCH_OBSERVABILITY_ADDON,
            cluster_name=cluster,
            kubernetes_version=args.cluster.kubernetes_version,
            oidc_provider_arn=args.cluster.oidc_provider_arn,
            oidc_issuer=args.cluster.oidc_issuer,
            namespace=ADDON_NAMESPACE,
            service_account=AGENT_SERVICE_ACCOUNT,
            policy_arn=AGENT_POLICY,
            tags=args.cluster.tags,
            parent=self,
            configuration=ADDON_CONFIGURATION,
            depends_on=[args.cluster.system_nodes, *log_groups],
        )
        dashboard = aws.cloudwatch.Dashboard(
            f"{name}-dashboard",
            dashboard_name=f"{cluster}-training",
            dashboard_body=pulumi.Output.from_input(args.file_system_id).apply(
                lambda fs: dashboard_body(
                    dashboard_charts(cluster, args.job_namespace, fs), cluster_name=cluster, region=args.cluster.region
                )
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.dashboard_name = dashboard.dashboard_name
        self.register_outputs({"addon": self.addon.addon_name, "dashboardName": self.dashboard_name})
