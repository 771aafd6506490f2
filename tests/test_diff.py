"""Change impact: which resources an edit adds, removes, changes in place or replaces, in which order, what EKS
refuses, and what the report and its exit status tell a reviewer.

Each test builds the two versions it compares from a fixture (one Trainium group of a catalog type where the catalog
offers it, teams of the test's own, sizes given), so that no shipped stack's values are assumed."""

from __future__ import annotations

import json

import pytest
from support import PROJECT, evaluate, one_group, run_preflight, stack_copy

from preflight import analysis, baseline, cli, diff, impact_report, input_paths, stackfile
from trainium_eks import catalog, service_prices, tokens, versions

BASE = "dev"  # any fixture stack (tests/fixture_stacks): the overrides set what these tests depend on
TEAMS = [
    {"name": name, "neuronShare": 0.5, "principalArns": [f"arn:aws:iam::111122223333:role/{name}-researchers"]}
    for name in ("alpha", "beta")
]
CLAIM_REQUEST = "spec.resources.requests.storage"


def managed(instance_type: str = "trn1.32xlarge", **group) -> dict:
    sizes = {"provisioning": "managed", "minSize": 1, "desiredSize": 1, "maxSize": 2, "rootVolumeGiB": 300}
    return one_group(instance_type, **{**sizes, **group})


def with_group(fixture: dict, **group) -> dict:
    (nodes,) = fixture["trainiumNodeGroups"]
    return {**fixture, "trainiumNodeGroups": [{**nodes, **group}]}


def plan(**overrides) -> dict:
    """The fixture's plan as `plan --json` prints it (with the cost estimate)."""
    return analysis.annotate(evaluate(BASE, fixture=True, **overrides).to_json())


def by_name(impact: diff.Impact) -> dict[str, diff.Change]:
    return {c.urn.rsplit("::", 1)[1]: c for c in impact.changed}


def fixture_file(directory, overrides: dict) -> str:
    """BASE's fixture stack file with ``overrides`` (as ``support.settings`` takes them) applied, for the CLI."""

    def edit(config: dict) -> None:
        for key, value in overrides.items():
            full_key = key if ":" in key else f"{PROJECT}:{key}"
            if value is None:
                config.pop(full_key, None)
            else:
                config[full_key] = value

    directory.mkdir(parents=True)
    return stack_copy(directory, BASE, edit, fixture=True)


def run_diff(tmp_path, before: dict, after: dict, *options: str):
    """`preflight diff BASE --against <before> --stack-file <after>`."""
    against, proposed = fixture_file(tmp_path / "before", before), fixture_file(tmp_path / "after", after)
    return run_preflight("diff", BASE, "--against", against, "--stack-file", proposed, *options)


# ---- what changes, and how ---------------------------------------------------------------------------------------


def test_scaling_a_managed_group_is_one_in_place_change_and_the_month_costs_one_node_more(tmp_path):
    before = managed()
    after = with_group(before, minSize=2, desiredSize=2)
    result = run_diff(tmp_path, before, after, "--json")
    assert result.returncode == 0, result.stderr
    impact = json.loads(result.stdout)
    assert impact["added"] == [] and impact["removed"] == []
    (change,) = impact["changed"]
    assert change["urn"].endswith(f"{tokens.EKS_NODE_GROUP}::trainium-trn1-32xl-ng")
    assert change["replace"] is False and change["nodes"] is None
    assert change["values"] == [
        {"path": "scalingConfig.desiredSize", "old": 1, "new": 2},
        {"path": "scalingConfig.minSize", "old": 1, "new": 2},
    ]
    node = catalog.INSTANCE_TYPES["trn1.32xlarge"].price(before["aws:region"]) * catalog.HOURS_PER_MONTH
    root_volume = 300 * service_prices.EBS_GP3_USD_PER_GB_MONTH
    busy = impact["cost"]["after"]["busyUsd"] - impact["cost"]["before"]["busyUsd"]
    assert busy == pytest.approx(node + root_volume, abs=1)
    text = run_diff(tmp_path / "text", before, after).stdout
    assert "scalingConfig.desiredSize: 1 -> 2" in text and "Monthly cost: busy" in text and "(+" in text


def test_resizing_an_elastic_pool_changes_its_limit_the_queues_and_the_team_quotas_in_place_and_keeps_its_nodes():
    before = {**one_group("trn1.32xlarge", maxSize=2), "teams": TEAMS}
    impact = diff.compare(plan(**before), plan(**with_group(before, maxSize=4)))
    changes = by_name(impact)
    # each team's queue and quota, and its namespace's count of its nodes of the group (which admission reads)
    teams = {f"trainium-teams-{team['name']}-{part}" for team in TEAMS for part in ("queue", "quota", "namespace")}
    assert set(changes) == {"trainium-trn1-32xl-nodepool", "trainium-scheduling-queue-trainium", *teams}
    assert impact.added == [] and impact.removed == [] and not any(c.replace for c in changes.values())
    pool = changes["trainium-trn1-32xl-nodepool"]
    assert pool.paths == ("spec.limits.cpu",) and pool.nodes is None  # limits do not drift


def test_changing_an_elastic_pools_node_template_drifts_its_nodes():
    before = one_group("trn1.32xlarge", rootVolumeGiB=300)
    (change,) = diff.compare(plan(**before), plan(**with_group(before, rootVolumeGiB=400))).changed
    assert change.urn.endswith("EC2NodeClass::trainium-trn1-32xl-nodeclass")
    assert change.paths == ("spec.blockDeviceMappings[0].ebs.volumeSize",)
    assert not change.replace and change.nodes == diff.DRIFT


def test_changing_the_instance_type_replaces_the_node_group_and_versions_the_launch_template():
    before = managed("trn1n.32xlarge", name="trn")
    changes = by_name(diff.compare(plan(**before), plan(**with_group(before, instanceType="trn1.32xlarge"))))
    assert changes["trainium-trn-ng"].replace and "instanceTypes[0]" in changes["trainium-trn-ng"].paths
    assert not changes["trainium-trn-lt"].replace  # a new launch template version
    assert changes["trainium-trn-lt"].nodes == diff.ROLLING
    efa = {t: catalog.INSTANCE_TYPES[t].max_efa_interfaces for t in ("trn1n.32xlarge", "trn1.32xlarge")}
    assert efa["trn1n.32xlarge"] != efa["trn1.32xlarge"] and "networkInterfaces" in changes["trainium-trn-lt"].paths


def test_adding_a_node_group_adds_its_resources_and_resizes_the_platform_queue_only():
    before = managed()
    spare = {**before["trainiumNodeGroups"][0], "name": "spare"}
    impact = diff.compare(plan(**before), plan(**{**before, "trainiumNodeGroups": [*before["trainiumNodeGroups"], spare]}))
    assert impact.removed == []
    names = {"trainium-spare", "trainium-spare-cluster", "trainium-spare-efa", "trainium-spare-lt", "trainium-spare-ng"}
    assert {urn.rsplit("::", 1)[1] for urn in impact.added} == names
    assert {c.urn.split("::")[2].rsplit("$", 1)[-1] for c in impact.changed} == {tokens.VOLCANO_QUEUE}


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


@pytest.mark.parametrize(
    ("old", "new", "deployment", "replace"),
    [(1200.0, 2400.0, "SCRATCH_2", False), (2400.0, 1200.0, "PERSISTENT_2", True), (3600.0, 7200.0, "SCRATCH_1", True)],
)
def test_a_file_system_grows_in_place_but_is_replaced_to_shrink_or_when_scratch_1(old, new, deployment, replace):
    inputs = {"deploymentType": deployment, "storageCapacity": new}
    assert diff.replaced_by_value(tokens.FSX_LUSTRE_FILE_SYSTEM, "storageCapacity", old, new, inputs) is replace


def test_changed_paths_descend_into_lists_of_equal_length():
    old = {"a": [{"b": 1}, {"b": 2}], "c": {"d": "x"}, "e": [1]}
    new = {"a": [{"b": 1}, {"b": 3}], "c": {"d": "x"}, "e": [1, 2]}
    assert [path for path, _, _ in input_paths.changed_values(old, new)] == ["a[1].b", "e"]


def test_ignored_paths_keep_the_old_value_or_drop_the_new_one_as_the_engine_does():
    old = {"spec": {"resources": {"requests": {"storage": "1200Gi"}}, "list": [{"x": 1}]}}
    new = {"spec": {"resources": {"requests": {"storage": "2400Gi"}}, "list": [{"x": 2}], "added": True}}
    kept = input_paths.with_ignored_changes(old, new, (CLAIM_REQUEST, "spec.list[0].x", "spec.added", "spec.missing.deeper"))
    assert kept == {"spec": {"resources": {"requests": {"storage": "1200Gi"}}, "list": [{"x": 1}]}}
    assert new["spec"]["added"] is True  # the plan itself is left as the program registered it


def test_a_resource_waits_for_its_dependencies_and_for_everything_inside_a_component_it_depends_on():
    def record(urn, parent=None, dependencies=(), custom=True):
        return {"urn": urn, "parent": parent, "dependencies": list(dependencies), "custom": custom}

    plan_records = {
        r["urn"]: r
        for r in (
            record("fs"),
            record("storage", custom=False),
            record("volume", parent="storage", dependencies=["fs"]),
            record("job", dependencies=["storage"]),
            record("alarm", dependencies=["fs"]),
            record("unrelated"),
        )
    }
    waits = diff.Waits(plan_records)
    assert waits.on("job") == {"storage", "volume", "fs"}
    assert waits.on("alarm") == {"fs"} and waits.on("unrelated") == set()


# ---- growing the file system: an update a real API server accepts, in the order it is applied ----------------------


def test_growing_the_file_system_grows_each_volume_after_it_and_never_resizes_a_claim(tmp_path):
    before = {**managed(), "teams": TEAMS, "fsxDeploymentType": "SCRATCH_2", "fsxStorageCapacityGiB": 1200}
    result = run_diff(tmp_path, before, {**before, "fsxStorageCapacityGiB": 2400}, "--json")
    assert result.returncode == 0, result.stderr
    impact = json.loads(result.stdout)
    changed = {c["urn"]: c for c in impact["changed"]}
    order = [c["urn"] for c in impact["changed"]]
    (file_system,) = [urn for urn in changed if tokens.FSX_LUSTRE_FILE_SYSTEM in urn]
    assert changed[file_system]["values"] == [{"path": "storageCapacity", "old": 1200, "new": 2400}]
    assert not changed[file_system]["replace"] and impact["losses"] == [] and impact["refused"] == []
    volumes = [urn for urn in changed if tokens.K8S_PERSISTENT_VOLUME + "::" in urn]
    assert len(volumes) == 1 + len(TEAMS)  # the platform's volume and each team's
    for volume in volumes:
        assert changed[volume]["values"] == [{"path": "spec.capacity.storage", "old": "1200Gi", "new": "2400Gi"}]
        assert file_system in changed[volume]["after"] and order.index(file_system) < order.index(volume)
    assert not [urn for urn in changed if tokens.K8S_PERSISTENT_VOLUME_CLAIM in urn]


def test_growing_a_stack_whose_claims_were_created_smaller_leaves_them_as_they_are():
    fixture = {**managed(), "teams": TEAMS, "fsxDeploymentType": "SCRATCH_2"}
    created, grown = plan(**fixture, fsxStorageCapacityGiB=1200), plan(**fixture, fsxStorageCapacityGiB=4800)
    claims = [r for r in grown["resources"] if r["type"] == tokens.K8S_PERSISTENT_VOLUME_CLAIM]
    assert claims and all(r["inputs"]["spec"]["resources"]["requests"]["storage"] == "4800Gi" for r in claims)
    changed = {c.urn for c in diff.compare(created, grown).changed}
    assert not changed & {r["urn"] for r in claims}


def test_shrinking_the_file_system_replaces_it_and_exits_with_the_data_loss_status(tmp_path):
    before = {**managed(), "fsxDeploymentType": "SCRATCH_2", "fsxStorageCapacityGiB": 2400}
    result = run_diff(tmp_path, before, {**before, "fsxStorageCapacityGiB": 1200})
    assert result.returncode == cli.DATA_LOSS == 3, result.stderr
    assert f"DATA LOSS: {tokens.FSX_LUSTRE_FILE_SYSTEM} trainium-storage-lustre is replaced" in result.stdout
    assert "storageCapacity: 2400 -> 1200" in result.stdout


def test_switching_the_file_system_type_warns_of_data_loss_and_names_what_depends_on_it(tmp_path):
    scratch = {**managed(), "fsxDeploymentType": "SCRATCH_2", "fsxThroughputPerTiB": None}
    persistent = {**scratch, "fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 125}
    result = run_diff(tmp_path, persistent, scratch, "--json")
    assert result.returncode == cli.DATA_LOSS, result.stderr
    impact = json.loads(result.stdout)
    (file_system,) = [c for c in impact["changed"] if c["urn"].endswith("::trainium-storage-lustre")]
    assert file_system["replace"]
    assert {"path": "deploymentType", "old": "PERSISTENT_2", "new": "SCRATCH_2"} in file_system["values"]
    assert any(urn.endswith("PersistentVolume::trainium-storage-fsx") for urn in file_system["dependents"])
    (loss,) = [loss for loss in impact["losses"] if loss["urn"] == file_system["urn"]]
    assert loss["how"] == "replaced" and "checkpoints" in loss["lost"]


# ---- what EKS refuses ----------------------------------------------------------------------------------------------


def test_moving_the_control_plane_back_is_refused_by_eks_and_moving_it_forward_is_not(tmp_path):
    older, newer = sorted(versions.SUPPORTED_KUBERNETES_VERSIONS, key=versions.minor_version)[-2:]
    before, after = {**managed(), "kubernetesVersion": newer}, {**managed(), "kubernetesVersion": older}
    result = run_diff(tmp_path, before, after)
    assert result.returncode == cli.REFUSED == 4, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if f"REFUSED BY EKS: {tokens.EKS_CLUSTER}" in line]
    assert f"version {newer} -> {older}" in line and "7 days" in line and f"keep {newer}" in line
    forward = diff.compare(plan(**after), plan(**before))
    assert not forward.refused and any(("version", older, newer) in c.values for c in forward.changed)


# ---- the report ----------------------------------------------------------------------------------------------------


def test_a_nested_change_shows_the_element_a_list_lost_whole(tmp_path):
    two_teams = {**managed(), "teams": TEAMS}
    result = run_diff(tmp_path, two_teams, {**two_teams, "teams": TEAMS[:1]})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("      spec.ingress:")
    lost = [line for line in lines[start + 1 :] if line.lstrip().startswith(("- [", "+ ["))]
    assert lost and all(line.lstrip().startswith("- [") for line in lost)
    assert any('"team-beta"' in line and line.rstrip().endswith("}") for line in lost)  # whole, not cut
    assert not any('"team-alpha"' in line for line in lost)


def test_long_values_show_both_sides_whole_and_documents_the_lines_that_differ():
    before, after = "x" * 80 + " 1200 GiB", "x" * 80 + " 2400 GiB"
    assert impact_report.value_change("alarmDescription", before, after)[1:] == [
        f"{impact_report.INDENT}- {before}",
        f"{impact_report.INDENT}+ {after}",
    ]
    policy = {"Statement": [{"Action": f"s3:Get{i}", "Effect": "Allow"} for i in range(6)], "Version": "2012-10-17"}
    widened = {**policy, "Statement": [*policy["Statement"][:5], {"Action": "*", "Effect": "Allow"}]}
    shown = impact_report.value_change("policy", json.dumps(policy), json.dumps(widened))
    assert [" ".join(line.split()) for line in shown if line.strip().startswith(("-", "+"))] == [
        '- "Action": "s3:Get5",',
        '+ "Action": "*",',
    ]
    assert impact_report.value_change("scalingConfig.desiredSize", 1.0, 2.0) == ["      scalingConfig.desiredSize: 1 -> 2"]


def test_diff_takes_a_stack_file_and_refuses_a_missing_one_in_one_line(tmp_path):
    result = run_preflight("diff", BASE, "--against", "HEAD", "--stack-file", str(tmp_path / "missing.yaml"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "missing.yaml" in result.stderr
    help_text = run_preflight("diff", "--help").stdout
    assert "--stack-file" in help_text and f"{cli.DATA_LOSS} it loses data" in help_text


# ---- the baseline at a git ref ---------------------------------------------------------------------------------------


def test_against_a_git_ref_evaluates_the_committed_version_whatever_stack_directory_is_set(tmp_path, monkeypatch):
    elsewhere = tmp_path / "stacks"
    fixture_file(elsewhere, {"environment": "elsewhere"})
    monkeypatch.setenv(stackfile.STACK_DIR_VARIABLE, str(elsewhere))
    with baseline.start(stackfile.REPO_ROOT, "HEAD", BASE) as evaluation:
        committed = evaluation.plan()
    assert committed["stack"] == BASE and committed["resources"]
    assert "elsewhere" not in json.dumps(committed)
    with pytest.raises(baseline.RefError, match="not a stack file, nor a git ref"):
        baseline.start(stackfile.REPO_ROOT, "no-such-ref-anywhere", BASE)


@pytest.mark.parametrize("ref", ["HEAD", "HEAD~1", "main^2", "HEAD@{1}", "v1.0", "feature/x"])
def test_revisions_are_accepted_as_refs(ref):
    assert baseline.check_ref(ref) == ref


def test_a_ref_that_reads_as_an_option_never_reaches_git(monkeypatch):
    def run(*args, **kwargs):
        raise AssertionError(f"git ran: {args}")

    monkeypatch.setattr(baseline.subprocess, "run", run)
    for ref in ("--output=/tmp/x", "-p", "HEAD --help", "HEAD:stacks"):
        with pytest.raises(baseline.RefError, match="not a stack file, nor a git ref"):
            baseline.start(stackfile.REPO_ROOT, ref, BASE)


def test_a_running_clusters_control_plane_log_group_is_to_be_imported_first():
    """EKS made the control-plane log group of a cluster that predates the stack's own: the diff says to import it,
    and says nothing of the sort for a stack that runs no cluster yet."""
    current = plan()
    (log_group,) = [
        r
        for r in current["resources"]
        if r["type"] == tokens.CLOUDWATCH_LOG_GROUP and diff.CONTROL_PLANE_LOGS.match(str(r["inputs"].get("name")))
    ]
    running = {**current, "resources": [r for r in current["resources"] if r["urn"] != log_group["urn"]]}
    impact = diff.compare(running, current)
    assert [i["urn"] for i in impact.imports] == [log_group["urn"]]
    report = impact_report.impact(BASE, "main", impact, current, running)
    assert f"IMPORT FIRST: {log_group['type']} {log_group['name']} ({log_group['inputs']['name']})" in report
    nothing_runs = {**current, "resources": [r for r in running["resources"] if r["type"] not in tokens.EKS_CLUSTERS]}
    assert diff.compare(nothing_runs, current).imports == []
