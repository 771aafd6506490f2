"""Try the job before you deploy: the stack's own training job on this machine, on a CPU, through a real etcd.

    python -m jobs.rehearsal (--stack STACK | --outputs FILE) [--nodes N] [--workers-per-node N] [--steps K]
                             [--kill-at STEP] [--etcd-members M] [--node-group NAME] [--workdir DIR]
                             [--timeout SECONDS] [--json]

The Volcano Job is the one `jobs.launch` builds from the outputs; each of its tasks runs as a torchrun agent
here, and they meet through etcd members started with the platform's own flags (`jobs.local_etcd`). What must
differ on a CPU is listed in `jobs.local_agents.CpuOverrides`. With ``--kill-at STEP`` the last training worker
dies by SIGKILL once every worker has trained that step, as an OOM kill would (the training module's
``--fail-at-step``); the run passes only if every step trains and, after the kill, training resumed from the
checkpoint written before it, so that the steps since that checkpoint, which the report lists, are trained again.
Exit status: 0 passed, 1 the rehearsal failed (logs kept), 2 bad input.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, PositiveFloat, PositiveInt, StrictStr, ValidationError, model_validator

from jobs.capacity import LaunchError
from jobs.launch import DATASET, JobRequest, volcano_job
from jobs.local_agents import TINY_CPU_TRAINING, CpuOverrides, Rehearsal, read_metrics, stage_dataset
from jobs.local_etcd import LocalEtcd
from jobs.outputs import read_outputs, report_bad_input
from jobs.paths import create_directory, new_directory
from trainium_eks.cli import OneLineParser
from trainium_eks.contract import PlatformContract

JOB_NAME = "berttrain"
CHECKPOINT_EVERY = int(TINY_CPU_TRAINING["--checkpoint-every"])
POLL_SECONDS = 0.2


class RehearsalRequest(BaseModel):
    """The command line, validated once."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nodes: PositiveInt = 2
    workers_per_node: PositiveInt = 2
    steps: PositiveInt = 40
    kill_at: PositiveInt | None = None
    etcd_members: Literal[1, 3, 5] = 1
    node_group: StrictStr | None = None
    timeout: PositiveFloat = 900.0

    @model_validator(mode="after")
    def _kill_between_checkpoint_and_end(self) -> RehearsalRequest:
        if self.kill_at is None:
            return self
        if self.kill_at <= CHECKPOINT_EVERY:
            raise ValueError(
                f"--kill-at {self.kill_at}: the first checkpoint is written at step {CHECKPOINT_EVERY}; "
                f"kill after it (--kill-at {CHECKPOINT_EVERY + 1} or more) to see training resume from it"
            )
        if self.kill_at >= self.steps:
            raise ValueError(f"--kill-at {self.kill_at}: the run ends at step {self.steps}; kill before it or raise --steps")
        return self


def request_from(args) -> RehearsalRequest:
    options = {
        "nodes": args.nodes,
        "workers_per_node": args.workers_per_node,
        "steps": args.steps,
        "kill_at": args.kill_at,
        "etcd_members": args.etcd_members,
        "node_group": args.node_group,
        "timeout": args.timeout,
    }
    try:
        return RehearsalRequest(**{key: value for key, value in options.items() if value is not None})
    except ValidationError as error:
        detail = error.errors(include_url=False)[0]
        if not detail["loc"]:  # a rule across options: its message names the option and the fix
            raise LaunchError(str(detail["ctx"]["error"])) from None
        field = str(detail["loc"][0])
        raise LaunchError(f"--{field.replace('_', '-')} {detail['input']}: {detail['msg'].lower()}") from None


@dataclass(frozen=True)
class Outcome:
    """What a rehearsal showed; ``passed`` is the verdict."""

    nodes: int
    workers_per_node: int
    steps_wanted: int
    steps_trained: list[int]  # the step of every record, in order (a restart repeats steps after its checkpoint)
    first_loss: float | None
    last_loss: float | None
    agents_exit: list[int]
    first_step_seconds: float | None  # from starting the agents
    kill_at: int | None = None  # the step --kill-at asked for
    killed_at_step: int | None = None  # the last step trained before the restart
    checkpoint_at_kill: int | None = None  # the newest checkpoint on the volume when the worker was killed
    resumed_from: int | None = None  # the checkpoint the restarted workers loaded
    steps_retrained: list[int] = field(default_factory=list)  # steps trained before the kill, and again after it
    recovery_seconds: float | None = None  # from the killed step's record to the first step trained again

    @property
    def problem(self) -> str | None:
        """Why the rehearsal failed, or None."""
        if any(self.agents_exit):
            return f"an agent exited with {max(self.agents_exit)}"
        if not self.steps_trained or self.steps_trained[-1] != self.steps_wanted:
            return f"training stopped at step {self.steps_trained[-1] if self.steps_trained else 0} of {self.steps_wanted}"
        if self.kill_at is None:
            return None
        if self.killed_at_step is None:
            return f"training never restarted after the kill at step {self.kill_at}"
        if self.killed_at_step != self.kill_at:
            return f"the worker was killed after step {self.killed_at_step}, not at step {self.kill_at}"
        if self.resumed_from != self.checkpoint_at_kill:
            return f"training restarted from step {self.resumed_from}, not from checkpoint-{self.checkpoint_at_kill}"
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


def output_dir_of(job: dict, overrides: CpuOverrides) -> Path:
    """Where the job's rank 0 writes checkpoints and metrics: its ``--output-dir``, moved to the local volume."""
    (container,) = job["spec"]["tasks"][0]["template"]["spec"]["containers"]
    command = container["command"]
    return Path(overrides.localise(command[command.index("--output-dir") + 1]))


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


def rehearsal_job(contract: PlatformContract, request: RehearsalRequest) -> dict:
    """The job `jobs.launch` builds for the request (refused in one line as the launcher refuses it)."""
    return volcano_job(
        contract,
        JobRequest(name=JOB_NAME, nodes=request.nodes, workers_per_node=request.workers_per_node, node_group=request.node_group),
    )


def rehearse(contract: PlatformContract, request: RehearsalRequest, job: dict, workdir: Path, say=print) -> Outcome:
    """Run ``job`` (``rehearsal_job``) as local agents; ``say`` gets one line per step and event."""
    fsx = workdir / "fsx"
    stage_dataset(fsx, DATASET)
    etcd = LocalEtcd.for_platform(contract.job_namespace, request.etcd_members, workdir / "etcd").start()
    say(f"etcd: {len(etcd.members)} member(s) on {', '.join(etcd.endpoint(m) for m in etcd.members)}")
    fail = {"--fail-at-step": str(request.kill_at)} if request.kill_at else {}
    overrides = CpuOverrides(
        etcd_endpoint=etcd.endpoint(etcd.members[0]),
        fsx_root=fsx,
        fsx_mount_path=contract.fsx_mount_path,
        training_args={**TINY_CPU_TRAINING, "--max-steps": str(request.steps), **fail},
    )
    output_dir = output_dir_of(job, overrides)
    agents = Rehearsal(job, overrides, workdir / "logs").start()
    say(f"job {JOB_NAME}: {len(agents.agents)} torchrun agents x {request.workers_per_node} workers; logs in {workdir / 'logs'}")
    shown = 0
    deadline = time.monotonic() + request.timeout
    try:
        while any(agent.process.poll() is None for agent in agents.agents):
            if time.monotonic() > deadline:
                say(f"stopping: the run passed --timeout {request.timeout:g} s")
                break
            records = read_metrics(output_dir / "metrics.jsonl")
            for line in progress(records, shown, request):
                say(line)
            shown = len(records)
            time.sleep(POLL_SECONDS)
    finally:
        agents.stop()
        etcd.stop()
    records = read_metrics(output_dir / "metrics.jsonl")
    for line in progress(records, shown, request):
        say(line)
    exits = [agent.process.returncode for agent in agents.agents]
    return outcome(request, records, exits, agents.started_at, checkpoints(output_dir))


def outcome(request: RehearsalRequest, records: list[dict], exits: list[int], started_at: float, saved: Iterable[int]) -> Outcome:
    """The verdict on a run's records, its agents' exit codes and the checkpoints ``saved`` on the volume."""
    losses = [record["loss"] for record in records]
    restart = first_restart(records) if request.kill_at is not None else None
    kill = {}
    if restart is not None:
        killed, resumed = records[restart - 1], records[restart]
        kill = {
            "killed_at_step": killed["step"],
            "checkpoint_at_kill": max((step for step in saved if step <= killed["step"]), default=0),
            "resumed_from": resumed["resumed_from"],
            "steps_retrained": [record["step"] for record in records[restart:] if record["step"] <= killed["step"]],
            "recovery_seconds": resumed["time"] - killed["time"],
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
        **kill,
    )


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m jobs.rehearsal", description=__doc__.splitlines()[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="read `pulumi stack output --json --show-secrets` of this stack")
    source.add_argument("--outputs", type=Path, help="a JSON file of stack outputs (or a `preflight plan --json` object)")
    p.add_argument("--nodes", type=int, help="torchrun agents, one per node of the job (default 2)")
    p.add_argument("--workers-per-node", type=int, help="training workers per agent (default 2; a CPU has few cores)")
    p.add_argument("--steps", type=int, help="training steps (default 40)")
    p.add_argument(
        "--kill-at",
        type=int,
        help=f"kill a worker once every worker has trained this step (after the first checkpoint, at {CHECKPOINT_EVERY})",
    )
    p.add_argument("--etcd-members", type=int, help="etcd members to start: 1 (default), 3 or 5, as the stack's etcdMembers")
    p.add_argument("--node-group", help="the node group whose job to rehearse (default: the first)")
    p.add_argument(
        "--workdir",
        type=new_directory,
        help="keep the volume, etcd data and logs here, a new or empty directory (default: a temporary directory)",
    )
    p.add_argument("--timeout", type=float, help="stop the run after this many seconds (default 900)")
    p.add_argument("--json", action="store_true", help="the outcome as JSON on stdout; progress on stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    verdict = {}

    def run(args) -> None:
        request = request_from(args)
        contract = PlatformContract.from_outputs(read_outputs(args.stack, args.outputs))
        job = rehearsal_job(contract, request)  # refused, if at all, before a directory is made
        if args.workdir:
            workdir = create_directory(args.workdir, "--workdir")
        else:
            workdir = Path(tempfile.mkdtemp(prefix="trainium-eks-rehearsal-"))

        def say(line: str) -> None:
            print(line, file=sys.stderr if args.json else sys.stdout, flush=True)

        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the agents and etcd on `kill` as on Ctrl-C

        result = rehearse(contract, request, job, workdir, say)
        report = {**asdict(result), "passed": result.passed, "problem": result.problem}
        print(json.dumps(report) if args.json else result.summary())
        if not result.passed:
            print(f"logs, volume and etcd data kept in {workdir}", file=sys.stderr)
        elif args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        verdict["passed"] = result.passed

    status = report_bad_input(parser, argv, run)
    return status if status else (0 if verdict.get("passed") else 1)


if __name__ == "__main__":
    sys.exit(main())
