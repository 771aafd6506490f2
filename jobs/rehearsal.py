"""Try the job before you deploy: the stack's own training job on this machine, on a CPU, through a real etcd.

    python -m jobs.rehearsal (--stack STACK | --outputs FILE) [--workload bert|torchtitan] [--nodes N]
                             [--workers-per-node N] [--steps K] [--kill-at STEP | --drain-at STEP] [--etcd-members M]
                             [--node-group NAME] [--workdir DIR] [--timeout SECONDS] [--json]

The Volcano Job is the one `jobs.launch` builds from the outputs for the workload (`jobs.rehearsal_workloads`: BERT,
or TorchTitan with its CPU recipe); each of its tasks runs as a torchrun agent here, and they meet through etcd
members started with the platform's own flags (`jobs.local_etcd`). What must differ on a CPU is listed in
`jobs.local_agents.CpuOverrides`. With ``--kill-at STEP`` a training worker dies by SIGKILL once every worker has
trained that step, as an OOM kill would; the run passes only if every step trains and, after the kill, training
resumed from the checkpoint written before it, so that the steps since that checkpoint, which the report lists, are
trained again.
With ``--drain-at STEP`` the agents get SIGTERM once every worker has trained that step, as the kubelet sends it to a
drained pod's torchrun; they get the pods' grace period to exit (then SIGKILL), and the job restarts as Volcano
restarts it (new pods, the next job version); the run passes only if no step is lost: the workers stopped after a
step whose checkpoint the restarted job resumed from. The report gives the time from the SIGTERM to the next step.
Exit status: 0 passed, 1 the rehearsal failed (logs kept), 2 bad input.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from pydantic import ValidationError

from jobs.capacity import LaunchError
from jobs.components import JOB_VERSION_ANNOTATION
from jobs.grace_period import pod_grace_seconds
from jobs.local_agents import CpuOverrides, Rehearsal, read_metrics
from jobs.local_etcd import LocalEtcd
from jobs.outputs import read_contract, report_bad_input
from jobs.paths import create_directory, new_directory
from jobs.rehearsal_report import CHECKPOINT_EVERY, DrainEvent, Outcome, RehearsalRequest, outcome, progress
from jobs.rehearsal_workloads import WORKLOADS
from trainium_eks.cli import OneLineParser
from trainium_eks.contract import PlatformContract

# A CPU has few cores: two BERT workers per agent, one TorchTitan worker (its FSDP2 steps are the heavier).
WORKERS_PER_NODE = {"bert": 2, "torchtitan": 1}
POLL_SECONDS = 0.2
# While a drain waits for its step: the tiny model's steps take tens of milliseconds on a CPU.
DRAIN_POLL_SECONDS = 0.01


def request_from(args) -> RehearsalRequest:
    options = {
        "workload": args.workload,
        "nodes": args.nodes,
        "workers_per_node": WORKERS_PER_NODE[args.workload] if args.workers_per_node is None else args.workers_per_node,
        "steps": args.steps,
        "kill_at": args.kill_at,
        "drain_at": args.drain_at,
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


def rehearsal_job(contract: PlatformContract, request: RehearsalRequest) -> dict:
    """The job `jobs.launch` builds for the request's workload (refused in one line as the launcher refuses it)."""
    return WORKLOADS[request.workload].job(contract, request)


@dataclass
class Watch:
    """The progress lines of a run, shown as its metrics grow, until its agents end or its time runs out."""

    metrics: Path
    request: RehearsalRequest
    say: Callable[[str], None]
    deadline: float  # time.monotonic() after which the run is stopped
    shown: int = 0

    def show_new(self) -> list[dict]:
        records = read_metrics(self.metrics)
        for line in progress(records, self.shown, self.request):
            self.say(line)
        self.shown = len(records)
        return records

    def follow(self, agents: Rehearsal, until: Callable[[list[dict]], bool] | None = None) -> bool:
        """Show progress while ``agents`` run; True as soon as ``until(records)`` holds, with the agents running."""
        while any(agent.process.poll() is None for agent in agents.agents):
            if time.monotonic() > self.deadline:
                self.say(f"stopping: the run passed --timeout {self.request.timeout:g} s")
                return False
            records = self.show_new()
            if until is not None and until(records):
                return True
            time.sleep(POLL_SECONDS if until is None else DRAIN_POLL_SECONDS)
        return False


def drain_and_restart(
    job: dict, overrides: CpuOverrides, agents: Rehearsal, workdir: Path, watch: Watch
) -> tuple[DrainEvent, Rehearsal]:
    """SIGTERM to every agent as the kubelet sends it to a drained pod's PID 1, SIGKILL to those still running after
    the pods' grace period, then the job's agents started again as Volcano restarts a job: its version bumped."""
    grace = pod_grace_seconds(job)
    after = read_metrics(watch.metrics)[-1]["step"]
    watch.say(f"SIGTERM to the {len(agents.agents)} torchrun agents after step {after}, as the kubelet drains a pod (--drain-at)")
    sent_at = time.time()
    killed = agents.terminate(grace)
    exit_seconds = time.time() - sent_at
    watch.show_new()
    outlived = f"; killed after the {grace} s grace period" if killed else ""
    watch.say(f"the agents exited {exit_seconds:.1f} s after SIGTERM{outlived}; restarting the job as Volcano does")
    restarted = Rehearsal(job, overrides, workdir / "logs" / "restarted", {JOB_VERSION_ANNOTATION: "1"}).start()
    return DrainEvent(sent_at, after, grace, exit_seconds, killed), restarted


def reached(step: int) -> Callable[[list[dict]], bool]:
    return lambda records: bool(records) and records[-1]["step"] >= step


def rehearse(contract: PlatformContract, request: RehearsalRequest, job: dict, workdir: Path, say=print) -> Outcome:
    """Run ``job`` (the workload's, ``Workload.job``) as local agents; ``say`` gets one line per step and event."""
    workload = WORKLOADS[request.workload]
    fsx = workdir / "fsx"
    workload.stage(fsx, contract)
    etcd = LocalEtcd.for_platform(contract.job_namespace, request.etcd_members, workdir / "etcd").start()
    say(f"etcd: {len(etcd.members)} member(s) on {', '.join(etcd.endpoint(m) for m in etcd.members)}")
    overrides = CpuOverrides(
        etcd_endpoint=etcd.endpoint(etcd.members[0]),
        fsx_root=fsx,
        fsx_mount_path=contract.fsx_mount_path,
        training_args=workload.training_args(request),
    )
    output_dir = workload.output_dir(job, overrides)
    watch = Watch(output_dir / "metrics.jsonl", request, say, deadline=time.monotonic() + request.timeout)
    agents = Rehearsal(job, overrides, workdir / "logs").start()
    started_at = agents.started_at
    say(
        f"job {workload.job_name}: {len(agents.agents)} torchrun agents x {request.workers_per_node} workers; "
        f"logs in {workdir / 'logs'}"
    )
    drain = None
    try:
        if request.kill_at is not None and workload.kill_module and watch.follow(agents, until=reached(request.kill_at)):
            workload.kill_worker(agents)
        if request.drain_at is not None and watch.follow(agents, until=reached(request.drain_at)):
            drain, agents = drain_and_restart(job, overrides, agents, workdir, watch)
        watch.follow(agents)
    finally:
        agents.stop()
        etcd.stop()
    records = watch.show_new()
    exits = [agent.process.returncode for agent in agents.agents]
    return outcome(request, records, exits, started_at, workload.saved(output_dir), drain)


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m jobs.rehearsal", description=__doc__.splitlines()[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="read `pulumi stack output --json --show-secrets` of this stack")
    source.add_argument("--outputs", type=Path, help="a JSON file of stack outputs (or a `preflight plan --json` object)")
    p.add_argument(
        "--workload",
        choices=tuple(WORKLOADS),
        default="bert",
        help="the job to rehearse: bert (default) or torchtitan (TorchTitan's job, with its CPU recipe; a trn2/trn3 group)",
    )
    p.add_argument("--nodes", type=int, help="torchrun agents, one per node of the job (default 2)")
    p.add_argument(
        "--workers-per-node",
        type=int,
        help="training workers per agent (default 2 for bert, 1 for torchtitan: a CPU has few cores)",
    )
    p.add_argument("--steps", type=int, help="training steps (default 40)")
    p.add_argument(
        "--kill-at",
        type=int,
        help=f"kill a worker once every worker has trained this step (after the first checkpoint, at {CHECKPOINT_EVERY})",
    )
    p.add_argument(
        "--drain-at",
        type=int,
        help="SIGTERM the agents, as a node drain does, once every worker has trained this step; the job restarts "
        "and must lose no step",
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
        contract = read_contract(args.stack, args.outputs)
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
