"""Each way a run is disrupted, as `jobs.rehearsal --disruption KIND` does it to the job's agents: what reaches the
pods is what Karpenter's termination path sends them (``trainium_eks.karpenter_termination``, on a pool as the
platform writes it) or what the kubelet or a crash does, and Volcano release-1.15's lifecycle then restarts or ends
the job (``jobs.rehearsal.volcano_lifecycle``). ``--disruptions`` rehearses every kind and prints one table.

- a drain (a Capacity Block's end, ``kubectl drain``, a repair): SIGTERM to every agent, as the kubelet sends it to
  a deleted pod's PID 1, and SIGKILL once the time the model gives the pod runs out (its grace period; a repair's
  1 s; a checkpoint that overruns the grace period: none);
- the instance gone first (an interruption's two minutes on the platform's pools, a lost node): SIGKILL to every
  process at once, and the pods failed with no exit code, as the pod garbage collector fails them;
- a crash: a worker SIGKILLed (``--kill-at``), or a worker crashing at every start (``--crash-at-start``);
- a node Karpenter keeps (consolidation of an empty node, drift): the run goes on untouched.

Targets (``Target``): no step lost where the pods were warned, at most one checkpoint interval where they were not,
a crash loop Terminated within its budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from jobs.rehearsal.report import NODE_DISRUPTIONS, Outcome
from trainium_eks import karpenter_termination as kt

Way = Literal["drain", "lose", "crash", "crash-loop", "keep"]
# The rows of the table, in its order: what is done at a step (Karpenter's ways a node goes, a drain overrun, a lost
# node), then the crashes, which --kill-at and --crash-at-start do.
KINDS = (*get_args(NODE_DISRUPTIONS), "process-crash", "crash-loop")


@dataclass(frozen=True)
class Action:
    """What the rehearsal does to the running agents for a kind of disruption, and why."""

    way: Way
    kill_after: float = 0.0  # a drain: seconds from SIGTERM to SIGKILL
    why: str = ""
    warned: bool = False  # the pods had their whole grace period, or the node was kept: no step may be lost


def action_for(kind: str, grace_seconds: int, capacity_block: bool) -> Action:
    """What ``kind`` does to pods with ``grace_seconds`` on the platform's pool of a group (in a Capacity Block or
    not; a block's expiry always on a block's pool)."""
    if kind == "checkpoint-overrun":
        return Action("drain", 0.0, "SIGTERM, then SIGKILL before the checkpoint is written (the grace period overrun)")
    if kind == "process-crash":
        return Action("crash", why="a worker SIGKILLed, as an OOM kill would")
    if kind == "crash-loop":
        return Action("crash-loop", why="a worker crashes at every start")
    pool = kt.platform_pool(capacity_block or kind == "capacity-block-expiry")
    fate = kt.pod_fate(kt.DISRUPTIONS[kind], pool, grace_seconds, do_not_disrupt=True)
    if not fate.node_taken:
        return Action("keep", why="Karpenter takes no node a training pod runs on", warned=True)
    if fate.sigterm_after is None:
        return Action("lose", why="the instance ends before the pods get SIGTERM")
    return Action("drain", fate.drain_seconds, f"SIGTERM, SIGKILL {fate.drain_seconds:g} s later", fate.drained_in_full)


@dataclass(frozen=True)
class Row:
    """One disruption's line of the table: what the pods met, the steps it cost, the job's phase right after it,
    and the time from the disruption to the next step trained; ``run`` is its rehearsal's whole outcome."""

    kind: str
    action: Action
    steps_lost: int | None
    phase_after: str
    seconds_to_next_step: float | None
    checkpoint_every: int
    run: Outcome

    def to_json(self) -> dict:
        return {
            "disruption": self.kind,
            "podsMeet": self.action.why,
            "stepsLost": self.steps_lost,
            "phaseAfter": self.phase_after,
            "secondsToNextStep": self.seconds_to_next_step,
            "target": self.target,
            "met": self.met,
            "run": self.run.to_json(),
        }

    @property
    def target(self) -> str:
        if self.action.way == "crash-loop":
            return "Terminated within its budget"
        return "0 steps lost" if self.action.warned else f"at most {self.checkpoint_every} steps lost"

    @property
    def met(self) -> bool:
        if self.action.way == "crash-loop":
            return self.phase_after == "Terminated"
        if self.steps_lost is None:
            return False
        return self.steps_lost <= (0 if self.action.warned else self.checkpoint_every)


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table (README shows it as measured)."""
    lines = [
        "| disruption | what the pods meet | steps lost | job phase after | time to the next step | target |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lost = "-" if row.steps_lost is None else str(row.steps_lost)
        seconds = "-" if row.seconds_to_next_step is None else f"{row.seconds_to_next_step:.1f} s"
        met = "met" if row.met else "MISSED"
        lines.append(f"| {row.kind} | {row.action.why} | {lost} | {row.phase_after} | {seconds} | {row.target}: {met} |")
    return "\n".join(lines)
