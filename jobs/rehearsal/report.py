"""What `jobs.rehearsal` is asked (``RehearsalRequest``, the command line validated once) and what it reports: the
lines a user watches while it runs (``progress``) and the verdict on the run and on its Volcano Job (``outcome``,
``Outcome``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveFloat, PositiveInt, StrictStr, field_validator, model_validator

from jobs.rehearsal.local_agents import TINY_CPU_TRAINING
from jobs.rehearsal.volcano_lifecycle import JobStatus
from jobs.workloads import registry
from trainium_eks.karpenter_termination import DISRUPTIONS

KEPT_NODES = tuple(name for name, disruption in DISRUPTIONS.items() if disruption.voluntary_reason)

# The disruptions done at a step (``jobs.rehearsal.disruptions.KINDS`` but the crashes, which --kill-at and
# --crash-at-start do).
NODE_DISRUPTIONS = Literal[
    "capacity-block-expiry",
    "interruption",
    "node-repair",
    "consolidation",
    "manual-drain",
    "checkpoint-overrun",
    "hard-node-loss",
]

CHECKPOINT_EVERY = int(TINY_CPU_TRAINING["--checkpoint-every"])


def rehearsed_workloads() -> tuple[str, ...]:
    """The registered workloads that declare a CPU recipe (``jobs.workloads.registry``)."""
    return tuple(name for name, workload in registry.workloads().items() if workload.rehearsal is not None)


def crash_loop_refusal(workload: str) -> str:
    """Why ``workload``'s run cannot crash at every start, and the workloads whose can."""
    able = [name for name in rehearsed_workloads() if registry.workloads()[name].cpu_recipe().crash_at_start]
    return f"--workload {workload}'s training script has no way to fail at every start; use --workload {' or '.join(able)}"


class RehearsalRequest(BaseModel):
    """The command line, validated once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload: StrictStr = next(iter(registry.workloads()))  # a registered workload with a CPU recipe; the first
    nodes: PositiveInt = 2
    workers_per_node: PositiveInt = 2
    steps: PositiveInt = 40
    kill_at: PositiveInt | None = None
    drain_at: PositiveInt | None = None
    drains: PositiveInt = 1  # with drain_at: this many drains, each once drain_at steps trained since the last resume
    crash_at_start: bool = False
    # A way a node goes or a drain overruns (``jobs.rehearsal.disruptions``), done to the agents at --drain-at.
    disruption: NODE_DISRUPTIONS | None = None
    etcd_members: Literal[1, 3, 5] | None = None  # None: the stack's etcdMembers
    node_group: StrictStr | None = None
    timeout: PositiveFloat = 900.0

    @field_validator("workload")
    @classmethod
    def _rehearsed(cls, name: str) -> str:
        if name not in rehearsed_workloads():
            raise ValueError(f"no CPU recipe for it; choose one of {', '.join(rehearsed_workloads())}")
        return name

    def cpu_recipe(self):
        """Its workload's CPU recipe (``jobs.rehearsal.cpu_workloads.RehearsedWorkload``)."""
        return registry.workloads()[self.workload].cpu_recipe()

    @model_validator(mode="after")
    def _interruption_within_the_run(self) -> RehearsalRequest:
        asked = [flag for flag, given in (("--kill-at", self.kill_at), ("--drain-at", self.drain_at)) if given is not None]
        asked += ["--crash-at-start"] if self.crash_at_start else []
        if len(asked) > 1:
            raise ValueError(f"{' and '.join(asked)}: give one; a run rehearses one kind of interruption")
        if self.crash_at_start and self.cpu_recipe().crash_at_start is None:
            raise ValueError(f"--crash-at-start: {crash_loop_refusal(self.workload)}")
        if self.disruption is not None and self.drain_at is None:
            raise ValueError(f"--disruption {self.disruption}: give --drain-at STEP too, the step it comes after")
        if self.drains > 1 and self.drain_at is None:
            raise ValueError(f"--drains {self.drains}: give --drain-at STEP too, the steps trained between drains")
        for flag, step, verb in (("--kill-at", self.kill_at, "kill"), ("--drain-at", self.drain_at, "drain")):
            if step is not None and step >= self.steps:
                raise ValueError(f"{flag} {step}: the run ends at step {self.steps}; {verb} before it or raise --steps")
        if self.drain_at is not None and self.drain_at * self.drains >= self.steps:
            raise ValueError(
                f"--drains {self.drains}: {self.drains} drains --drain-at {self.drain_at} steps apart need more than "
                f"{self.drain_at * self.drains} steps, and the run ends at step {self.steps}; raise --steps or lower --drains"
            )
        if self.kill_at is not None and self.kill_at <= CHECKPOINT_EVERY:
            raise ValueError(
                f"--kill-at {self.kill_at}: the first checkpoint is written at step {CHECKPOINT_EVERY}; "
                f"kill after it (--kill-at {CHECKPOINT_EVERY + 1} or more) to see training resume from it"
            )
        return self

    def drain_due(self, drained: int) -> bool:
        """Whether a drain (or a --disruption) is still to come once ``drained`` were sent: none for a disruption
        Karpenter never does to a node a job runs on, whose run goes on untouched."""
        return self.drain_at is not None and drained < self.drains and self.disruption not in KEPT_NODES


@dataclass(frozen=True)
class DrainEvent:
    """The SIGTERM `jobs.rehearsal --drain-at` sent the agents, and how they went."""

    sent_at: float  # time.time() of the SIGTERM
    after_step: int  # the newest step in the metrics when it was sent
    grace_seconds: int  # the pods' grace period: agents still running after it were killed, as the kubelet does
    exit_seconds: float  # from the SIGTERM to the last agent's exit
    killed: bool  # some agent outlived the grace period


@dataclass(frozen=True)
class JobRun:
    """How the rehearsed Volcano Job ended under its lifecycle, its maxRetry, torchrun's --max-restarts in it and the
    job restarts after crashes in a row its agents allow (``training.crash_budget``)."""

    status: JobStatus
    max_retry: int
    crash_budget: int
    crash_restarts: int


@dataclass(frozen=True)
class Outcome:
    """What a rehearsal showed; ``passed`` is the verdict."""

    nodes: int
    workers_per_node: int
    steps_wanted: int
    steps_trained: list[int]  # the step of every record, in order (a restart repeats steps after its checkpoint)
    first_loss: float | None
    last_loss: float | None
    agents_exit: list[int]  # of the last agents started (after a restart, the restarted job's)
    first_step_seconds: float | None  # from starting the agents
    # The Volcano Job as its lifecycle left it (``jobs.rehearsal.volcano_lifecycle``): its phase, retryCount and maxRetry.
    job_phase: str = "Completed"
    job_retry_count: int = 0
    job_max_retry: int = 0
    kill_at: int | None = None  # the step --kill-at asked for
    killed_at_step: int | None = None  # the last step trained before the restart
    checkpoint_at_kill: int | None = None  # the newest checkpoint on the volume when the worker was killed
    resumed_from: int | None = None  # the checkpoint the (first) restarted workers loaded
    steps_retrained: list[int] = field(default_factory=list)  # steps trained before the kill, and again after it
    recovery_seconds: float | None = None  # from the killed step's record to the first step trained again
    drain_at: int | None = None  # the steps --drain-at asked between drains
    drains_wanted: int = 0
    drains: list[DrainEvent] = field(default_factory=list)
    drained_at_step: int | None = None  # the last step trained before the first drained job restarted
    steps_lost: int | None = None  # steps trained before a drain that the resumed job trains again, all drains'
    drain_to_step_seconds: float | None = None  # from the first SIGTERM to the first step trained after its restart
    disruption: str | None = None  # --disruption: the kind done at --drain-at
    steps_allowed: int = 0  # steps a disruption may cost: 0 where the pods were warned, else a checkpoint interval
    phase_after_disruption: str | None = None  # the job's phase once Volcano saw the first disruption's pods end
    crash_budget: int | None = None  # --crash-at-start: torchrun's --max-restarts in the job
    crash_restarts: int | None = None  # --crash-at-start: the job restarts after crashes in a row its agents allow
    worker_starts: int | None = None  # --crash-at-start: the times the workers started (and crashed)

    @property
    def problem(self) -> str | None:
        """Why the rehearsal failed, or None."""
        if self.crash_budget is not None:
            return self._crash_problem()
        if self.job_phase not in ("Completed", "Running"):  # Running: the run was stopped, judged by its steps below
            return f"Volcano left the job {self.job_phase} (retryCount {self.job_retry_count} of maxRetry {self.job_max_retry})"
        if any(self.agents_exit):
            return f"an agent exited with {max(self.agents_exit)}"
        if len(self.drains) < self.drains_wanted:
            return f"the agents ended before drain {len(self.drains) + 1} of {self.drains_wanted} was due"
        killed = [drain for drain in self.drains if drain.killed and self.disruption is None]  # a disruption's kill is its own
        if killed:
            return f"an agent outlived the {killed[0].grace_seconds} s grace period after SIGTERM and was killed"
        if not self.steps_trained or self.steps_trained[-1] != self.steps_wanted:
            return f"training stopped at step {self.steps_trained[-1] if self.steps_trained else 0} of {self.steps_wanted}"
        if self.drains:
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

    def _crash_problem(self) -> str | None:
        if self.job_phase != "Terminated":
            return f"the job crashing at every start ended {self.job_phase}, not Terminated"
        allowed = (self.crash_budget + 1) * (self.crash_restarts + 1)
        if self.worker_starts != allowed or self.job_retry_count != self.crash_restarts:
            return (
                f"the workers started {self.worker_starts} times in {self.job_retry_count + 1} job runs; torchrun's "
                f"--max-restarts={self.crash_budget} in each of {self.crash_restarts + 1} allows {allowed}"
            )
        return None

    def _drain_problem(self) -> str | None:
        first = self.drains[0].after_step
        if self.drained_at_step is None:
            return f"training never restarted after the SIGTERM after step {first}"
        if self.drained_at_step < first:
            return f"the workers stopped after step {self.drained_at_step}, before the SIGTERM after step {first}"
        if self.steps_lost and self.steps_lost > self.steps_allowed:
            return f"{self.steps_lost} steps lost over {len(self.drains)} drain(s), more than {self.steps_allowed}"
        return None

    @property
    def passed(self) -> bool:
        return self.problem is None

    def to_json(self) -> dict:
        """What ``--json`` prints: every field, the verdict and its reason."""
        return {**asdict(self), "passed": self.passed, "problem": self.problem}

    def summary(self) -> str:
        lines = [
            f"trained to step {self.steps_trained[-1]} of {self.steps_wanted} on {self.nodes} nodes x "
            f"{self.workers_per_node} workers; "
            f"loss {self.first_loss:.3f} -> {self.last_loss:.3f}"
            if self.first_loss is not None
            else "no step trained"
        ]
        if self.killed_at_step is not None and self.recovery_seconds is not None:
            lines.append(
                f"killed a worker at step {self.killed_at_step}; resumed from checkpoint-{self.resumed_from} "
                f"in {self.recovery_seconds:.1f} s; {retrained(self.steps_retrained)}"
            )
        if self.drains and self.drained_at_step is not None and self.drain_to_step_seconds is not None:
            slowest = max(drain.exit_seconds for drain in self.drains)
            lines.append(
                f"drained {len(self.drains)} time(s), first after step {self.drained_at_step} (SIGTERM after step "
                f"{self.drains[0].after_step}): the agents exited within {slowest:.1f} s of a "
                f"{self.drains[0].grace_seconds} s grace period; first resumed from checkpoint-{self.resumed_from}, next "
                f"step {self.drain_to_step_seconds:.1f} s after the SIGTERM; {self.steps_lost} steps lost"
            )
        if self.crash_budget is not None:
            lines.append(
                f"a worker crashed at each of {self.worker_starts} starts: torchrun's --max-restarts={self.crash_budget} "
                f"in each of {self.job_retry_count + 1} job runs (the crash budget: {self.crash_restarts} job restarts)"
            )
        lines.append(f"Volcano: job {self.job_phase}, retryCount {self.job_retry_count} of maxRetry {self.job_max_retry}")
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


def restarts(records: list[dict]) -> list[int]:
    """The indices of the first records of restarted runs."""
    return [index for index in range(len(records)) if restarted(records, index)]


def progress(records: list[dict], start: int, request: RehearsalRequest) -> Iterator[str]:
    """The lines a user watches for ``records[start:]``: each step's loss, the kill, and where the restart resumed."""
    restart = next(iter(restarts(records)), None)
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
    job: JobRun,
    drains: list[DrainEvent] = (),
    steps_allowed: int = 0,
    phase_after: str | None = None,
) -> Outcome:
    """The verdict on a run's records, its last agents' exit codes, the checkpoints ``saved`` on the volume, the Volcano
    Job's run (``job``) and the ``drains`` sent."""
    losses = [record["loss"] for record in records]
    found = restarts(records)
    interrupted = {}
    if found and (request.kill_at is not None or drains):
        before, resumed = records[found[0] - 1], records[found[0]]
        interrupted = {"resumed_from": resumed["resumed_from"]}
        if not drains:
            interrupted |= {
                "killed_at_step": before["step"],
                "checkpoint_at_kill": max((step for step in saved if step <= before["step"]), default=0),
                "steps_retrained": [record["step"] for record in records[found[0] :] if record["step"] <= before["step"]],
                "recovery_seconds": resumed["time"] - before["time"],
            }
        else:
            interrupted |= {
                "drained_at_step": before["step"],
                "steps_lost": sum(records[index - 1]["step"] - records[index]["resumed_from"] for index in found),
                "drain_to_step_seconds": resumed["time"] - drains[0].sent_at,
            }
    crashes = (
        {"crash_budget": job.crash_budget, "crash_restarts": job.crash_restarts, "worker_starts": len(found) + bool(records)}
        if request.crash_at_start
        else {}
    )
    return Outcome(
        nodes=request.nodes,
        workers_per_node=request.workers_per_node,
        steps_wanted=request.steps,
        steps_trained=[record["step"] for record in records],
        first_loss=losses[0] if losses else None,
        last_loss=losses[-1] if losses else None,
        agents_exit=exits,
        first_step_seconds=records[0]["time"] - started_at if records else None,
        job_phase=job.status.phase,
        job_retry_count=job.status.retry_count,
        job_max_retry=job.max_retry,
        kill_at=request.kill_at,
        drain_at=request.drain_at,
        drains_wanted=request.drains if request.drain_due(0) else 0,
        drains=list(drains),
        disruption=request.disruption,
        steps_allowed=steps_allowed,
        phase_after_disruption=phase_after,
        **interrupted,
        **crashes,
    )
