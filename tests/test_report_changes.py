"""What the change report says changes: each changed input with its values before and after (a secret masked, a long
value shortened, a list item by its key), the resources that change or break with a replacement, and the node groups
whose nodes go, in the headline, in the Markdown report (`preflight diff --format markdown`) and in the text.

The stacks are the fixture dev stack with the overrides each test sets; the hand-built plans hold what no stack of the
platform has (a secret input)."""

from __future__ import annotations

import functools
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import PROJECT, one_group, run_preflight, stack_copy

from plan_graph.trainium_groups import INSTANCE_TYPE_LABEL
from preflight import cli, diff, engine, impact_report, node_replacements, pr_markdown
from trainium_eks import tokens

STACK = "dev"


def run_diff(tmp_path, before: dict, after: dict, *options: str):
    """`preflight diff` of the fixture stack with the ``after`` overrides against it with the ``before`` ones."""

    def stack_file(side: str, overrides: dict) -> str:
        def edit(config: dict) -> None:
            config.update({key if ":" in key else f"{PROJECT}:{key}": value for key, value in overrides.items()})

        (tmp_path / side).mkdir(parents=True)
        return stack_copy(tmp_path / side, STACK, edit, fixture=True)

    against, proposed = stack_file("before", before), stack_file("after", after)
    return run_preflight("diff", STACK, "--against", against, "--stack-file", proposed, *options)


def row_of(markdown: str, name: str) -> str:
    (row,) = [line for line in markdown.splitlines() if line.startswith(f"| `{name}` |")]
    return row


def test_a_file_system_deployment_type_change_shows_both_values_and_what_changes_or_breaks_with_it(tmp_path):
    before = {"fsxDeploymentType": "PERSISTENT_1", "fsxThroughputPerTiB": 200}
    after = {"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 250}
    markdown = run_diff(tmp_path / "markdown", before, after, "--format", "markdown")
    assert markdown.returncode == cli.DATA_LOSS, markdown.stderr
    impact = json.loads(run_diff(tmp_path / "json", before, after, "--json").stdout)
    (file_system,) = [c for c in impact["changed"] if f"{tokens.FSX_LUSTRE_FILE_SYSTEM}::" in c["urn"]]
    row = row_of(markdown.stdout, file_system["urn"].rsplit("::", 1)[1])
    assert f'`deploymentType`: `"{before["fsxDeploymentType"]}"` -> `"{after["fsxDeploymentType"]}"`' in row
    assert f"`perUnitStorageThroughput`: `{before['fsxThroughputPerTiB']}` -> `{after['fsxThroughputPerTiB']}`" in row
    assert file_system["dependents"], "the file system's volume takes its ID"
    for urn in file_system["dependents"]:
        kind, name = urn.split("::")[2].rsplit(":", 1)[-1], urn.rsplit("::", 1)[1]
        assert f"`{kind} {name}`" in row.rsplit(" | ", 1)[1], urn


@dataclass(frozen=True)
class InstanceTypeChange:
    group: dict  # the Trainium group before, as the stack file sets it
    instance_type: str  # its instance type after
    markdown: str
    text: str


@functools.cache
def instance_type_change(provisioning: str) -> InstanceTypeChange:
    """The one Trainium group of the fixture, managed or elastic, moved from trn1n.32xlarge to trn1.32xlarge."""
    sizes = {"minSize": 1, "desiredSize": 1, "maxSize": 2} if provisioning == "managed" else {"maxSize": 2}
    before = one_group("trn1n.32xlarge", name="trn", provisioning=provisioning, **sizes)
    (group,) = before["trainiumNodeGroups"]
    after = {**before, "trainiumNodeGroups": [{**group, "instanceType": "trn1.32xlarge"}]}
    with tempfile.TemporaryDirectory() as directory:
        markdown = run_diff(Path(directory) / "markdown", before, after, "--format", "markdown")
        text = run_diff(Path(directory) / "text", before, after)
    assert markdown.returncode == text.returncode == 0, markdown.stderr
    return InstanceTypeChange(group, after["trainiumNodeGroups"][0]["instanceType"], markdown.stdout, text.stdout)


@pytest.mark.parametrize("provisioning", ["managed", "karpenter"])
def test_an_instance_type_change_of_a_trainium_group_headlines_the_nodes_it_replaces(provisioning):
    change = instance_type_change(provisioning)
    name = change.group["name"]
    # a managed group runs its desired size; a pool, at most its maxSize
    count = change.group["desiredSize"] if provisioning == "managed" else change.group["maxSize"]
    headline = change.markdown.splitlines()[2]
    assert re.search(rf"; nodes replaced: `{name}` \([^)]*\b{count}\b[^)]*\)\.$", headline), headline
    how = node_replacements.REPLACED if provisioning == "managed" else diff.DRIFT
    (line,) = [line for line in change.markdown.splitlines() if line.startswith(f"- group `{name}` ")]
    assert line.endswith(f": {how}")
    first = change.text.splitlines()[0]
    assert re.search(rf"; nodes replaced: {name} \([^)]*\b{count}\b[^)]*\)$", first), first


def test_an_elastic_pools_instance_type_reads_by_the_requirements_key_in_both_formats():
    change = instance_type_change("karpenter")
    path = f"spec.template.spec.requirements[{INSTANCE_TYPE_LABEL}].values[0]"
    old, new = change.group["instanceType"], change.instance_type
    assert f'`{path}`: `"{old}"` -> `"{new}"`' in change.markdown
    assert f'      {path}: "{old}" -> "{new}"' in change.text.splitlines()


def deployment(env: list[dict]) -> dict:
    """A plan of one Deployment whose container has the environment ``env``."""
    urn = f"urn:pulumi:{STACK}::{PROJECT}::{tokens.K8S_DEPLOYMENT}::app"
    container = {"name": "app", "image": "public.ecr.aws/docker/library/busybox:1.37", "env": env}
    inputs = {"metadata": {"name": "app"}, "spec": {"template": {"spec": {"containers": [container]}}}}
    return {"resources": [{"urn": urn, "type": tokens.K8S_DEPLOYMENT, "name": "app", "dependencies": [], "inputs": inputs}]}


def reports(before: dict, after: dict) -> tuple[str, str]:
    """The Markdown report's tables and the text report of the change from ``before`` to ``after``."""
    change = diff.compare(before, after)
    names = {r["urn"]: (r["type"], r["name"]) for r in after["resources"]}
    return "\n".join(pr_markdown.resource_sections(change, names)), impact_report.impact(STACK, "main", change, after, before)


def test_a_value_made_secret_is_masked_on_both_sides_and_its_list_items_read_by_name():
    plain = [{"name": "TOKEN", "value": "hunter2-plain"}]
    secret = [{"name": "TOKEN", "value": engine.SECRET}]
    markdown, text = reports(deployment(plain), deployment(secret))
    path = "spec.template.spec.containers[app].env[TOKEN].value"
    masked = json.dumps(engine.SECRET)
    assert f"`{path}`: `{masked}` -> `{masked}`" in markdown
    assert f"      {path}: {masked} -> {masked}" in text.splitlines()
    assert plain[0]["value"] not in markdown + text


def test_a_list_that_gains_a_secret_is_masked_whole():
    plain = [{"name": "TOKEN", "value": "hunter2-plain"}]
    grown = [{"name": "TOKEN", "value": engine.SECRET}, {"name": "LOG_LEVEL", "value": "debug"}]
    markdown, text = reports(deployment(plain), deployment(grown))
    assert plain[0]["value"] not in markdown + text
    assert "`spec.template.spec.containers[app].env`" in markdown


def test_a_long_value_is_shortened_where_it_differs_and_both_sides_still_read_apart():
    before, after = "x" * 200 + " 1200 GiB", "x" * 200 + " 2400 GiB"
    cell = pr_markdown.value_change("description", before, after)
    spans = re.findall(r"`([^`]*)`", cell)
    assert spans[0] == "description" and len(spans) == 3
    old, new = spans[1:]
    assert old != new and "1200" in old and "2400" in new
    assert all(len(side) <= pr_markdown.VALUE_CHARACTERS and pr_markdown.ELLIPSIS in side for side in (old, new))
    assert before not in cell and after not in cell
    grown = pr_markdown.value_change("description", None, after)
    (new,) = re.findall(r"`([^`]*)`", grown)[1:]
    assert grown.endswith(f"-> `{new}`") and "(none) ->" in grown
    assert len(new) == pr_markdown.VALUE_CHARACTERS and new.endswith(pr_markdown.ELLIPSIS)
