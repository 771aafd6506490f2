"""`jobs.rehearsal --disruptions`: every kind of disruption (``jobs.rehearsal.disruptions.KINDS``) rehearsed once on
the stack's own job, a run of its own each, and one table of what each cost: the steps lost, the job's phase after
it, the time to the next step, against its target."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from jobs.errors import LaunchError
from jobs.job_building.capacity import choose_node_group
from jobs.job_building.capacity_blocks import in_capacity_block
from jobs.job_building.grace_period import pod_grace_seconds
from jobs.rehearsal.disruptions import KINDS, Row, action_for
from jobs.rehearsal.report import CHECKPOINT_EVERY, Outcome, RehearsalRequest, crash_loop_refusal
from jobs.rehearsal.run import rehearsal_job, rehearse
from trainium_eks.contract import PlatformContract

# Each run trains past its first checkpoint, is disrupted two steps later, and trains on long enough (a tiny model
# trains a step in tens of milliseconds) that the disruption lands mid-run.
DISRUPT_AT = CHECKPOINT_EVERY + 2
STEPS = DISRUPT_AT + 13


def request_for(kind: str, base: RehearsalRequest) -> RehearsalRequest:
    """The rehearsal of ``kind`` on ``base``'s job: a crash is --kill-at or --crash-at-start, the rest --disruption."""
    common = base.model_dump(include={"workload", "nodes", "workers_per_node", "node_group", "etcd_members", "timeout"})
    if kind == "process-crash":
        return RehearsalRequest(**common, steps=STEPS, kill_at=DISRUPT_AT)
    if kind == "crash-loop":
        if base.cpu_recipe().crash_at_start is None:
            raise LaunchError(f"--disruptions: its crash loop needs one; {crash_loop_refusal(base.workload)}")
        return RehearsalRequest(**common, steps=STEPS, crash_at_start=True)
    return RehearsalRequest(**common, steps=STEPS, drain_at=DISRUPT_AT, disruption=kind)


def row_of(kind: str, request: RehearsalRequest, result: Outcome, grace: int, capacity_block: bool) -> Row:
    """The table's line for ``kind`` from its run's outcome."""
    action = action_for(kind, grace, capacity_block)
    if action.way == "crash-loop":
        lost, phase, seconds = None, result.job_phase, None
    elif action.way == "crash":
        lost = len(result.steps_retrained) if result.killed_at_step is not None else None
        phase, seconds = result.phase_after_disruption or "Running", result.recovery_seconds
    elif action.way == "keep":
        untouched = result.passed and result.steps_trained == list(range(1, request.steps + 1))
        lost, phase, seconds = (0 if untouched else None), result.job_phase, None
    else:
        lost, phase, seconds = result.steps_lost, result.phase_after_disruption or "-", result.drain_to_step_seconds
    return Row(kind, action, lost, phase, seconds, CHECKPOINT_EVERY, result)


def rehearse_every_disruption(
    contract: PlatformContract, base: RehearsalRequest, workdir: Path, say: Callable[[str], None]
) -> list[Row]:
    """Each kind's run, in the table's order, in a directory of its own under ``workdir``."""
    rows = []
    for kind in KINDS:
        request = request_for(kind, base)
        job = rehearsal_job(contract, request)
        group = choose_node_group(contract, request.node_group)
        say(f"--- {kind}")
        result = rehearse(contract, request, job, workdir / kind, say)
        rows.append(row_of(kind, request, result, pod_grace_seconds(job), in_capacity_block(contract, group)))
    return rows
