"""What a plan says of each team's room on each Trainium group: the largest job of whole nodes the team can run there,
as `jobs.launch --team NAME --node-group GROUP` sizes its default job (``jobs.job_building.capacity.largest_admitted`` over what
the pod of the launcher's one-node job requests, ``jobs.job_building.capacity.whole_node_requests``, which tests check
against the job itself), against the team's whole nodes of the group (which its namespace's admission policies hold
it to), its quota and its queue as the stack's outputs publish them, and what stops one node more: a resource of one
of those, or the group's size. ``largest_team_jobs`` computes them once; ``plan --json`` carries them as ``teamJobs`` and the text
(``team_job_lines``) is printed from that same object."""

from __future__ import annotations

from jobs.job_building.capacity import largest_admitted, whole_node_requests
from preflight import planfile
from trainium_eks.contract import ContractError, PlatformContract
from trainium_eks.wording import counted

PREVIEW = "not known in a preview: the stack's outputs the launcher reads are not"


def _largest(contract: PlatformContract, group) -> planfile.TeamGroupJob:
    workers = group.neuron_cores_per_node  # the launcher's default: a worker per NeuronCore
    per_node = whole_node_requests(group)
    largest = largest_admitted(contract, group, per_node)
    bound = largest.bound
    return planfile.TeamGroupJob.record(
        group=group.name,
        instance_type=group.instance_type,
        nodes=largest.nodes,
        workers=largest.nodes * workers,
        # what stops one node more: None, the group's size
        limited_by=None if bound is None else bound.name,
        resource=largest.resource,
        per_node=None if bound is None else float(per_node[largest.resource]),
        admitted=None if bound is None else float(bound.limits[largest.resource]),
    )


def largest_team_jobs(outputs: dict) -> dict:
    """For each team the outputs declare, the largest job it can run on each Trainium group, as the plan file
    carries it."""
    try:
        contract = PlatformContract.from_outputs(outputs)
    except ContractError:
        return planfile.LargestTeamJobs.record(teams=(), not_known=PREVIEW if outputs.get("teams") else None).to_json()
    teams = tuple(_team_jobs(contract.for_team(team.name), team.name) for team in contract.teams)
    return planfile.LargestTeamJobs.record(teams=teams, not_known=None).to_json()


def _team_jobs(workspace: PlatformContract, team: str) -> planfile.TeamJobs:
    return planfile.TeamJobs.record(team=team, groups=tuple(_largest(workspace, group) for group in workspace.node_groups))


def team_job_lines(team_jobs: dict) -> list[str]:
    """Each team's largest job on each group, and what stops one node more."""
    if team_jobs["notKnown"]:
        return [f"Largest team jobs: {team_jobs['notKnown']}"]
    lines = []
    for team in team_jobs["teams"]:
        lines.append(f"Largest job of team {team['team']} (jobs.launch --team {team['team']}), by node group:")
        for group in team["groups"]:
            size = f"{counted(group['nodes'], 'node')}, {counted(group['workers'], 'worker')}"
            if group["limitedBy"] is None:
                limit = "as many as the group holds"
            else:
                limit = (
                    f"{group['resource']} limits it: {group['perNode']:g} a node, {group['limitedBy']} admits "
                    f"{group['admitted']:g}"
                )
            lines.append(f"    {group['group']} ({group['instanceType']}): {size}; {limit}")
    return lines
