"""A team's share holds per Trainium group (docs/teams.md, "Capacity"): its namespace says how many whole nodes of each
group it holds, the launcher sizes the team's job on a group by them, and the teams' default jobs together fit every
group; a job of a team on a group of which it holds no node is refused by the launcher and at admission. Expectations
come from the stack files (the shares and the groups as the program reads them), with exact fractions."""

from __future__ import annotations

import copy
import json
import math
from fractions import Fraction

import pytest
from admission_review import Policy, Request
from admitted_workloads import workloads
from job_outputs import run_module
from support import FIXTURE_STACKS, STACKS, cached_plan, evaluate, manifest, one_line, settings

from jobs import launch
from jobs.job_building.capacity import team_group_nodes
from jobs.workloads import bert_job
from policies.rules.teams import GROUP_NODES_ANNOTATION
from trainium_eks import layout, tokens
from trainium_eks.config import PlatformConfig, parse
from trainium_eks.contract import PlatformContract


def _config(stack: str, fixture: bool) -> PlatformConfig:
    return parse(settings(stack, fixture=fixture).config, stack=stack)


STACKS_WITH_TEAMS = [
    pytest.param(stack, fixture, id=f"{'fixture-' if fixture else ''}{stack}")
    for fixture in (False, True)
    for stack in (STACKS if not fixture else sorted(p.stem.removeprefix("Pulumi.") for p in FIXTURE_STACKS.glob("Pulumi.*.yaml")))
    if _config(stack, fixture).scheduling.teams
]


def whole_nodes(share: float, max_size: int) -> int:
    """The nodes of a group of ``max_size`` a share entitles to, with the share as the exact decimal the file writes."""
    return math.floor(Fraction(str(share)) * max_size)


def runs(group) -> int:
    """The nodes a group runs for jobs: an elastic group up to maxSize, a managed group its desiredSize."""
    return group.scaling.max_size if group.elastic else group.scaling.desired_size


def default_job(outputs_path, team: str, group: str, capsys) -> tuple[int, dict | None, str]:
    """`jobs.launch --team TEAM --node-group GROUP` as a user runs it (BERT, the launcher's default size)."""
    capsys.readouterr()
    argv = ["--team", team, "--node-group", group, "--dryrun", "--json", "--outputs", str(outputs_path)]
    status = launch.main(argv)
    out, err = capsys.readouterr()
    return status, json.loads(out) if status == 0 else None, err


def job_nodes(job: dict) -> int:
    """The nodes a whole-node Volcano Job of the launcher's takes: one pod a node, each task's replicas."""
    return sum(task["replicas"] for task in job["spec"]["tasks"])


def team_namespace(plan, team: str) -> dict:
    (namespace,) = [
        manifest(n) for n in plan.find(tokens.K8S_NAMESPACE) if n.inputs["metadata"]["name"] == layout.team_namespace(team)
    ]
    return namespace


@pytest.mark.stacks
@pytest.mark.parametrize(("stack", "fixture"), STACKS_WITH_TEAMS)
def test_each_team_namespace_holds_its_whole_nodes_of_every_group_as_the_launcher_counts_them(stack, fixture):
    config, plan = _config(stack, fixture), cached_plan(stack, False, fixture)
    contract = PlatformContract.from_outputs(json.loads(json.dumps(plan.outputs)))
    for team in config.scheduling.teams:
        expected = {group.name: whole_nodes(team.neuron_share, group.scaling.max_size) for group in config.trainium_node_groups}
        annotations = team_namespace(plan, team.name)["metadata"]["annotations"]
        held = {key.removeprefix(GROUP_NODES_ANNOTATION): int(value) for key, value in annotations.items()}
        assert held == expected, (team.name, annotations)
        assert team_group_nodes(contract.team(team.name), contract.node_groups) == expected, team.name


@pytest.mark.stacks
@pytest.mark.parametrize(("stack", "fixture"), STACKS_WITH_TEAMS)
def test_the_teams_default_jobs_fit_each_group_together(stack, fixture, tmp_path, capsys):
    config, plan = _config(stack, fixture), cached_plan(stack, False, fixture)
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(plan.outputs))
    for group in config.trainium_node_groups:
        taken = {}
        for team in config.scheduling.teams:
            status, job, err = default_job(path, team.name, group.name, capsys)
            share = whole_nodes(team.neuron_share, group.scaling.max_size)
            assert share >= 1, (team.name, group.name)  # the program refuses a share below one node of any group
            assert status == 0, err
            taken[team.name] = job_nodes(job)
            assert 1 <= taken[team.name] <= share, (team.name, group.name, taken)
        assert sum(taken.values()) <= runs(group), (group.name, taken, runs(group))


# ---- a group of which the team holds no node ------------------------------------------------------------------------

TEAM = "alpha"
# Two groups of one type, the second half the first's size: a quarter share holds one node of the first and none of
# the second. The program refuses a share below one node of some group, so the plan holds a half (one node of the
# second) and the case is made from it: a quota of one node of the first group, and the namespace's annotation of the
# second at none, as a quarter would write them.
BIG, SMALL = "trn1-32xl", "trn1-32xl-small"
GROUPS = [
    {"name": BIG, "instanceType": "trn1.32xlarge", "provisioning": "karpenter", "maxSize": 4},
    {"name": SMALL, "instanceType": "trn1.32xlarge", "provisioning": "karpenter", "maxSize": 2},
]
HALF = [{"name": TEAM, "neuronShare": 0.5, "principalArns": ["arn:aws:iam::111122223333:role/alpha-researchers"]}]


@pytest.fixture(scope="module")
def two_groups():
    return evaluate("staging", fixture=True, trainiumNodeGroups=GROUPS, teams=HALF)


def test_a_team_job_on_a_group_it_holds_no_node_of_is_refused_by_the_launcher(two_groups, tmp_path):
    outputs = json.loads(json.dumps(two_groups.outputs))
    contract = PlatformContract.from_outputs(outputs)
    (big,) = [group for group in contract.node_groups if group.name == BIG]
    (team,) = [team for team in outputs["teams"] if team["name"] == TEAM]
    one_node = {
        layout.NEURON_DEVICE_RESOURCE: big.neuron_devices_per_node,
        layout.NEURON_CORE_RESOURCE: big.neuron_cores_per_node,
        layout.EFA_RESOURCE: big.efa_interfaces_per_node,
    }
    team["quota"] = {resource: amount for resource, amount in one_node.items() if resource in team["quota"]}
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs))
    launch_on = ["jobs.launch", "--outputs", str(path), "--team", TEAM, "--dryrun", "--json", "--node-group"]
    one_line(run_module(*launch_on, SMALL), f"--team {TEAM} --node-group {SMALL}", f"no node of {SMALL}", BIG, "neuronShare")
    held = run_module(*launch_on, BIG)
    assert held.returncode == 0, held.stderr
    assert job_nodes(json.loads(held.stdout)) == 1  # the one node of the first group its quota holds


def test_a_team_job_on_a_group_it_holds_no_node_of_is_refused_at_admission(two_groups):
    """The team's BERT job on the second group, as the launcher builds it where the team holds one node there, is
    refused, with its pods, in a namespace that says the team holds none."""
    contract = PlatformContract.from_outputs(json.loads(json.dumps(two_groups.outputs))).for_team(TEAM)
    job = bert_job.volcano_job(contract, launch.JobRequest(name="berttrain", node_group=SMALL))
    bindings = {
        b.inputs["spec"]["policyName"]: manifest(b) for b in two_groups.find(tokens.K8S_VALIDATING_ADMISSION_POLICY_BINDING)
    }
    declared = map(manifest, two_groups.find(tokens.K8S_VALIDATING_ADMISSION_POLICY))
    policies = [Policy(policy, bindings[policy["metadata"]["name"]]) for policy in declared]
    namespace = team_namespace(two_groups, TEAM)

    def refused_by(held: dict) -> dict[str, set[str]]:
        """The policies that refuse the job and what Volcano creates for it, by kind, in the namespace ``held``."""
        refused: dict[str, set[str]] = {}
        for kind, obj in workloads(job):
            refused.setdefault(kind.kind, set()).update(p.name for p in policies if p.refusals(Request(kind, obj, held)))
        return refused

    assert refused_by(namespace) == {"Job": set(), "PodGroup": set(), "Pod": set()}  # the half holds one node of it
    none_held = copy.deepcopy(namespace)
    none_held["metadata"]["annotations"][GROUP_NODES_ANNOTATION + SMALL] = "0"
    assert refused_by(none_held) == {
        "Job": {"trainium-eks-team-volcano-job-share"},
        "PodGroup": set(),
        "Pod": {"trainium-eks-team-pods-node-group"},
    }
