"""Change impact: which resources an edit adds, removes, changes in place or replaces."""

from __future__ import annotations

import json

import pytest
import yaml
from support import evaluate, node_group_config, run_preflight

from preflight import diff
from preflight.stackfile import REPO_ROOT


def staging_copy(tmp_path, edit) -> str:
    document = yaml.safe_load((REPO_ROOT / "stacks" / "Pulumi.staging.yaml").read_text())
    edit(document["config"])
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def test_scaling_a_node_group_is_one_in_place_change(tmp_path):
    def scale(config):
        (group,) = config["trainium-eks:trainiumNodeGroups"]
        group.update(minSize=1, desiredSize=1)

    result = run_preflight("diff", "staging", "--against", staging_copy(tmp_path, scale), "--json")
    assert result.returncode == 0, result.stderr
    impact = json.loads(result.stdout)
    assert impact["added"] == [] and impact["removed"] == []
    (change,) = impact["changed"]
    assert change["urn"].endswith("aws:eks/nodeGroup:NodeGroup::trainium-trn1-32xl-ng")
    assert change["replace"] is False
    assert set(change["paths"]) == {"scalingConfig.desiredSize", "scalingConfig.minSize"}


def test_changing_the_instance_type_replaces_the_node_group_and_versions_the_launch_template():
    before = evaluate("staging").to_json()
    after = evaluate("staging", trainiumNodeGroups=[node_group_config("trn1-32xl", "trn1n.32xlarge")]).to_json()
    changes = {c.urn.rsplit("::", 1)[1]: c for c in diff.compare(before, after).changed}
    assert changes["trainium-trn1-32xl-ng"].replace
    assert "instanceTypes[0]" in changes["trainium-trn1-32xl-ng"].paths
    assert not changes["trainium-trn1-32xl-lt"].replace  # a new launch template version
    assert "networkInterfaces" in changes["trainium-trn1-32xl-lt"].paths  # 8 -> 16 EFA interfaces


def test_adding_a_node_group_adds_its_resources_only():
    before = evaluate("staging").to_json()
    groups = [node_group_config("trn1-32xl", "trn1.32xlarge"), node_group_config("spare", "trn1.32xlarge", size=1)]
    impact = diff.compare(
        before,
        evaluate(
            "staging", trainiumNodeGroups=groups, volcanoQueues=[{"name": "trainium", "weight": 1, "neuronShare": 1.0}]
        ).to_json(),
    )
    assert impact.removed == []
    assert {urn.rsplit("::", 1)[1] for urn in impact.added} == {
        "trainium-spare",
        "trainium-spare-cluster",
        "trainium-spare-efa",
        "trainium-spare-lt",
        "trainium-spare-ng",
    }
    assert [c.urn.rsplit("::", 1)[1] for c in impact.changed] == ["trainium-scheduling-queue-trainium"]


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
