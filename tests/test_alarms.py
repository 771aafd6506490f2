"""Alarms: staging and prod tell the stack's owner, through the configured SNS topic, when nodes fail, a Neuron device
reports memory errors, FSx nearly fills up or etcd loses its majority; thresholds follow the stack's own sizes."""

from __future__ import annotations

import functools

import pytest
from support import STACKS, evaluate, one, platform

from components import alarms
from preflight.stackfile import REPO_ROOT
from trainium_eks import versions

pytestmark = pytest.mark.stacks

ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
# What each alarm watches (README "Alarms"): failed nodes, a NotReady node, Neuron ECC events, FSx free space, etcd.
WATCHED = {
    "cluster_failed_node_count",
    "node_status_condition_ready",
    "node_neurondevice_hw_ecc_events_total",
    "FreeDataStorageCapacity",
    "service_number_of_running_pods",
}
# A stack made a fixture with alarms, whatever its shipped file says.
ALARMS_ON = {"alarmTopicArn": "arn:aws:sns:us-east-1:444455556666:fixture-alerts", "cloudWatchObservability": True}
# PutMetricAlarm's values for these fields (pulumi-aws cloudwatch.MetricAlarm; CloudWatch API Reference).
STATISTICS = {"SampleCount", "Average", "Sum", "Minimum", "Maximum"}
COMPARISONS = {"GreaterThanOrEqualToThreshold", "GreaterThanThreshold", "LessThanThreshold", "LessThanOrEqualToThreshold"}
MISSING_DATA = {"missing", "ignore", "breaching", "notBreaching"}


def alarms_by_metric(plan) -> dict[str, object]:
    found = plan.find(ALARM)
    by_metric = {a.inputs["metricName"]: a for a in found}
    assert len(by_metric) == len(found)
    return by_metric


@functools.cache
def monitored(stack: str):
    return evaluate(stack, **ALARMS_ON)


@pytest.mark.parametrize("stack", STACKS)
def test_every_alarm_notifies_the_stacks_topic_when_it_fires_and_when_it_clears(plans, stack):
    found = plans[stack].find(ALARM)
    monitoring = platform(stack).monitoring
    if not monitoring.alarms:
        assert found == []
        return
    topic = monitoring.alarm_topic_arn
    assert set(alarms_by_metric(plans[stack])) == WATCHED
    for alarm in found:
        assert alarm.inputs["alarmActions"] == [topic]
        assert alarm.inputs["okActions"] == [topic]
        assert alarm.inputs["statistic"] in STATISTICS
        assert alarm.inputs["comparisonOperator"] in COMPARISONS
        assert alarm.inputs["treatMissingData"] in MISSING_DATA
        assert alarm.inputs["name"].startswith(plans[stack].outputs["clusterName"] + "-")
    assert len({a.inputs["name"] for a in found}) == len(found)


@pytest.mark.parametrize("stack", STACKS)
def test_alarms_start_only_once_the_addon_publishes_their_metrics(stack):
    plan = monitored(stack)
    addon = one([a for a in plan.find("aws:eks/addon:Addon") if a.inputs["addonName"] == versions.CLOUDWATCH_OBSERVABILITY_ADDON])
    alarms = plan.find(ALARM)
    assert alarms
    for alarm in alarms:
        assert addon.urn in alarm.dependencies, alarm.name


def test_a_node_lost_or_failing_for_minutes_pages_and_silence_counts_as_failure():
    plan = monitored("staging")
    failed = alarms_by_metric(plan)["cluster_failed_node_count"]
    assert failed.inputs["namespace"] == "ContainerInsights"
    assert failed.inputs["dimensions"] == {"ClusterName": plan.outputs["clusterName"]}
    assert (failed.inputs["comparisonOperator"], failed.inputs["threshold"]) == ("GreaterThanOrEqualToThreshold", 1)
    # a joining or rebooting node is not paged: it must stay failed for several minutes
    assert failed.inputs["period"] * failed.inputs["evaluationPeriods"] >= 300
    assert failed.inputs["treatMissingData"] == "breaching"


def test_a_running_node_that_stays_not_ready_pages():
    plan = monitored("staging")
    ready = alarms_by_metric(plan)["node_status_condition_ready"]
    assert ready.inputs["dimensions"] == {"ClusterName": plan.outputs["clusterName"]}
    # the cluster-wide minimum of the per-node 1 (Ready) / 0 drops below 1 when any reporting node is not Ready
    assert (ready.inputs["statistic"], ready.inputs["comparisonOperator"], ready.inputs["threshold"]) == (
        "Minimum",
        "LessThanThreshold",
        1,
    )
    assert ready.inputs["period"] * ready.inputs["evaluationPeriods"] >= 300
    assert ready.inputs["treatMissingData"] == "notBreaching"  # a silent node is the failed-nodes alarm's case


def test_any_neuron_ecc_event_pages():
    plan = monitored("prod")
    ecc = alarms_by_metric(plan)["node_neurondevice_hw_ecc_events_total"]
    assert ecc.inputs["dimensions"] == {"ClusterName": plan.outputs["clusterName"]}
    assert (ecc.inputs["statistic"], ecc.inputs["comparisonOperator"], ecc.inputs["threshold"]) == (
        "Sum",
        "GreaterThanOrEqualToThreshold",
        1,
    )
    assert ecc.inputs["treatMissingData"] == "notBreaching"  # no Neuron node reporting is the node alarm's business


@pytest.mark.parametrize("capacity_gib", [1200, 2400, 4800])
def test_the_fsx_alarm_fires_below_a_tenth_of_the_stacks_own_capacity(capacity_gib):
    fixture = {"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 250, **ALARMS_ON}
    plan = evaluate("prod", fsxStorageCapacityGiB=capacity_gib, **fixture)
    fsx = alarms_by_metric(plan)["FreeDataStorageCapacity"]
    file_system = one(plan.find("aws:fsx/lustreFileSystem:LustreFileSystem"))
    assert fsx.inputs["namespace"] == "AWS/FSx"
    assert fsx.inputs["dimensions"] == {"FileSystemId": plan.outputs["fsxFileSystemId"]}
    assert fsx.inputs["statistic"] == "Sum"  # the bytes free in the whole file system...
    assert fsx.inputs["period"] == 60  # ...over FSx's one-minute publishing interval, or Sum counts minutes
    assert fsx.inputs["period"] * fsx.inputs["evaluationPeriods"] >= 15 * 60  # no alarm on one checkpoint's churn
    assert fsx.inputs["comparisonOperator"] == "LessThanThreshold"
    assert fsx.inputs["threshold"] == pytest.approx(file_system.inputs["storageCapacity"] * 2**30 * alarms.FSX_FREE_FRACTION)


@pytest.mark.parametrize(("members", "majority"), [(3, 2), (5, 3)])
def test_the_etcd_alarm_fires_when_ready_members_drop_below_a_majority(members, majority):
    nodes = {"systemNodeMinSize": members, "systemNodeDesiredSize": members, "systemNodeMaxSize": members}
    plan = evaluate("staging", etcdMembers=members, **nodes, **ALARMS_ON)
    etcd = alarms_by_metric(plan)["service_number_of_running_pods"]
    statefulset = one(plan.find("kubernetes:apps/v1:StatefulSet"))
    assert statefulset.inputs["spec"]["replicas"] == members
    client_service = one(
        [
            s
            for s in plan.find("kubernetes:core/v1:Service")
            if plan.outputs["etcdEndpoint"].startswith(s.inputs["metadata"]["name"] + ".")
        ]
    )
    assert etcd.inputs["dimensions"] == {
        "Service": client_service.inputs["metadata"]["name"],
        "Namespace": plan.outputs["jobNamespace"],
        "ClusterName": plan.outputs["clusterName"],
    }
    assert "publishNotReadyAddresses" not in client_service.inputs["spec"]  # the count is of ready members only
    assert (etcd.inputs["statistic"], etcd.inputs["comparisonOperator"], etcd.inputs["threshold"]) == (
        "Minimum",
        "LessThanThreshold",
        majority,
    )
    assert etcd.inputs["treatMissingData"] == "breaching"


def test_without_a_topic_there_are_no_alarms_but_metrics_still_flow():
    plan = evaluate("staging", alarmTopicArn="")
    assert not plan.find(ALARM)
    assert [a for a in plan.find("aws:eks/addon:Addon") if a.inputs["addonName"] == versions.CLOUDWATCH_OBSERVABILITY_ADDON]


def test_the_readme_lists_every_alarm_with_what_to_do():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("**Alarms**") : readme.index("**6. Scale**")]
    plan = monitored("staging")
    cluster = plan.outputs["clusterName"]
    assert plan.find(ALARM)
    for alarm in plan.find(ALARM):
        assert f"`{alarm.inputs['name'].removeprefix(cluster + '-')}`" in section
