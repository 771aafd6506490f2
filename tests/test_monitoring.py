"""Monitoring: staging and prod run Container Insights through the CloudWatch Observability add-on on a role only its
agent can assume, keep its logs for a bounded time, and chart a training run; dev leaves all of it out."""

from __future__ import annotations

import functools
import json

import pytest
from support import STACKS, evaluate, one, platform, settings

from components import monitoring
from preflight.stackfile import REPO_ROOT
from trainium_eks import catalog, versions

pytestmark = pytest.mark.stacks

ADDON = "aws:eks/addon:Addon"
ROLE = "aws:iam/role:Role"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
DASHBOARD = "aws:cloudwatch/dashboard:Dashboard"
# The stacks with the CloudWatch Observability add-on, and those without it.
MONITORED = [stack for stack in STACKS if platform(stack).monitoring.cloudwatch_observability]
UNMONITORED = [stack for stack in STACKS if stack not in MONITORED]
AGENT_ROLE_DESCRIPTION = f"{versions.CLOUDWATCH_OBSERVABILITY_ADDON} add-on"
# The Trainium types the add-on runs neuron-monitor on: the node affinity of neuronMonitor in the
# amazon-cloudwatch-observability chart's values.yaml (aws-observability/helm-charts, chart 6.4.0).
ADDON_NEURON_MONITOR_TRAINIUM_TYPES = {
    "trn1.2xlarge",
    "trn1.32xlarge",
    "trn1n.32xlarge",
    "trn2.3xlarge",
    "trn2.48xlarge",
    "trn2a.48xlarge",
    "trn2n.48xlarge",
    "trn2u.48xlarge",
}


def container_insights_log_groups(plan) -> list:
    """The log groups the add-on writes (the deploy runner keeps a log group of its own)."""
    return [g for g in plan.find(LOG_GROUP) if g.inputs["name"].startswith("/aws/containerinsights/")]


@functools.cache
def with_addon(stack: str):
    """``stack`` as a fixture with the CloudWatch Observability add-on, whatever its shipped file says."""
    return evaluate(stack, cloudWatchObservability=True)


def cloudwatch_addon(plan):
    return one([a for a in plan.find(ADDON) if a.inputs["addonName"] == versions.CLOUDWATCH_OBSERVABILITY_ADDON])


def role_of(plan, addon):
    """The IAM role the add-on's service account runs as (the mock names a role's ARN after its physical name)."""
    role_name = addon.inputs["serviceAccountRoleArn"].rsplit("/", 1)[1]
    return one([r for r in plan.find(ROLE) if role_name.startswith(r.name)]), role_name


def dashboard(plan) -> dict:
    return json.loads(one(plan.find(DASHBOARD)).inputs["dashboardBody"])


def series(widget) -> list[tuple[str, str, dict, str]]:
    """(namespace, metric, dimensions, stat) of each line of a metric widget."""
    lines = []
    for line in widget["properties"]["metrics"]:
        *names, options = line
        namespace, metric, *pairs = names
        lines.append((namespace, metric, dict(zip(pairs[::2], pairs[1::2], strict=True)), options["stat"]))
    return lines


@pytest.mark.parametrize("stack", MONITORED)
def test_the_addon_runs_on_a_role_that_only_its_agent_can_assume(plans, stack):
    plan = plans[stack]
    addon = cloudwatch_addon(plan)
    assert addon.inputs["clusterName"] == plan.outputs["clusterName"]
    role, role_name = role_of(plan, addon)
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Action"] == ["sts:AssumeRoleWithWebIdentity"]
    assert statement["Principal"]["Federated"] == [plan.outputs["oidcProviderArn"]]
    conditions = statement["Condition"]["StringEquals"]
    assert [v for k, v in conditions.items() if k.endswith(":sub")] == [
        [f"system:serviceaccount:{monitoring.ADDON_NAMESPACE}:{monitoring.AGENT_SERVICE_ACCOUNT}"]
    ]
    assert [v for k, v in conditions.items() if k.endswith(":aud")] == [["sts.amazonaws.com"]]
    attached = {a.inputs["policyArn"] for a in plan.find(ATTACHMENT) if a.inputs["role"] == role_name}
    assert attached == {"arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy"}


def test_the_addon_collects_neuron_and_efa_metrics_and_instruments_no_workload():
    configuration = json.loads(cloudwatch_addon(with_addon("staging")).inputs["configurationValues"])
    collected = configuration["agent"]["config"]["logs"]["metrics_collected"]
    # Container Insights with enhanced observability, with the Neuron and EFA metrics the dashboard and alarms read
    assert collected == {"kubernetes": {"enhanced_container_insights": True, "accelerated_compute_metrics": True}}
    assert "traces" not in configuration["agent"]["config"]  # no Application Signals
    assert configuration["manager"]["applicationSignals"]["autoMonitor"]["monitorAllServices"] is False


def test_the_addon_waits_for_the_system_nodes_and_for_its_log_groups():
    plan = with_addon("staging")
    addon = cloudwatch_addon(plan)
    system = one([n for n in plan.find("aws:eks/nodeGroup:NodeGroup") if n.inputs["nodeGroupName"].endswith("-system")])
    assert system.urn in addon.dependencies
    assert {g.urn for g in container_insights_log_groups(plan)} <= set(addon.dependencies)


@pytest.mark.parametrize("stack", MONITORED)
def test_every_log_group_the_addon_writes_exists_first_and_expires(plans, stack):
    plan = plans[stack]
    groups = {g.inputs["name"]: g.inputs["retentionInDays"] for g in container_insights_log_groups(plan)}
    cluster = plan.outputs["clusterName"]
    assert set(groups) == {f"/aws/containerinsights/{cluster}/{kind}" for kind in monitoring.LOG_GROUPS}
    retention = int(settings(stack).config["trainium-eks:cloudWatchLogRetentionDays"])  # the stack's, or the default
    assert set(groups.values()) == {retention}


def test_log_retention_follows_the_config():
    plan = evaluate("staging", cloudWatchLogRetentionDays=7)
    assert {g.inputs["retentionInDays"] for g in container_insights_log_groups(plan)} == {7}


@pytest.mark.parametrize("stack", UNMONITORED)
def test_a_stack_without_the_addon_leaves_container_insights_out(plans, stack):
    plan = plans[stack]
    assert not [a for a in plan.find(ADDON) if a.inputs["addonName"] == versions.CLOUDWATCH_OBSERVABILITY_ADDON]
    assert not container_insights_log_groups(plan)
    for kind in (DASHBOARD, "aws:cloudwatch/metricAlarm:MetricAlarm"):
        assert not plan.find(kind), kind
    assert not [r for r in plan.find(ROLE) if r.inputs.get("description") == AGENT_ROLE_DESCRIPTION]


def test_the_dashboard_charts_what_a_training_run_is_watched_by():
    plan = with_addon("staging")
    widgets = dashboard(plan)["widgets"]
    charted = {metric for w in widgets for _, metric, _, _ in series(w)}
    for metric in (
        "node_neuroncore_utilization",  # NeuronCore utilisation
        "node_neurondevice_runtime_memory_used_bytes",  # device memory
        "node_efa_rx_bytes",  # EFA traffic
        "node_efa_tx_bytes",
        "node_efa_rx_dropped",  # EFA errors
        "node_neurondevice_hw_ecc_events_total",  # device errors
        "FreeDataStorageCapacity",
        "service_number_of_running_pods",
    ):
        assert metric in charted


def test_the_dashboard_reads_this_stacks_cluster_file_system_and_etcd():
    plan = with_addon("staging")
    outputs = plan.outputs
    read = set()
    for widget in dashboard(plan)["widgets"]:
        assert widget["properties"]["region"] == outputs["region"]
        for namespace, metric, dimensions, stat in series(widget):
            read |= {namespace, metric}
            assert stat in {"Average", "Minimum", "Maximum", "Sum"}
            if namespace == "AWS/FSx":
                assert dimensions == {"FileSystemId": outputs["fsxFileSystemId"]}
            else:
                assert namespace == "ContainerInsights"
                assert dimensions["ClusterName"] == outputs["clusterName"]
            if metric == "service_number_of_running_pods":
                assert dimensions["Namespace"] == outputs["jobNamespace"]
                assert outputs["etcdEndpoint"].startswith(dimensions["Service"] + ".")
    assert {"ContainerInsights", "AWS/FSx", "service_number_of_running_pods"} <= read  # the cluster, file system and etcd


def test_the_dashboard_widgets_fit_the_grid_without_overlapping():
    cells = set()
    for widget in dashboard(with_addon("prod"))["widgets"]:
        assert widget["x"] >= 0 and widget["x"] + widget["width"] <= 24  # CloudWatch dashboards are 24 columns wide
        cells_of = {
            (x, y)
            for x in range(widget["x"], widget["x"] + widget["width"])
            for y in range(widget["y"], widget["y"] + widget["height"])
        }
        assert not cells & cells_of
        cells |= cells_of


def test_turning_the_addon_off_removes_it_with_its_role_and_dashboard():
    plan = evaluate("staging", cloudWatchObservability=False, alarmTopicArn="")
    assert not [a for a in plan.find(ADDON) if a.inputs["addonName"] == versions.CLOUDWATCH_OBSERVABILITY_ADDON]
    assert not plan.find(DASHBOARD)
    assert not [r for r in plan.find(ROLE) if r.inputs.get("description") == AGENT_ROLE_DESCRIPTION]


def test_the_readme_says_where_each_charted_metric_is_watched():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("**5. Monitor.**") : readme.index("**6. Scale**")]
    for widget in dashboard(with_addon("staging"))["widgets"]:
        assert widget["properties"]["title"].split(" (")[0] in section, widget["properties"]["title"]
        for _, metric, _, _ in series(widget):
            assert f"`{metric}`" in section, metric


def test_the_addon_runs_neuron_monitor_on_every_trainium_type_the_platform_offers():
    # a type outside the add-on's list would get no Neuron metrics: it would need a neuron-monitor of our own
    assert set(catalog.TRAINIUM_TYPES) <= ADDON_NEURON_MONITOR_TRAINIUM_TYPES
