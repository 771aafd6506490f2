"""A launcher-built Volcano Job's tasks as torchrun agents on this machine, on a CPU (`jobs.rehearsal` runs them).

The agents run the task's own command line and environment (the rendezvous backend, run id, restart count and
the training module's arguments as the launcher wrote them). Only what must differ on a CPU is overridden,
and ``CpuOverrides`` names each item: the etcd endpoint (a loopback member), the shared file system (a local
directory standing in for the FSx mount), and the training module's device, model size and step counts.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from jobs.job_building.torchx_component import AGENT_COMMAND, JOB_VERSION_ANNOTATION

REPO_ROOT = Path(__file__).resolve().parents[2]
ANNOTATION_FIELD = re.compile(r"metadata\.annotations\['([^']+)'\]")
VARIABLE_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
# The pods' entrypoint (training.agent: torchrun), with an optional shorter TTL for etcd-v2's rendezvous state (the
# keep-alive test needs a run to outlive it; torch does not expose the TTL as a rendezvous option).
AGENT = """
import sys
from torch.distributed.elastic.rendezvous.etcd_rendezvous_backend import EtcdRendezvousBackend
from training.agent import main
ttl = sys.argv.pop(1)
if ttl:
    EtcdRendezvousBackend._DEFAULT_TTL = int(ttl)
sys.exit(main(sys.argv[1:]))
"""


# The training module's arguments on a CPU: the tiny model, small batches, a checkpoint every five steps.
TINY_CPU_TRAINING = {
    "--device": "cpu",
    "--model": "tiny",
    "--batch-size": "4",
    "--grad-accum-steps": "1",
    "--lr": "2e-3",
    "--warmup-steps": "2",
    "--checkpoint-every": "5",
}


def stage_dataset(fsx_root: Path, dataset: str) -> Path:
    """A generated shard in the tutorial's HDF5 layout, where the job reads its dataset on the shared volume."""
    from training.data import write_synthetic_shard
    from training.options import BERT_TINY

    directory = fsx_root / "datasets" / dataset
    directory.mkdir(parents=True, exist_ok=True)
    shard = directory / "shard-0.hdf5"
    if not shard.exists():
        write_synthetic_shard(shard, samples=256, seq_len=32, vocab_size=BERT_TINY["vocab_size"], max_predictions=5)
    return directory


@dataclass(frozen=True)
class CpuOverrides:
    etcd_endpoint: str  # host:port of a loopback etcd member, for the cluster's etcd Service
    fsx_root: Path  # stands in for the FSx mount path
    fsx_mount_path: str  # the mount path in the job, replaced by fsx_root wherever it appears
    training_args: dict[str, str] = field(default_factory=dict)  # flag -> value, replaced or appended
    rendezvous_ttl: int | None = None  # None keeps torch's default

    def command(self, task_command: list[str]) -> list[str]:
        """torchrun's argv in the task's command (after the entrypoint), with the overrides applied."""
        entrypoint = len(AGENT_COMMAND)
        if tuple(task_command[:entrypoint]) != AGENT_COMMAND:
            raise ValueError(f"the task runs {' '.join(task_command[:entrypoint])}, not {' '.join(AGENT_COMMAND)}")
        args = [self.localise(a) for a in task_command[entrypoint:]]
        args = [f"--rdzv_endpoint={self.etcd_endpoint}" if a.startswith("--rdzv_endpoint=") else a for a in args]
        for flag, value in self.training_args.items():
            if flag in args:
                args[args.index(flag) + 1] = value
            else:
                args += [flag, value]
        return args

    def localise(self, value: str) -> str:
        """``value`` with paths under the mount path moved under fsx_root (also after ``--flag=``)."""
        mount = re.compile(rf"(^|=){re.escape(self.fsx_mount_path)}(?=/|$)")
        return mount.sub(lambda m: m.group(1) + str(self.fsx_root), value)


def workers_of(agent: int, module: str = "") -> list[int]:
    """The training workers torchrun (pid ``agent``) started: its children running ``module`` (any, by default)."""
    children = [int(pid) for task in Path(f"/proc/{agent}/task").iterdir() for pid in (task / "children").read_text().split()]
    return [pid for pid in children if module.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()]


@dataclass
class Agent:
    task: str
    process: subprocess.Popen
    log: Path
    reported: bool = False  # its end was given to the job's lifecycle (``jobs.rehearsal``)
    node_lost: bool = False  # its node went with it: no container reported an end (``Rehearsal.lose``)

    @property
    def pod_exit_code(self) -> int | None:
        """The exit code Kubernetes would report for the agent's container: its status, or 128 + the signal that
        killed it (Tencent Kubernetes Engine docs, "Use Exit Code to Identify Pod Exceptions": a container ended by a
        signal reports 129-255); None while it runs."""
        code = self.process.poll()
        return code if code is None or code >= 0 else 128 - code


def container_env(container: dict, annotations: dict[str, str]) -> dict[str, str]:
    """The container's environment as the kubelet sets it: plain values, and pod annotations by downward API."""
    env = {}
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
            continue
        path = variable["valueFrom"]["fieldRef"]["fieldPath"]
        match = ANNOTATION_FIELD.fullmatch(path)
        if not match:
            raise ValueError(f"{variable['name']}: the rehearsal reads only pod annotations, not {path}")
        env[variable["name"]] = annotations[match.group(1)]
    return env


def expand(arg: str, env: dict[str, str]) -> str:
    """``$(NAME)`` references replaced as the kubelet does in a container's command (unknown names stay)."""
    return VARIABLE_REFERENCE.sub(lambda m: env.get(m.group(1), m.group(0)), arg)


class Rehearsal:
    """The job's tasks as torchrun agents on this machine."""

    def __init__(self, job: dict, overrides: CpuOverrides, logs: Path, annotations: dict[str, str] | None = None):
        self.job, self.overrides, self.logs = job, overrides, logs
        # What Volcano annotates the job's pods with: the first run of the job is version 0.
        self.annotations = annotations if annotations is not None else {JOB_VERSION_ANNOTATION: "0"}
        self.agents: list[Agent] = []
        self.started_at = 0.0

    @property
    def version(self) -> int:
        """The job version of the agents' pods."""
        return int(self.annotations[JOB_VERSION_ANNOTATION])

    def start(self) -> Rehearsal:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.started_at = time.time()
        for task in self.job["spec"]["tasks"]:
            (container,) = task["template"]["spec"]["containers"]
            pod_env = container_env(container, self.annotations)
            env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
            env.update({name: self.overrides.localise(value) for name, value in pod_env.items()})
            ttl = str(self.overrides.rendezvous_ttl or "")
            command = [expand(arg, pod_env) for arg in container["command"]]
            argv = [sys.executable, "-c", AGENT, ttl, *self.overrides.command(command)]
            log = self.logs / f"{task['name']}.log"
            process = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
            self.agents.append(Agent(task["name"], process, log))
        return self

    def rendezvous_id(self) -> str:
        """The run id the agents use (``--rdzv_id`` after the kubelet's expansion)."""
        (container,) = self.job["spec"]["tasks"][0]["template"]["spec"]["containers"]
        (flag,) = [a for a in container["command"] if a.startswith("--rdzv_id=")]
        return expand(flag, container_env(container, self.annotations)).split("=", 1)[1]

    def wait(self, timeout: float) -> list[int]:
        """Exit codes of the agents; raises TimeoutError (after stopping them) when they run past ``timeout``."""
        deadline = time.monotonic() + timeout
        try:
            return [agent.process.wait(timeout=max(0.1, deadline - time.monotonic())) for agent in self.agents]
        except subprocess.TimeoutExpired:
            self.stop()
            raise TimeoutError(f"the agents ran past {timeout}s; logs in {self.logs}") from None

    def terminate(self, grace: float) -> bool:
        """SIGTERM to every agent, as the kubelet sends it to each terminating pod's PID 1, and SIGKILL to those still
        running ``grace`` seconds later, as the kubelet does after the pod's grace period; whether any was killed."""
        for agent in self.agents:
            if agent.process.poll() is None:
                agent.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        killed = False
        for agent in self.agents:
            try:
                agent.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._kill(agent)
                killed = True
        return killed

    @staticmethod
    def _kill(agent: Agent) -> None:
        """SIGKILL to the agent and its workers, as the kubelet's kill ends every process of the container."""
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # a worker that ended first
            for worker in workers_of(agent.process.pid):
                os.kill(worker, signal.SIGKILL)
        agent.process.kill()
        agent.process.wait()

    def lose(self) -> None:
        """Every agent's node gone at once, as an instance ends: SIGKILL to each agent's workers and to the agent."""
        for agent in self.agents:
            if agent.process.poll() is None:
                self._kill(agent)
                agent.node_lost = True

    def stop(self) -> None:
        for agent in self.agents:
            if agent.process.poll() is None:
                agent.process.send_signal(signal.SIGTERM)
        for agent in self.agents:
            try:
                agent.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                agent.process.kill()

    def logs_text(self) -> str:
        return "\n".join(f"--- {a.task}\n{a.log.read_text()[-4000:]}" for a in self.agents)


def read_metrics(path: Path) -> list[dict]:
    """The training script's per-step records (rank 0 appends one line per step)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
