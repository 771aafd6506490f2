"""`preflight diff --format markdown`, the change report of one stack for a pull-request comment, on real edits of the
shipped dev stack: a file system replaced (DATA LOSS), Kubernetes moved back (REFUSED BY EKS), a Trainium group's
maxSize raised past the policy config's node limit (applies, with the policy violations and the cost before and
after). Each report's Mermaid graph is parsed by Mermaid's own parser (tests/mermaid: `npm ci` there, as `make test`
runs it)."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from support import run_preflight, stack_copy

from preflight import check, cli, diff, mermaid, pr_markdown, stackfile
from trainium_eks import catalog, tokens, versions

STACK = "dev"
NS = "trainium-eks:"
MERMAID = Path(__file__).resolve().parent / "mermaid"
MERMAID_BLOCK = re.compile(r"^```mermaid\n(.*?)\n```$", re.S | re.M)
OPEN_SECTION = re.compile(r"^\*\*(?P<title>[A-Za-z ]+) \((?P<rows>\d+)\)\*\*$", re.M)
COLLAPSED_SECTION = re.compile(r"^<summary><b>(?P<title>[A-Za-z ]+) \((?P<rows>\d+)\)</b></summary>$", re.M)


def replace_file_system(config: dict) -> None:
    """Another deployment type: FSx replaces the file system (diff.REPLACE_ON_CHANGE)."""
    if config.get(f"{NS}fsxDeploymentType", "SCRATCH_2") == "PERSISTENT_2":
        config[f"{NS}fsxDeploymentType"] = "SCRATCH_2"
        config.pop(f"{NS}fsxThroughputPerTiB", None)
    else:
        config[f"{NS}fsxDeploymentType"] = "PERSISTENT_2"
        config[f"{NS}fsxThroughputPerTiB"] = 125


def move_kubernetes_back(config: dict) -> None:
    config[f"{NS}kubernetesVersion"] = versions.SUPPORTED_KUBERNETES_VERSIONS[0]


def node_limit() -> int:
    return check.load_policy_config(STACK)["trainium-node-limit"]["maxTrainiumNodes"]


def raise_max_size(config: dict) -> None:
    """The first Trainium group one node past the node limit of the stack's policy config."""
    (group, *others) = config[f"{NS}trainiumNodeGroups"]
    config[f"{NS}trainiumNodeGroups"] = [{**group, "maxSize": node_limit() + 1}, *others]


def latest_kubernetes(config: dict) -> None:
    config[f"{NS}kubernetesVersion"] = versions.SUPPORTED_KUBERNETES_VERSIONS[-1]


def as_shipped(config: dict) -> None:
    """The baseline of a case that edits the shipped stack as it is."""


CASES = {
    "file system replaced": (as_shipped, replace_file_system),
    "kubernetes moved back": (latest_kubernetes, move_kubernetes_back),
    "max size raised": (as_shipped, raise_max_size),
}
VERDICTS = {"file system replaced": "DATA LOSS", "kubernetes moved back": "REFUSED BY EKS", "max size raised": "applies"}
STATUSES = {"file system replaced": cli.DATA_LOSS, "kubernetes moved back": cli.REFUSED, "max size raised": 0}


@dataclass(frozen=True)
class Run:
    markdown: subprocess.CompletedProcess  # `diff --format markdown`
    json_status: int  # the exit status of `diff --json`
    impact: dict  # what `diff --json` printed


@functools.cache
def run(case: str) -> Run:
    """The case's markdown and JSON runs of `preflight diff`: the shipped stack, edited, against its baseline."""
    baseline_edit, edit = CASES[case]

    def proposed(config: dict) -> None:
        baseline_edit(config)
        edit(config)

    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "before").mkdir()
        (Path(directory) / "after").mkdir()
        before = stack_copy(Path(directory) / "before", STACK, baseline_edit)
        after = stack_copy(Path(directory) / "after", STACK, proposed)
        markdown = run_preflight("diff", STACK, "--against", before, "--stack-file", after, "--format", "markdown")
        impact = run_preflight("diff", STACK, "--against", before, "--stack-file", after, "--json")
    assert impact.returncode in (0, cli.DATA_LOSS, cli.REFUSED), impact.stderr
    return Run(markdown, impact.returncode, json.loads(impact.stdout))


def parse_mermaid(text: str) -> subprocess.CompletedProcess:
    """Mermaid's own parser on ``text`` (tests/mermaid/parse.mjs)."""
    node = shutil.which("node")
    assert node, "node is not installed: the Mermaid check needs Node.js 20 or later"
    assert (MERMAID / "node_modules" / "mermaid").is_dir(), "run `npm ci` in tests/mermaid (make test does)"
    return subprocess.run([node, "parse.mjs"], cwd=MERMAID, input=text, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_heads_the_report_and_the_exit_status_is_the_same_as_in_json(case):
    result = run(case)
    assert result.markdown.returncode == result.json_status == STATUSES[case], result.markdown.stderr
    assert result.markdown.stdout.splitlines()[0] == f"### {STACK}: {VERDICTS[case]}"


def resource_type(urn: str) -> str:
    return urn.split("::")[2].rsplit("$", 1)[-1]


def name_of(urn: str) -> str:
    return urn.rsplit("::", 1)[1]


@pytest.mark.parametrize("case", CASES)
def test_each_data_loss_and_refusal_names_its_resource(case):
    result = run(case)
    lines = [
        f"- **{flag}**: `{resource_type(entry['urn'])} {name_of(entry['urn'])}`"
        for flag, entries in (("DATA LOSS", result.impact["losses"]), ("REFUSED BY EKS", result.impact["refused"]))
        for entry in entries
    ]
    shown = [line for line in result.markdown.stdout.splitlines() if line.startswith("- **")]
    assert len(shown) == len(lines) and all(line.startswith(start) for line, start in zip(shown, lines, strict=True))


def test_the_replaced_file_system_is_the_data_loss():
    (loss,) = run("file system replaced").impact["losses"]
    assert resource_type(loss["urn"]) == tokens.FSX_LUSTRE_FILE_SYSTEM and loss["how"] == "replaced"


def test_the_downgraded_control_plane_is_refused_and_the_pools_nodes_it_replaces_are_listed():
    result = run("kubernetes moved back")
    assert tokens.EKS_CLUSTER in {resource_type(r["urn"]) for r in result.impact["refused"]}
    drifts = [f"- nodes of `{resource_type(d['urn'])} {name_of(d['urn'])}`: " for d in result.impact["drifts"]]
    shown = [line for line in result.markdown.stdout.splitlines() if line.startswith("- nodes of ")]
    assert len(shown) == len(drifts) + len(result.impact["nodeImages"])
    assert all(any(line.startswith(start) for line in shown) for start in drifts)


@pytest.mark.parametrize("case", CASES)
def test_each_section_counts_the_changes_and_is_collapsed_past_the_threshold(case):
    result = run(case)
    impact, markdown = result.impact, result.markdown.stdout
    replaced = sum(1 for c in impact["changed"] if c["replace"])
    expected = {
        "Added": len(impact["added"]),
        "Removed": len(impact["removed"]),
        "Replaced": replaced,
        "Changed in place": len(impact["changed"]) - replaced,
    }
    sections = {m["title"]: (int(m["rows"]), False) for m in OPEN_SECTION.finditer(markdown)}
    sections |= {m["title"]: (int(m["rows"]), True) for m in COLLAPSED_SECTION.finditer(markdown)}
    for title, count in expected.items():
        if count:
            assert sections[title] == (count, count > pr_markdown.COLLAPSE_AFTER), title
        else:
            assert title not in sections, title
    for urn in [*impact["added"], *impact["removed"], *(c["urn"] for c in impact["changed"])]:
        assert f"| `{name_of(urn)}` | `{resource_type(urn)}` |" in markdown


def test_a_kubernetes_downgrade_collapses_its_many_changes():
    markdown = run("kubernetes moved back").markdown.stdout
    assert re.search(r"^<details>\n<summary><b>Changed in place \(\d+\)</b></summary>\n\n\| Resource", markdown, re.M)
    assert markdown.count("<details>") == markdown.count("</details>") > 0


def shipped_config() -> dict:
    return yaml.safe_load((stackfile.stack_directory() / f"Pulumi.{STACK}.yaml").read_text())["config"]


def test_raising_max_size_shows_the_cost_before_and_after_and_the_policy_violations_of_the_new_plan():
    result = run("max size raised")
    cost, lines = result.impact["cost"], result.markdown.stdout.splitlines()
    busy = cost["before"]["busyUsd"], cost["after"]["busyUsd"]
    (group, *_) = shipped_config()[f"{NS}trainiumNodeGroups"]
    price = catalog.INSTANCE_TYPES[group["instanceType"]].price(shipped_config()["aws:region"]) * catalog.HOURS_PER_MONTH
    assert busy[1] - busy[0] >= (node_limit() + 1 - group["maxSize"]) * price  # the added nodes, and their volumes
    (row,) = [line for line in lines if line.startswith("| Monthly cost, busy")]
    assert row.endswith(f"| {busy[0]:,.0f} USD | {busy[1]:,.0f} USD | {busy[1] - busy[0]:+,.0f} |")
    assert any(line.startswith("| Monthly cost, idle") for line in lines)
    assert any(line.startswith("| `pulumi up` of a new stack") for line in lines)
    (pool,) = [
        c for c in result.impact["changed"] if resource_type(c["urn"]) in (tokens.KARPENTER_NODE_POOL, tokens.EKS_NODE_GROUP)
    ]
    (violation,) = [line for line in lines if "| `trainium-node-limit` |" in line]
    assert (
        violation.startswith("| mandatory | `cost-guard` |")
        and f"| `{resource_type(pool['urn'])} {name_of(pool['urn'])}` |" in violation
    )
    assert f"limit of {node_limit()}" in violation


@pytest.mark.parametrize("case", ["file system replaced", "kubernetes moved back"])
def test_a_plan_the_packs_accept_says_so(case):
    assert re.search(r"^\*\*Policy check of the new plan\*\*: .*: no violation$", run(case).markdown.stdout, re.M)


def graph_of(markdown: str) -> str:
    (block,) = MERMAID_BLOCK.findall(markdown)
    return block


@pytest.mark.parametrize("case", CASES)
def test_mermaids_parser_accepts_the_graph_which_marks_each_change(case):
    result = run(case)
    graph = graph_of(result.markdown.stdout)
    parsed = parse_mermaid(graph)
    assert parsed.returncode == 0, parsed.stderr
    assert parsed.stdout.strip().startswith("flowchart")
    marks = {c["urn"]: "replaced" if c["replace"] else "updated" for c in result.impact["changed"]}
    marks |= {urn: "added" for urn in result.impact["added"]} | {urn: "removed" for urn in result.impact["removed"]}
    classes = {
        member: mark for members, mark in re.findall(r"^  class (\S+) (\w+)$", graph, re.M) for member in members.split(",")
    }
    sign = {mark: prefix for mark, (prefix, _) in mermaid.MARKS.items()}
    for urn, mark in marks.items():
        label = f"{sign[mark]} {resource_type(urn).rsplit(':', 1)[-1]} {name_of(urn)}"
        (node,) = re.findall(rf'^  (\w+)\["{re.escape(label)}"\]$', graph, re.M)
        assert classes[node] == mark, label
    assert mermaid.LEGEND in result.markdown.stdout


def test_the_check_refuses_a_broken_diagram():
    broken = graph_of(run("file system replaced").markdown.stdout).replace('"]', "]", 1)  # a label's closing quote lost
    refused = parse_mermaid(broken)
    assert refused.returncode == 1 and "Parse error" in refused.stderr


def resource(urn: str, name: str, dependencies: tuple[str, ...] = ()) -> dict:
    return {"urn": urn, "type": "aws:s3/bucket:Bucket", "name": name, "dependencies": list(dependencies), "inputs": {}}


def test_names_with_markdown_and_mermaid_syntax_are_escaped_and_the_graph_is_bounded():
    hostile = 'end"|<b>`x`#35;&$:'
    urns = [f"urn:pulumi:dev::p::aws:s3/bucket:Bucket::{hostile}{i}" for i in range(mermaid.MAX_NODES + 3)]
    plan = {"resources": [resource(urn, urn.rsplit("::", 1)[1], tuple(urns[:1]) if urn != urns[0] else ()) for urn in urns]}
    change = diff.Impact(added=urns[1:], changed=[diff.Change(urns[0], ("bucket",), True, dependents=tuple(urns[1:]))])
    graph = mermaid.change_graph(change, {"resources": []}, plan)
    assert graph.shown == mermaid.MAX_NODES and graph.omitted == 3
    assert all(re.fullmatch(r"\w+", line.split("[", 1)[0].strip(), re.A) for line in graph.text.splitlines() if '["' in line)
    parsed = parse_mermaid(graph.text)
    assert parsed.returncode == 0, parsed.stderr
    cell = pr_markdown.code(hostile)
    assert "|" not in cell.replace("\\|", "") and cell.startswith("``") and "<b>" in cell  # inside the span: literal
    markdown = pr_markdown.graph_section(change, {"resources": []}, plan)
    assert f"and {graph.omitted} more are left out" in "\n".join(markdown)


def test_json_and_format_together_are_refused_in_one_line():
    result = run_preflight("diff", STACK, "--against", "HEAD", "--json", "--format", "markdown")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--format" in result.stderr and "--json" in result.stderr
