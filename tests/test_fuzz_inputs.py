"""Fuzzing the edges: generated stack files, plan files and stack outputs fed to the command-line tools.

Whatever comes in, a tool exits 0, 1 (mandatory violations) or 2 (bad input) and never raises; exit 2 comes
with exactly one line on stderr; and a stack that is accepted yields a plan whose names and tags follow AWS's
and Kubernetes' rules. The tools run in-process (their ``main``), so each example costs an evaluation, not an
interpreter start. Examples are derandomized: CI sees the same inputs every run. The inputs are edits of the fixture
staging stack (tests/fixture_stacks), whose shape the cases know, whatever the shipped stacks hold.
"""

from __future__ import annotations

import copy
import functools
import json
import re

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import FIXTURE_STACKS, evaluate

from jobs import launch
from preflight import cli
from trainium_eks import catalog, versions
from trainium_eks.config import fields

FUZZ = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
STAGING_FILE = FIXTURE_STACKS / "Pulumi.staging.yaml"
# Any JSON-like value, a few levels deep.
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
KEY_NAMES = st.sampled_from(
    [
        *yaml.safe_load(STAGING_FILE.read_text())["config"],
        "trainium-eks:natGateway",
        "trainium-eks:etcdMembers",
        "trainium-eks:nodeImageRelease",  # retired
        "aws:region",
    ]
)
NODE_GROUP_FIELDS = st.sampled_from(
    [
        "name",
        "instanceType",
        "minSize",
        "desiredSize",
        "maxSize",
        "efa",
        "labels",
        "rootVolumeGiB",
        "capacityReservation",
        "trainingStack",
        "nodeImageRelease",
    ]
)
# A group's value: anything, or a name of versions.py (a training stack, a release with or without a sourced driver)
# or of the catalog, which may or may not suit the field and the group.
GROUP_VALUES = VALUES | st.sampled_from([*versions.TRAINING_STACKS, *versions.NODE_IMAGE_RELEASES, *catalog.TRAINIUM_TYPES])


@functools.cache
def staging_plan() -> str:
    return json.dumps(evaluate("staging", fixture=True).to_json())


def run(main, argv, capsys) -> tuple[int, str, str]:
    """A tool's exit status and output; an exception escaping ``main`` fails the test with its traceback."""
    capsys.readouterr()  # nothing left over from an earlier example
    try:
        status = main(argv)
    finally:
        out, err = capsys.readouterr()
    assert status in (0, 1, 2), (argv, status, err)
    if status == 2:
        assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in out + err
    return status, out, err


def assert_names_follow_the_rules(plan: dict) -> None:
    for resource in plan["resources"]:
        inputs = resource.get("inputs") or {}
        for value in (inputs.get("tags") or {}).values():
            if isinstance(value, str):
                assert fields._tag_value(value), (resource["urn"], value)
        labels = (inputs.get("metadata") or {}).get("labels") or inputs.get("labels") or {}
        for key, value in labels.items() if isinstance(labels, dict) else ():
            assert fields._label_key(key) or key.startswith("trainium-eks/"), (resource["urn"], key)
            assert value == "" or fields.LABEL_NAME.match(str(value)), (resource["urn"], value)
        for name_key, limit in (("nodeGroupName", 63), ("name", 100)):
            name = inputs.get(name_key)
            if resource["type"] in ("aws:eks/nodeGroup:NodeGroup", "aws:eks/cluster:Cluster") and isinstance(name, str):
                assert len(name) <= limit and re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z_-]*", name), name


@FUZZ
@given(key=KEY_NAMES, value=VALUES | st.just("DELETE"), field=NODE_GROUP_FIELDS, group_value=GROUP_VALUES)
def test_generated_stack_files(tmp_path_factory, capsys, key, value, field, group_value):
    document = yaml.safe_load(STAGING_FILE.read_text())
    config = document["config"]
    if value == "DELETE":
        config.pop(key, None)
    else:
        config[key] = value
    groups = config.get("trainium-eks:trainiumNodeGroups")
    if isinstance(groups, list) and groups and isinstance(groups[0], dict):
        groups[0][field] = group_value
    stack_file = tmp_path_factory.mktemp("stack") / "Pulumi.staging.yaml"
    stack_file.write_text(yaml.safe_dump(document))
    status, out, _ = run(cli.main, ["plan", "staging", "--stack-file", str(stack_file), "--json"], capsys)
    if status == 0:
        assert_names_follow_the_rules(json.loads(out))


ANY_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=70)
# Mostly plausible names (so that many stacks are accepted and their plans checked), sometimes anything.
NAME_TEXT = st.from_regex(r"[a-z0-9][a-zA-Z0-9._/ -]{0,40}", fullmatch=True) | ANY_TEXT


@FUZZ
@given(
    owner=NAME_TEXT,
    group_name=st.from_regex(r"[a-z][a-z0-9-]{0,40}", fullmatch=True) | ANY_TEXT,
    label_key=NAME_TEXT,
    label_value=NAME_TEXT,
    environment=st.from_regex(r"[a-z][a-z0-9-]{0,18}", fullmatch=True) | ANY_TEXT,
)
def test_accepted_names_and_tags_follow_aws_and_kubernetes_rules(
    tmp_path_factory, capsys, owner, group_name, label_key, label_value, environment
):
    document = yaml.safe_load(STAGING_FILE.read_text())
    config = document["config"]
    config["trainium-eks:owner"], config["trainium-eks:environment"] = owner, environment
    (group,) = config["trainium-eks:trainiumNodeGroups"]
    group.update(name=group_name, labels={label_key: label_value})
    stack_file = tmp_path_factory.mktemp("stack") / "Pulumi.staging.yaml"
    stack_file.write_text(yaml.safe_dump(document, allow_unicode=True))
    status, out, _ = run(cli.main, ["plan", "staging", "--stack-file", str(stack_file), "--json"], capsys)
    if status == 0:
        assert_names_follow_the_rules(json.loads(out))


def test_the_naming_check_sees_what_an_accepted_stack_carries(tmp_path, capsys):
    """The check above applied to a stack with unusual but valid names: accepted, and every name passes."""
    document = yaml.safe_load(STAGING_FILE.read_text())
    document["config"]["trainium-eks:owner"] = "ML Platform/Team+1@example.com"
    (group,) = document["config"]["trainium-eks:trainiumNodeGroups"]
    group.update(name="t-1", labels={"team.example.com/name": "nlp_1.a", "tier": ""})
    stack_file = tmp_path / "Pulumi.staging.yaml"
    stack_file.write_text(yaml.safe_dump(document))
    status, out, _ = run(cli.main, ["plan", "staging", "--stack-file", str(stack_file), "--json"], capsys)
    plan = json.loads(out)
    assert status == 0 and '"tier": ""' in out  # the empty label value reached the nodes' labels
    assert_names_follow_the_rules(plan)


@FUZZ
@given(
    edit=st.sampled_from(["drop-key", "set-key", "replace-resource", "whole-document"]),
    key=st.sampled_from(["resources", "outputs", "stack", "project", "preview"]),
    index=st.integers(0, 300),
    value=VALUES,
)
def test_generated_plan_files(tmp_path_factory, capsys, edit, key, index, value):
    plan = json.loads(staging_plan())
    if edit == "drop-key":
        plan.pop(key, None)
    elif edit == "set-key":
        plan[key] = value
    elif edit == "replace-resource":
        plan["resources"][index % len(plan["resources"])] = value
    else:
        plan = value
    graph = tmp_path_factory.mktemp("plan") / "plan.json"
    graph.write_text(json.dumps(plan))
    run(cli.main, ["check", "--graph", str(graph)], capsys)


@FUZZ
@given(
    key=st.sampled_from(sorted(json.loads(staging_plan())["outputs"])),
    value=VALUES | st.just("DELETE"),
    option=st.sampled_from([[], ["--nodes", "0"], ["--name", "x/../y"], ["--queue", "nope"], ["--workers-per-node", "-1"]]),
)
def test_generated_stack_outputs(tmp_path_factory, capsys, key, value, option):
    outputs = copy.deepcopy(json.loads(staging_plan())["outputs"])
    if value == "DELETE":
        outputs.pop(key)
    else:
        outputs[key] = value
    path = tmp_path_factory.mktemp("outputs") / "outputs.json"
    path.write_text(json.dumps(outputs))
    status, out, _ = run(launch.main, ["--outputs", str(path), "--dryrun", "--json", *option], capsys)
    if status == 0:
        job = json.loads(out)
        assert len(job["metadata"]["name"]) <= 63 and ".." not in json.dumps(job["spec"]["tasks"][0]["template"]["spec"])
