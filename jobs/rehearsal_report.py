"""What `jobs.rehearsal` is asked (``RehearsalRequest``, the command line validated once) and what it reports: the
lines a user watches while it runs (``progress``) and the verdict on the run (``outcome``, ``Outcome``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveFloat, PositiveInt, StrictStr, model_validator

from jobs.local_agents import TINY_CPU_TRAINING

CHECKPOINT_EVERY = int(TINY_CPU_TRAINING["--checkpoint-every"])


class RehearsalRequest(BaseModel):
    """The command line, validated once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: Literal["bert", "torchtitan"] = "bert"
    nodes: PositiveInt = 2
    workers_per_node: PositiveInt = 2
    steps: PositiveInt = 40
    kill_at: PositiveInt | None = None
    drain_at: PositiveInt | None = None
    etcd_members: Literal[1, 3, 5] = 1
    node_group: StrictStr | None = None
    timeout: PositiveFloat = 900.0

    @model_validator(mode="after")
    def _interruption_within_the_run(self) -> RehearsalRequest:
        if self.kill_at is not None and self.drain_at is not None:
            raise ValueError("--kill-at and --drain-at: give one; each restarts the job, and a run rehearses one restart")
        if self.kill_at is not None and self.kill_at <= CHECKPOINT_EVERY:
            raise ValueError(
                f"--kill-at {self.kill_at}: the first checkpoint is written at step {CHECKPOINT_EVERY}; "
                f"kill after it (--kill-at {CHECKPOINT_EVERY + 1} or more) to see training resume from it"
            )
        for flag, step, verb in (("--kill-at", self.kill_at, "kill"), ("--drain-at", self.drain_at, "drain")):
            if step is not None and step >= self.steps:
                raise ValueError(f"{flag} {step}: the run ends at step {self.steps}; {verb} before it or raise --steps")
        return self


@dataclass(frozen=True)
class DrainEvent:
    """The SIGTERM `jobs.rehearsal --drain-at` sent the agents, and how they went."""

    sent_at: float  # time.time() of the SIGTERM
    after_step: int  # the newest step in the metrics when it was sent
    grace_seconds: int  # the pods' grace period: agents still running after it were killed, as the kubelet does
    exit_seconds: float  # from the SIGTERM to the last agent's exit
    killed: bool  # some agent outlived the grace period


@dataclass(frozen=True)
class Outcome:
    """What a rehearsal showed; ``passed`` is the verdict."""

    nodes: int
    workers_per_node: int
    steps_wanted: int
    steps_trained: list[int]  # the step of every record, in order (a restart repeats steps after its checkpoint)
    first_loss: float | None
    last_loss: float | None
    agents_exit: list[int]  # of the last agents started (after a drain, the restarted job's)
    first_step_seconds: float | None  # from starting the agents
    kill_at: int | None = None  # the step --kill-at asked for
    killed_at_step: int | None = None  # the last step trained before the restart
    checkpoint_at_kill: int | None = None  # the newest checkpoint on the volume when the worker was killed
    resumed_from: int | None = None  # the checkpoint the restarted workers loaded
    steps_retrained: list[int] = field(default_factory=list)  # steps trained before the kill, and again after it
    recovery_seconds: float | None = None  # from the killed step's record to the first step trained again
    drain_at: int | None = None  # the step --drain-at asked for
    drain: DrainEvent | None = None
    drained_at_step: int | None = None  # the last step trained before the drained job restarted
    steps_lost: int | None = None  # steps trained before the drain that the resumed job trains again
    drain_to_step_seconds: float | None = None  # from the SIGTERM to the first step trained after the restart

    @property
    def problem(self) -> str | None:
        """Why the rehearsal failed, or None."""
        if any(self.agents_exit):
            return f"an agent exited with {max(self.agents_exit)}"
        if self.drain_at is not None and self.drain is None:
            return f"the agents ended before step {self.drain_at}, so no drain was rehearsed"
        if self.drain is not None and self.drain.killed:
            return f"an agent outlived the {self.drain.grace_seconds} s grace period after SIGTERM and was killed"
        if not self.steps_trained or self.steps_trained[-1] != self.steps_wanted:
            return f"training stopped at step {self.steps_trained[-1] if self.steps_trained else 0} of {self.steps_wanted}"
        if self.drain is not None:
            return self._drain_problem()
        if self.kill_at is None:
            return None
        if self.killed_at_step is None:
            return f"training never restarted after the kill at step {self.kill_at}"
        if self.killed_at_step != self.kill_at:
            return f"the worker was killed after step {self.killed_at_step}, not at step {self.kill_at}"
        if self.resumed_from != self.checkpoint_at_kill:
            return f"training restarted from step {self.resumed_from}, not from checkpoint-{self.checkpoint_at_kill}"
        return None

    def _drain_problem(self) -> str | None:
        if self.drained_at_step is None:
            return f"training never restarted after the SIGTERM after step {self.drain.after_step}"
        if self.drained_at_step < self.drain.after_step:
            return f"the workers stopped after step {self.drained_at_step}, before the SIGTERM after step {self.drain.after_step}"
        if self.steps_lost:
            return (
                f"{self.steps_lost} steps lost: the workers stopped after step {self.drained_at_step}, "
                f"the job resumed from checkpoint-{self.resumed_from}"
            )
        return None

    @property
    def passed(self) -> bool:
        return self.problem is None

    def summary(self) -> str:
        lines = [
            f"trained {self.steps_wanted} steps on {self.nodes} nodes x {self.workers_per_node} workers; "
            f"loss {self.first_loss:.3f} -> {self.last_loss:.3f}"
            if self.first_loss is not None
            else "no step trained"
        ]
        if self.killed_at_step is not None and self.recovery_seconds is not None:
            lines.append(
                f"killed a worker at step {self.killed_at_step}; resumed from checkpoint-{self.resumed_from} "
                f"in {self.recovery_seconds:.1f} s; {retrained(self.steps_retrained)}"
            )
        if self.drain is not None and self.drained_at_step is not None and self.drain_to_step_seconds is not None:
            lines.append(
                f"drained after step {self.drained_at_step} (SIGTERM after step {self.drain.after_step}): the agents "
                f"exited in {self.drain.exit_seconds:.1f} s of a {self.drain.grace_seconds} s grace period; resumed "
                f"from checkpoint-{self.resumed_from}, next step {self.drain_to_step_seconds:.1f} s after the "
                f"SIGTERM; {self.steps_lost} steps lost"
            )
        lines.append("PASSED" if self.passed else f"FAILED: {self.problem}")
        return "\n".join(lines)


def retrained(steps: list[int]) -> str:
    if not steps:
        return "no step trained again"
    return f"step {steps[0]} trained again" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]} trained again"


def checkpoints(output_dir: Path) -> list[int]:
    """The steps of the checkpoints on the volume."""
    names = (path.name.split("-", 1)[1] for path in output_dir.glob("checkpoint-*"))
    return sorted(int(name) for name in names if name.isdigit())


def restarted(records: list[dict], index: int) -> bool:
    """Whether ``records[index]`` is the first of a restarted run: its step goes back, or it resumed elsewhere."""
    if index == 0:
        return False
    before, record = records[index - 1], records[index]
    return record["step"] <= before["step"] or record["resumed_from"] != before["resumed_from"]


def first_restart(records: list[dict]) -> int | None:
    return next((index for index in range(len(records)) if restarted(records, index)), None)


def progress(records: list[dict], start: int, request: RehearsalRequest) -> Iterator[str]:
    """The lines a user watches for ``records[start:]``: each step's loss, the kill, and where the restart resumed."""
    restart = first_restart(records)
    for index in range(start, len(records)):
        record = records[index]
        resumed = f" (resumed from checkpoint-{record['resumed_from']})" if restarted(records, index) else ""
        yield f"step {record['step']}/{request.steps} loss {record['loss']:.3f}{resumed}"
        if record["step"] == request.kill_at and (restart is None or index < restart):
            rank = request.nodes * request.workers_per_node - 1
            yield f"killing worker rank {rank} after step {record['step']}, as an OOM kill would (--kill-at)"


def outcome(
    request: RehearsalRequest,
    records: list[dict],
    exits: list[int],
    started_at: float,
    saved: Iterable[int],
    drain: DrainEvent | None = None,
) -> Outcome:
    """The verdict on a run's records, its agents' exit codes, the checkpoints ``saved`` on the volume and the
    ``drain`` sent, if any."""
    losses = [record["loss"] for record in records]
    restart = first_restart(records) if request.kill_at is not None or drain is not None else None
    interrupted = {}
    if restart is not None:
        before, resumed = records[restart - 1], records[restart]
        interrupted = {"resumed_from": resumed["resumed_from"]}
        if drain is None:
            interrupted |= {
                "killed_at_step": before["step"],
                "checkpoint_at_kill": max((step for step in saved if step <= before["step"]), default=0),
                "steps_retrained": [record["step"] for record in records[restart:] if record["step"] <= before["step"]],
                "recovery_seconds": resumed["time"] - before["time"],
            }
        else:
            interrupted |= {
                "drained_at_step": before["step"],
                "steps_lost": before["step"] - resumed["resumed_from"],
                "drain_to_step_seconds": resumed["time"] - drain.sent_at,
            }
    return Outcome(
        nodes=request.nodes,
        workers_per_node=request.workers_per_node,
        steps_wanted=request.steps,
        steps_trained=[record["step"] for record in records],
        first_loss=losses[0] if losses else None,
        last_loss=losses[-1] if losses else None,
        agents_exit=exits,
        first_step_seconds=records[0]["time"] - started_at if records else None,
        kill_at=request.kill_at,
        drain_at=request.drain_at,
        drain=drain,
        **interrupted,
    )
