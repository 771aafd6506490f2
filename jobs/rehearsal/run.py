"""How `jobs.rehearsal` runs a job: the launcher's job for the request (``rehearsal_job``), its tasks as torchrun
agents with a real etcd, what is done to them at a step (a kill, a drain, a disruption: ``jobs.rehearsal.disruptions``)
and how Volcano's controller restarts or ends the job after (``volcano_sees``), until it ends (``rehearse``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from jobs.errors import LaunchError
from jobs.job_building.capacity import choose_node_group
from jobs.job_building.capacity_blocks import in_capacity_block
from jobs.job_building.grace_period import pod_grace_seconds
from jobs.job_building.torchx_component import JOB_VERSION_ANNOTATION
from jobs.local_etcd import LocalEtcd
from jobs.rehearsal.cpu_workloads import cpu_recipes
from jobs.rehearsal.disruptions import Action, action_for
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
from training.crash_budget import BUDGET_ENV
from trainium_eks.contract import PlatformContract

POLL_SECONDS = 0.2
# While a drain waits for its step: the tiny model's steps take tens of milliseconds on a CPU.
DRAIN_POLL_SECONDS = 0.01


def rehearsal_job(contract: PlatformContract, request: RehearsalRequest) -> dict:
    """The job `jobs.launch` builds for the request's workload (refused in one line as the launcher refuses it)."""
    return cpu_recipes()[request.workload].job(contract, request)


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


def drain(agents: Rehearsal, watch: Watch, grace: float, why: str) -> DrainEvent:
    """SIGTERM to every agent as the kubelet sends it to a deleted pod's PID 1, and SIGKILL to those still running
    ``grace`` seconds later (the pods' grace period; less where Karpenter's deletion gives them less)."""
    after = read_metrics(watch.metrics)[-1]["step"]
    watch.say(f"SIGTERM to the {len(agents.agents)} torchrun agents after step {after}: {why}")
    sent_at = time.time()
    killed = agents.terminate(grace)
    exit_seconds = time.time() - sent_at
    watch.show_new()
    outlived = f"; killed after {grace:g} s" if killed else ""
    watch.say(f"the agents exited {exit_seconds:.1f} s after SIGTERM{outlived}")
    return DrainEvent(sent_at, after, int(grace), exit_seconds, killed)


def disrupt(job: dict, agents: Rehearsal, watch: Watch, action: Action | None) -> DrainEvent:
    """What ``action`` does to the agents (``jobs.rehearsal.disruptions``); None: --drain-at, a drain that gives the
    pods their grace period, as ``kubectl drain`` does."""
    if action is None:
        return drain(agents, watch, pod_grace_seconds(job), "as the kubelet drains a pod (--drain-at)")
    if action.way == "drain":
        return drain(agents, watch, action.kill_after, action.why)
    after = read_metrics(watch.metrics)[-1]["step"]
    watch.say(f"the agents' nodes go after step {after}: {action.why}; SIGKILL to every process")
    sent_at = time.time()
    agents.lose()
    return DrainEvent(sent_at, after, 0, 0.0, True)


def volcano_sees(
    job: dict, lifecycle: JobLifecycle, status: JobStatus, agents: Rehearsal, say: Callable[[str], None]
) -> JobStatus:
    """The job's status once Volcano's controller has seen every agent's end so far (``jobs.rehearsal.volcano_lifecycle``); when
    it restarts or ends the job, the agents still running stopped as the pods Volcano deletes are."""
    for agent in agents.agents:
        if agent.pod_exit_code is None or agent.reported:
            continue
        agent.reported = True
        if agent.node_lost:
            end = PodEnd.node_lost(agent.task, agents.version)
        else:
            end = PodEnd(agent.task, agents.version, agent.pod_exit_code)
        action, status = pod_ended(lifecycle, status, end)
        if action in RESTARTS and action != "RestartJob":
            raise LaunchError(f"the job's policies ask Volcano to {action}; the rehearsal restarts whole jobs only")
        if action != SYNC:
            ended = "failed with its node" if end.how == "node-lost" else f"exited {end.exit_code}"
            say(
                f"Volcano: pod {agent.task} {ended} -> {action}; job {status.phase}, "
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


def crash_budget(job: dict) -> tuple[int, int]:
    """torchrun's --max-restarts in the job's command, and the job restarts after crashes in a row its agents allow
    (``training.crash_budget``; none where the job sets no budget)."""
    (container,) = job["spec"]["tasks"][0]["template"]["spec"]["containers"]
    (flag,) = [word for word in container["command"] if word.startswith("--max-restarts=")]
    env = {variable["name"]: variable.get("value") for variable in container.get("env", [])}
    return int(flag.split("=", 1)[1]), int(env.get(BUDGET_ENV) or 0)


def rehearse(contract: PlatformContract, request: RehearsalRequest, job: dict, workdir: Path, say=print) -> Outcome:
    """Run ``job`` (the workload's, ``Workload.job``) as local agents, restarted or ended as Volcano's controller would
    by the job's lifecycle (``jobs.rehearsal.volcano_lifecycle``); ``say`` gets one line per step and event."""
    try:
        lifecycle = JobLifecycle.of(job)
    except VolcanoRefusal as refusal:
        raise LaunchError(f"the job's lifecycle policies: Volcano's admission webhook refuses them: {refusal}") from None
    workload = cpu_recipes()[request.workload]
    group = choose_node_group(contract, request.node_group)
    action = None
    if request.disruption is not None:
        action = action_for(request.disruption, pod_grace_seconds(job), in_capacity_block(contract, group))
    fsx = workdir / "fsx"
    workload.stage(fsx, contract)
    members = request.etcd_members or contract.etcd_members or 1  # the stack's (contract 1.8.0), unless asked
    etcd = LocalEtcd.for_platform(contract.job_namespace, members, workdir / "etcd").start()
    say(f"etcd: {len(etcd.members)} member(s) on {', '.join(etcd.endpoint(m) for m in etcd.members)}")
    overrides = CpuOverrides(
        etcd_endpoint=etcd.endpoint(etcd.members[0]),
        fsx_root=fsx,
        fsx_mount_path=contract.fsx_mount_path,
        training_args={**workload.training_args(request), **(workload.crash_at_start if request.crash_at_start else {})},
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
    phase_after = None  # the job's phase once Volcano saw the first disruption
    run_start = 0  # the records before the running agents' first
    try:
        if request.kill_at is not None and workload.kill_module and watch.follow(agents, until=reached(request.kill_at)):
            workload.kill_worker(agents)
        while status.phase == "Running" and not watch.expired:
            due = request.drain_due(len(drains))
            if due and watch.follow(agents, until=trained_since_start(request.drain_at, run_start)):
                drains.append(disrupt(job, agents, watch, action))
            elif not due:
                watch.follow(agents)
            status = volcano_sees(job, lifecycle, status, agents, say)
            if drains and phase_after is None:
                phase_after = status.phase
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
    run = JobRun(status, lifecycle.max_retry, *crash_budget(job))
    allowed = 0 if action is None or action.warned else CHECKPOINT_EVERY
    return outcome(request, records, exits, started_at, workload.saved(output_dir), run, drains, allowed, phase_after)
