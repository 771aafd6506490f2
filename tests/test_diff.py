"""Change impact: which resources an edit adds, removes, changes in place or replaces."""

from __future__ import annotations

import json

import pytest
import yaml
from support import evaluate, node_group_config, run_preflight, stack_copy

from preflight import diff
from preflight.stackfile import REPO_ROOT
from trainium_eks import catalog
from trainium_eks.config.stack import DEFAULT_ROOT_VOLUME_GIB


def stack_groups(stack: str) -> list[dict]:
    return yaml.safe_load((REPO_ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"][
        "trainium-eks:trainiumNodeGroups"
    ]


def diff_json(tmp_path, stack: str, edit) -> dict:
    result = run_preflight("diff", stack, "--against", stack_copy(tmp_path, stack, edit), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_scaling_a_node_group_is_one_in_place_change(tmp_path):
    def scale(config):
        (group,) = config["trainium-eks:trainiumNodeGroups"]
        group.update(minSize=1, desiredSize=1)

    impact = diff_json(tmp_path, "prod", scale)
    assert impact["added"] == [] and impact["removed"] == []
    (change,) = impact["changed"]
    assert change["urn"].endswith("aws:eks/nodeGroup:NodeGroup::trainium-trn1n-32xl-ng")
    assert change["replace"] is False and change["nodes"] is None
    assert set(change["paths"]) == {"scalingConfig.desiredSize", "scalingConfig.minSize"}


def test_resizing_an_elastic_pool_changes_its_limit_the_queues_and_the_team_quotas_in_place_and_keeps_its_nodes(tmp_path):
    # From maxSize 4 (the baseline) to staging's 2: the pool's limit, the platform's queue and each team's queue and
    # quota follow the capacity, all in place.
    impact = diff_json(tmp_path, "staging", lambda config: config["trainium-eks:trainiumNodeGroups"][0].update(maxSize=4))
    changes = {c["urn"].rsplit("::", 1)[1]: c for c in impact["changed"]}
    teams = {f"trainium-teams-{team}-{part}" for team in ("nlp", "vision") for part in ("queue", "quota")}
    assert set(changes) == {"trainium-trn1-32xl-nodepool", "trainium-scheduling-queue-trainium", *teams}
    assert impact["added"] == [] and impact["removed"] == [] and not any(c["replace"] for c in changes.values())
    pool = changes["trainium-trn1-32xl-nodepool"]
    assert pool["paths"] == ["spec.limits.cpu"] and pool["nodes"] is None  # limits do not drift


def test_changing_an_elastic_pools_node_template_drifts_its_nodes(tmp_path):
    impact = diff_json(tmp_path, "staging", lambda config: config["trainium-eks:trainiumNodeGroups"][0].update(rootVolumeGiB=400))
    (change,) = impact["changed"]
    assert change["urn"].endswith("EC2NodeClass::trainium-trn1-32xl-nodeclass")
    assert change["paths"] == ["spec.blockDeviceMappings[0].ebs.volumeSize"]
    assert not change["replace"] and change["nodes"] == diff.DRIFT


def test_changing_the_instance_type_replaces_the_node_group_and_versions_the_launch_template():
    before = evaluate("prod").to_json()
    after = evaluate("prod", trainiumNodeGroups=[{**stack_groups("prod")[0], "instanceType": "trn1.32xlarge"}]).to_json()
    changes = {c.urn.rsplit("::", 1)[1]: c for c in diff.compare(before, after).changed}
    assert changes["trainium-trn1n-32xl-ng"].replace
    assert "instanceTypes[0]" in changes["trainium-trn1n-32xl-ng"].paths
    assert not changes["trainium-trn1n-32xl-lt"].replace  # a new launch template version
    assert changes["trainium-trn1n-32xl-lt"].nodes == diff.ROLLING
    assert "networkInterfaces" in changes["trainium-trn1n-32xl-lt"].paths  # 16 -> 8 EFA interfaces


def test_adding_a_node_group_adds_its_resources_only():
    before = evaluate("prod").to_json()
    groups = [*stack_groups("prod"), node_group_config("spare", "trn1n.32xlarge", size=1)]
    impact = diff.compare(before, evaluate("prod", trainiumNodeGroups=groups).to_json())
    assert impact.removed == []
    assert {urn.rsplit("::", 1)[1] for urn in impact.added} == {
        "trainium-spare",
        "trainium-spare-cluster",
        "trainium-spare-efa",
        "trainium-spare-lt",
        "trainium-spare-ng",
    }
    assert {c.urn.rsplit("::", 1)[1] for c in impact.changed} == {
        "trainium-scheduling-queue-training",
        "trainium-scheduling-queue-experiments",
    }


@pytest.mark.parametrize(
    ("type_", "path", "replace"),
    [
        ("aws:eks/nodeGroup:NodeGroup", "scalingConfig.desiredSize", False),
        ("aws:eks/nodeGroup:NodeGroup", "subnetIds[0]", True),
        ("aws:eks/nodeGroup:NodeGroup", "launchTemplate.version", False),
        ("aws:ec2/launchTemplate:LaunchTemplate", "networkInterfaces", False),
        ("aws:fsx/lustreFileSystem:LustreFileSystem", "storageCapacity", False),
        ("aws:fsx/lustreFileSystem:LustreFileSystem", "deploymentType", True),
        ("kubernetes:core/v1:Service", "metadata.name", True),
        ("kubernetes:apps/v1:StatefulSet", "spec.volumeClaimTemplates[0].spec.resources.requests.storage", True),
        ("kubernetes:apps/v1:StatefulSet", "spec.template.spec.containers[0].image", False),
    ],
)
def test_replacement_rules(type_, path, replace):
    assert diff.replaces(type_, path) is replace


def test_changed_paths_descend_into_lists_of_equal_length():
    old = {"a": [{"b": 1}, {"b": 2}], "c": {"d": "x"}, "e": [1]}
    new = {"a": [{"b": 1}, {"b": 3}], "c": {"d": "x"}, "e": [1, 2]}
    assert list(diff.changed_paths(old, new)) == ["a[1].b", "e"]


def test_against_a_git_ref_evaluates_the_committed_version():
    plan = diff.plan_at_ref(REPO_ROOT, "HEAD", "dev")
    assert plan["stack"] == "dev" and plan["resources"]
    with pytest.raises(diff.RefError, match="not a stack file, nor a git ref"):
        diff.plan_at_ref(REPO_ROOT, "no-such-ref-anywhere", "dev")


@pytest.mark.parametrize("ref", ["HEAD", "HEAD~1", "main^2", "HEAD@{1}", "v1.0", "feature/x"])
def test_revisions_are_accepted_as_refs(ref):
    assert diff.check_ref(ref) == ref


def test_a_ref_that_reads_as_an_option_never_reaches_git(monkeypatch):
    def run(*args, **kwargs):
        raise AssertionError(f"git ran: {args}")

    monkeypatch.setattr(diff.subprocess, "run", run)
    for ref in ("--output=/tmp/x", "-p", "HEAD --help", "HEAD:stacks"):
        with pytest.raises(diff.RefError, match="not a stack file, nor a git ref"):
            diff.plan_at_ref(REPO_ROOT, ref, "dev")


# ---- what a change report owes its reader: data it loses, what depends on a replacement, values, cost ------------


def test_switching_the_file_system_type_warns_of_data_loss_and_names_what_depends_on_it(tmp_path):
    def persistent(config):
        config["trainium-eks:fsxDeploymentType"] = "PERSISTENT_2"
        config["trainium-eks:fsxThroughputPerTiB"] = 125

    baseline = stack_copy(tmp_path, "dev", persistent)
    impact = json.loads(run_preflight("diff", "dev", "--against", baseline, "--json").stdout)
    by_name = {c["urn"].rsplit("::", 1)[1]: c for c in impact["changed"]}
    file_system = by_name["trainium-storage-lustre"]
    assert file_system["replace"]
    assert {"path": "deploymentType", "old": "PERSISTENT_2", "new": "SCRATCH_2"} in file_system["values"]
    assert any(urn.endswith("PersistentVolume::trainium-storage-fsx") for urn in file_system["dependents"])
    (loss,) = [loss for loss in impact["losses"] if loss["urn"] == file_system["urn"]]
    assert loss["how"] == "replaced" and "checkpoints" in loss["lost"]
    text = run_preflight("diff", "dev", "--against", baseline).stdout
    assert "DATA LOSS: aws:fsx/lustreFileSystem:LustreFileSystem trainium-storage-lustre is replaced" in text
    assert "changes or breaks with it: kubernetes:core/v1:PersistentVolume trainium-storage-fsx" in text


def test_scaling_shows_old_and_new_sizes_and_what_the_month_costs_more(tmp_path):
    def fewer(config):
        (group,) = config["trainium-eks:trainiumNodeGroups"]
        group.update(minSize=2, desiredSize=2)

    impact = diff_json(tmp_path, "prod", fewer)
    (change,) = impact["changed"]
    assert change["values"] == [{"path": "scalingConfig.desiredSize", "old": 2, "new": stack_groups("prod")[0]["desiredSize"]}]
    added_nodes = stack_groups("prod")[0]["desiredSize"] - 2
    instance = catalog.INSTANCE_TYPES["trn1n.32xlarge"].on_demand_usd_per_hour["us-west-2"] * catalog.HOURS_PER_MONTH
    root_volume = DEFAULT_ROOT_VOLUME_GIB * catalog.EBS_GP3_USD_PER_GB_MONTH  # prod's nodes keep the default size
    before, after = impact["cost"]["before"]["busyUsd"], impact["cost"]["after"]["busyUsd"]
    assert after - before == pytest.approx(added_nodes * (instance + root_volume), abs=1)
    text = run_preflight("diff", "prod", "--against", stack_copy(tmp_path, "prod", fewer)).stdout
    assert "scalingConfig.desiredSize: 2 -> 4" in text and "Monthly cost: busy" in text and "(+" in text
