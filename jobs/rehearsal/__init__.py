"""Try the job before you deploy: the stack's own training job on this machine, on a CPU, through a real etcd.

    python -m jobs.rehearsal (--stack STACK | --outputs FILE) [--workload bert|torchtitan] [--nodes N]
                             [--workers-per-node N] [--steps K]
                             [--kill-at STEP | --drain-at STEP [--drains N] | --crash-at-start] [--etcd-members M]
                             [--node-group NAME] [--workdir DIR] [--timeout SECONDS] [--json]

The Volcano Job is the one `jobs.launch` builds from the outputs for the workload (`jobs.rehearsal.cpu_workloads`: BERT,
or TorchTitan with its CPU recipe); each of its tasks runs as a torchrun agent here, and they meet through etcd
members started with the platform's own flags (`jobs.local_etcd`). What must differ on a CPU is listed in
`jobs.rehearsal.local_agents.CpuOverrides`. With ``--kill-at STEP`` a training worker dies by SIGKILL once every worker has
trained that step, as an OOM kill would; the run passes only if every step trains and, after the kill, training
resumed from the checkpoint written before it, so that the steps since that checkpoint, which the report lists, are
trained again.
With ``--drain-at STEP`` the agents get SIGTERM once every worker has trained that step, as the kubelet sends it to a
drained pod's torchrun; they get the pods' grace period to exit (then SIGKILL); ``--drains N`` drains again once
--drain-at more steps are trained after each resume. The run passes only if no step is lost: the workers stopped after
a step whose checkpoint the restarted job resumed from. The report gives the time from the SIGTERM to the next step.
With ``--crash-at-start`` a worker dies at step 1 of every start; the run passes only if torchrun gave up after its
--max-restarts and the job ended Terminated.
Whatever ends an agent, the job goes on as Volcano's job controller decides by the job's own lifecycle policies and
maxRetry (`jobs.rehearsal.volcano_lifecycle`): restarted (new agents, the next job version), completed, or ended; the report
gives the job's phase and retryCount, and a job Volcano fails fails the rehearsal.
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

from jobs.cluster_access.outputs import add_source_options, report_bad_input, source_contract
from jobs.job_building.capacity import LaunchError
from jobs.job_building.grace_period import pod_grace_seconds
from jobs.job_building.paths import create_directory, new_directory
from jobs.job_building.torchx_component import JOB_VERSION_ANNOTATION
from jobs.local_etcd import LocalEtcd
from jobs.rehearsal.cpu_workloads import WORKLOADS
from jobs.rehearsal.local_agents import CpuOverrides, Rehearsal, read_metrics
from jobs.rehearsal.report import CHECKPOINT_EVERY, DrainEvent, JobRun, Outcome, RehearsalRequest, outcome, progress
from jobs.rehearsal.volcano_lifecycle import (
    RESTARTS,
    SYNC,
    JobLifecycle,
    JobStatus,
    PodEnd,
    VolcanoRefusal,
    pod_ended,
    pods_recreated,
)
from trainium_eks.cli import OneLineParser
from trainium_eks.contract import PlatformContract

# A CPU has few cores: two BERT workers per agent, one TorchTitan worker (its FSDP2 steps are the heavier).
WORKERS_PER_NODE = {"bert": 2, "torchtitan": 1}
POLL_SECONDS = 0.2
# While a drain waits for its step: the tiny model's steps take tens of milliseconds on a CPU.
DRAIN_POLL_SECONDS = 0.01
# --crash-at-start (BERT): its last worker kills itself after step 1 of every start that resumed from no checkpoint
# (training/pretrain_bert.py fail_here), and none is written before step CHECKPOINT_EVERY: it crashes at every start.
CRASH_AT_START = {"--fail-at-step": "1"}


def request_from(args) -> RehearsalRequest:
    options = {
        "workload": args.workload,
        "nodes": args.nodes,
        "workers_per_node": WORKERS_PER_NODE[args.workload] if args.workers_per_node is None else args.workers_per_node,
        "steps": args.steps,
        "kill_at": args.kill_at,
        "drain_at": args.drain_at,
        "drains": args.drains,
        "crash_at_start": args.crash_at_start,
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
    """The progress lines of a run, shown as its metrics grow, until an agent ends or its time runs out."""

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

    @property
    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    def follow(self, agents: Rehearsal, until: Callable[[list[dict]], bool] | None = None) -> bool:
        """Show progress while ``agents`` run; True as soon as ``until(records)`` holds, with the agents running; False
        once an agent ends that the job's lifecycle has not seen end, or the time runs out."""
        while not any(agent.pod_exit_code is not None and not agent.reported for agent in agents.agents):
            if self.expired:
                self.say(f"stopping: the run passed --timeout {self.request.timeout:g} s")
                return False
            records = self.show_new()
            if until is not None and until(records):
                return True
            time.sleep(POLL_SECONDS if until is None else DRAIN_POLL_SECONDS)
        self.show_new()
        return False


def drain(job: dict, agents: Rehearsal, watch: Watch) -> DrainEvent:
    """SIGTERM to every agent as the kubelet sends it to a drained pod's PID 1, and SIGKILL to those still running after
    the pods' grace period."""
    grace = pod_grace_seconds(job)
    after = read_metrics(watch.metrics)[-1]["step"]
    watch.say(f"SIGTERM to the {len(agents.agents)} torchrun agents after step {after}, as the kubelet drains a pod (--drain-at)")
    sent_at = time.time()
    killed = agents.terminate(grace)
    exit_seconds = time.time() - sent_at
    watch.show_new()
    outlived = f"; killed after the {grace} s grace period" if killed else ""
    watch.say(f"the agents exited {exit_seconds:.1f} s after SIGTERM{outlived}")
    return DrainEvent(sent_at, after, grace, exit_seconds, killed)


def volcano_sees(
    job: dict, lifecycle: JobLifecycle, status: JobStatus, agents: Rehearsal, say: Callable[[str], None]
) -> JobStatus:
    """The job's status once Volcano's controller has seen every agent's end so far (``jobs.rehearsal.volcano_lifecycle``); when
    it restarts or ends the job, the agents still running stopped as the pods Volcano deletes are."""
    for agent in agents.agents:
        if agent.pod_exit_code is None or agent.reported:
            continue
        agent.reported = True
        end = PodEnd(agent.task, agents.version, agent.pod_exit_code)
        action, status = pod_ended(lifecycle, status, end)
        if action in RESTARTS and action != "RestartJob":
            raise LaunchError(f"the job's policies ask Volcano to {action}; the rehearsal restarts whole jobs only")
        if action != SYNC:
            say(
                f"Volcano: pod {agent.task} exited {end.exit_code} -> {action}; job {status.phase}, "
                f"retryCount {status.retry_count} of maxRetry {lifecycle.max_retry}, version {status.version}"
            )
    if status.phase != "Running":
        agents.terminate(pod_grace_seconds(job))
    return status


def reached(step: int) -> Callable[[list[dict]], bool]:
    return lambda records: bool(records) and records[-1]["step"] >= step


def trained_since_start(steps: int, run_start: int) -> Callable[[list[dict]], bool]:
    """Whether the run whose first record is ``records[run_start]`` has trained ``steps`` since the step it resumed from."""
    return lambda records: len(records) > run_start and records[-1]["step"] >= records[run_start]["resumed_from"] + steps


def crash_budget(job: dict) -> int:
    """torchrun's --max-restarts in the job's command."""
    (container,) = job["spec"]["tasks"][0]["template"]["spec"]["containers"]
    (flag,) = [word for word in container["command"] if word.startswith("--max-restarts=")]
    return int(flag.split("=", 1)[1])


def rehearse(contract: PlatformContract, request: RehearsalRequest, job: dict, workdir: Path, say=print) -> Outcome:
    """Run ``job`` (the workload's, ``Workload.job``) as local agents, restarted or ended as Volcano's controller would
    by the job's lifecycle (``jobs.rehearsal.volcano_lifecycle``); ``say`` gets one line per step and event."""
    try:
        lifecycle = JobLifecycle.of(job)
    except VolcanoRefusal as refusal:
        raise LaunchError(f"the job's lifecycle policies: Volcano's admission webhook refuses them: {refusal}") from None
    workload = WORKLOADS[request.workload]
    fsx = workdir / "fsx"
    workload.stage(fsx, contract)
    etcd = LocalEtcd.for_platform(contract.job_namespace, request.etcd_members, workdir / "etcd").start()
    say(f"etcd: {len(etcd.members)} member(s) on {', '.join(etcd.endpoint(m) for m in etcd.members)}")
    overrides = CpuOverrides(
        etcd_endpoint=etcd.endpoint(etcd.members[0]),
        fsx_root=fsx,
        fsx_mount_path=contract.fsx_mount_path,
        training_args={**workload.training_args(request), **(CRASH_AT_START if request.crash_at_start else {})},
    )
    output_dir = workload.output_dir(job, overrides)
    watch = Watch(output_dir / "metrics.jsonl", request, say, deadline=time.monotonic() + request.timeout)
    status = JobStatus()
    agents = Rehearsal(job, overrides, workdir / "logs").start()
    started_at = agents.started_at
    say(
        f"job {workload.job_name}: {len(agents.agents)} torchrun agents x {request.workers_per_node} workers; "
        f"logs in {workdir / 'logs'}"
    )
    drains: list[DrainEvent] = []
    run_start = 0  # the records before the running agents' first
    try:
        if request.kill_at is not None and workload.kill_module and watch.follow(agents, until=reached(request.kill_at)):
            workload.kill_worker(agents)
        while status.phase == "Running" and not watch.expired:
            due = request.drain_due(len(drains))
            if due and watch.follow(agents, until=trained_since_start(request.drain_at, run_start)):
                drains.append(drain(job, agents, watch))
            elif not due:
                watch.follow(agents)
            status = volcano_sees(job, lifecycle, status, agents, say)
            if status.phase == "Restarting":
                run_start = len(read_metrics(watch.metrics))
                logs = workdir / "logs" / f"version-{status.version}"
                agents = Rehearsal(job, overrides, logs, {JOB_VERSION_ANNOTATION: str(status.version)}).start()
                status = pods_recreated(status)
    finally:
        agents.stop()
        etcd.stop()
    records = watch.show_new()
    exits = [agent.pod_exit_code for agent in agents.agents]
    run = JobRun(status, lifecycle.max_retry, crash_budget(job))
    return outcome(request, records, exits, started_at, workload.saved(output_dir), run, drains)


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m jobs.rehearsal", description=__doc__.splitlines()[0])
    add_source_options(p)
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
    p.add_argument(
        "--drains",
        type=int,
        help="drain this many times (default 1), after every --drain-at steps; the job must survive every one",
    )
    p.add_argument(
        "--crash-at-start",
        action="store_true",
        help="a worker crashes at every start (bert): torchrun restarts it up to its --max-restarts, then the job "
        "must end (Terminated), not restart forever",
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
        contract = source_contract(args)
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
