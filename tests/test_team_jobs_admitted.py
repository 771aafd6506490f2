"""Every job the launcher and the acceptance checks accept for a team is one its quota, its queue and its namespace's
admission policies admit, and every job they refuse for the team's room is one of those would refuse: on every shipped
and fixture stack with teams, for every team, Trainium group and workload, against the plan's own ResourceQuota,
Queue and ValidatingAdmissionPolicy objects, counted as the API server and Volcano count them (``quota_admission`` and
the policies' CEL, ``admission_review``: oracles apart from ``jobs.job_building.capacity``)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import pytest
from admission_review import Kind, Policy, Request
from admitted_workloads import workloads
from quota_admission import pods_created, queue_refusals, quota_refusals
from support import FIXTURE_STACKS, STACKS, cached_plan, manifest, run_preflight, settings

from jobs import acceptance, launch
from preflight import planfile
from preflight.team_jobs import largest_team_jobs
from trainium_eks import layout, tokens
from trainium_eks.config import parse
from trainium_eks.contract import PlatformContract

QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
BATCH_JOB = Kind("batch", "v1", "Job", "jobs")
TOOLS = {"jobs.launch": launch.main, "jobs.acceptance": acceptance.main}
# Every workload the tools accept a team's job of: BERT and TorchTitan (where the group's backend runs it), each check.
WORKLOADS = (
    ("jobs.launch", ("--workload", "bert")),
    ("jobs.launch", ("--workload", "torchtitan")),
    *(("jobs.acceptance", (check,)) for check in acceptance.CHECKS),
)
# The workloads whose node count --nodes sets (the others take the nodes their check needs).
SIZED_BY_NODES = {("jobs.launch", ("--workload", "bert")), ("jobs.acceptance", ("neuron-devices",))}
ROOM = 10**6  # a quota and capability no job of these stacks reaches


def _config(stack: str, fixture: bool):
    return parse(settings(stack, fixture=fixture).config, stack=stack)


STACKS_WITH_TEAMS = [
    (stack, fixture)
    for fixture in (False, True)
    for stack in (STACKS if not fixture else sorted(p.stem.removeprefix("Pulumi.") for p in FIXTURE_STACKS.glob("Pulumi.*.yaml")))
    if _config(stack, fixture).scheduling.teams
]
CASES = [
    pytest.param(stack, fixture, team.name, group.name, id=f"{'fixture-' if fixture else ''}{stack}-{team.name}-{group.name}")
    for stack, fixture in STACKS_WITH_TEAMS
    for team in _config(stack, fixture).scheduling.teams
    for group in _config(stack, fixture).trainium_node_groups
]


@pytest.fixture(scope="module")
def plan_of():
    """Each stack's plan, built once for the module."""
    plans = {}

    def plan(stack: str, fixture: bool):
        if (stack, fixture) not in plans:
            plans[stack, fixture] = cached_plan(stack, False, fixture)
        return plans[stack, fixture]

    return plan


@dataclass(frozen=True)
class TeamObjects:
    """What admits a team's job, as the plan sends it to the API server: the team's ResourceQuota and Volcano Queue,
    its Namespace, and the admission policies bound in team namespaces."""

    quota: dict
    queue: dict
    namespace: dict
    policies: dict[str, Policy]


def team_objects(plan, team: dict) -> TeamObjects:
    (quota,) = [
        manifest(r) for r in plan.find(tokens.K8S_RESOURCE_QUOTA) if r.inputs["metadata"]["namespace"] == team["namespace"]
    ]
    (queue,) = [manifest(r) for r in plan.find(QUEUE) if r.inputs["metadata"]["name"] == team["queue"]]
    (namespace,) = [manifest(r) for r in plan.find(tokens.K8S_NAMESPACE) if r.inputs["metadata"]["name"] == team["namespace"]]
    bindings = {b.inputs["spec"]["policyName"]: manifest(b) for b in plan.find(tokens.K8S_VALIDATING_ADMISSION_POLICY_BINDING)}
    policies = [manifest(p) for p in plan.find(tokens.K8S_VALIDATING_ADMISSION_POLICY)]
    return TeamObjects(
        quota, queue, namespace, {p["metadata"]["name"]: Policy(p, bindings[p["metadata"]["name"]]) for p in policies}
    )


def with_room(outputs: dict) -> dict:
    """The outputs with every team's quota and every queue's capability beyond any job: what the tools build when
    nothing but the group bounds them."""
    roomy = copy.deepcopy(outputs)
    for team in roomy["teams"]:
        team["quota"] = dict.fromkeys(team["quota"], ROOM)
    for queue in roomy["volcanoQueues"]:
        queue["capability"] = dict.fromkeys(queue["capability"], ROOM)
    return roomy


def run(capsys, module: str, argv: list[str]) -> tuple[int, object, str]:
    """The tool as a user runs it, in this process (its exit status, the manifest it prints, its stderr)."""
    capsys.readouterr()
    status = TOOLS[module](argv)
    out, err = capsys.readouterr()
    return status, json.loads(out) if status == 0 else None, err


def refusals(job: dict, held: TeamObjects) -> dict:
    """What the team's quota refuses of ``job``'s pods, its queue of those Volcano schedules, and each admission policy
    (by name) of the job and what its controllers create."""
    pods = pods_created(job)
    assert {pod["metadata"]["namespace"] for pod in pods} == {held.quota["metadata"]["namespace"]}
    on_volcano = [pod for pod in pods if pod["spec"]["schedulerName"] == layout.VOLCANO_SCHEDULER]
    if job["apiVersion"] == "batch/v1":
        queues = {pod["metadata"]["annotations"].get(layout.VOLCANO_QUEUE_ANNOTATION) for pod in on_volcano}
    else:
        queues = {job["spec"]["queue"]}
    assert not on_volcano or queues == {held.queue["metadata"]["name"]}, queues
    submitted = [(BATCH_JOB, job)] if job["apiVersion"] == "batch/v1" else []  # workloads() gives a batch Job's pods
    admission = {
        name: messages
        for kind, obj in [*submitted, *workloads(job)]
        for name, policy in held.policies.items()
        if (messages := policy.refusals(Request(kind, obj, held.namespace)))
    }
    return {**quota_refusals(pods, held.quota), **queue_refusals(on_volcano, held.queue), **admission}


def named(refused: dict, held: TeamObjects, group: str) -> list[str]:
    """What a one-line refusal names of ``refused``: a quota's or queue's resource, the group for an admission policy."""
    resources = [key.removeprefix("requests.") for key in refused if key not in held.policies]
    return resources + ([f"of {group}"] if set(refused) & set(held.policies) else [])


@pytest.mark.stacks
@pytest.mark.parametrize(("stack", "fixture", "team_name", "group_name"), CASES)
def test_every_team_job_the_tools_accept_is_admitted_and_one_node_more_is_refused(
    stack, fixture, team_name, group_name, plan_of, tmp_path, capsys
):
    plan = plan_of(stack, fixture)
    (team,) = [team for team in plan.outputs["teams"] if team["name"] == team_name]
    held = team_objects(plan, team)
    contract = PlatformContract.from_outputs(plan.outputs)
    (group,) = [group for group in contract.node_groups if group.name == group_name]
    ceiling = contract.node_ceiling(group)
    paths = {}
    for name, outputs in (("outputs", plan.outputs), ("roomy", with_room(plan.outputs))):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(outputs))
    admitted, largest = 0, {}
    for module, args in WORKLOADS:
        accepted = []
        for nodes in (None, *range(1, ceiling + 2)):
            argv = [*args, "--team", team_name, "--node-group", group_name, "--dryrun", "--json"]
            argv += [] if nodes is None else ["--nodes", str(nodes)]
            status, job, err = run(capsys, module, [*argv, "--outputs", str(paths["outputs"])])
            case = f"{module} {' '.join(argv)}"
            if status == 0:
                assert refusals(job, held) == {}, f"{case}: accepted, but the API server or Volcano refuses it"
                accepted.append(nodes)
                admitted += 1
                continue
            assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, (case, err)
            roomy_status, roomy_job, _ = run(capsys, module, [*argv, "--outputs", str(paths["roomy"])])
            if roomy_status == 0:  # refused for the team's room alone: the quota, queue or admission must refuse it
                refused = refusals(roomy_job, held)
                assert refused, f"{case}: refused, but the team's quota, queue and admission policies admit it"
                assert any(word in err for word in named(refused, held, group_name)), (case, err, refused)
            elif (module, args) in SIZED_BY_NODES and nodes is not None:
                assert nodes > ceiling, f"{case}: refused within the group for no quota or queue: {err}"
        if (module, args) in SIZED_BY_NODES:
            # the largest it accepts, and none past it: one node more is refused (above), in one line
            sized = sorted(n for n in accepted if n is not None)
            largest[args] = max(sized, default=0)
            assert sized == list(range(1, largest[args] + 1)), (module, args, accepted)
    assert admitted, f"no job of team {team_name} on {group_name} was accepted and checked"
    # `preflight plan` says what the launcher accepts: its largest BERT job, and what stops one node more
    (planned,) = [
        entry
        for team_jobs in largest_team_jobs(plan.outputs)["teams"]
        if team_jobs["team"] == team_name
        for entry in team_jobs["groups"]
        if entry["group"] == group_name
    ]
    assert planned["nodes"] == largest["--workload", "bert"], planned
    assert planned["workers"] == planned["nodes"] * group.neuron_cores_per_node
    assert (planned["limitedBy"] is None) == (planned["nodes"] == ceiling), planned


@pytest.mark.stacks
def test_every_stack_with_teams_has_a_team_job_to_check():
    assert STACKS_WITH_TEAMS, "no shipped or fixture stack declares teams: the test above checks nothing"
    for stack, fixture in STACKS_WITH_TEAMS:
        assert any(case.values[:2] == (stack, fixture) for case in CASES), (stack, fixture)


def test_the_issues_staging_case_runs_within_the_quota_or_is_refused_naming_the_resource(plan_of, tmp_path, capsys):
    """`jobs.launch --team nlp --node-group trn2-48xl` (BERT or TorchTitan) and `jobs.acceptance all` there, as the
    issue names them (so not among the tests a user's edited stacks run): on staging as shipped, the real API server
    refused one pod of each with `exceeded quota: neuron, requested: requests.vpc.amazonaws.com/efa=16, used: ...=16,
    limited: ...=24` (issue 36)."""
    plan = plan_of("staging", False)
    (team,) = [team for team in plan.outputs["teams"] if team["name"] == "nlp"]
    held = team_objects(plan, team)
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(plan.outputs))
    where = ["--outputs", str(path), "--team", "nlp", "--node-group", "trn2-48xl", "--dryrun", "--json"]
    for workload in ("bert", "torchtitan"):
        status, job, err = run(capsys, "jobs.launch", ["--workload", workload, *where])
        if status == 0:
            assert refusals(job, held) == {}, workload
        else:
            assert status == 2 and err.count("\n") == 1, err
            assert any(key.removeprefix("requests.") in err for key in held.quota["spec"]["hard"]), err
    status, manifests, err = run(capsys, "jobs.acceptance", ["all", *where])
    assert status == 0, err
    for job in manifests if isinstance(manifests, list) else [manifests]:
        assert refusals(job, held) == {}, job["metadata"]["name"]


@pytest.mark.stacks
def test_plan_prints_each_teams_largest_job_per_group_and_its_json_carries_it(plan_of, tmp_path):
    plan = plan_of("staging", False)
    as_json = run_preflight("plan", "staging", "--json")
    assert as_json.returncode == 0, as_json.stderr
    saved = tmp_path / "plan.json"
    saved.write_text(as_json.stdout)
    carried = json.loads(as_json.stdout)["teamJobs"]
    assert carried == largest_team_jobs(plan.outputs) and planfile.read(saved).team_jobs is not None
    lines = run_preflight("plan", "staging").stdout.splitlines()
    for team in carried["teams"]:
        start = next(i for i, line in enumerate(lines) if line.startswith(f"Largest job of team {team['team']} "))
        section = lines[start + 1 : start + 1 + len(team["groups"])]
        for group in team["groups"]:
            (line,) = [line for line in section if line.strip().startswith(f"{group['group']} (")]
            assert f"{group['nodes']} node" in line and f"{group['workers']} worker" in line, line
            assert group["limitedBy"] is None or (group["resource"] in line and group["limitedBy"] in line), line
    assert {team["team"] for team in carried["teams"]} == {team["name"] for team in plan.outputs["teams"]}
