"""`python -m jobs.rehearsal` and `python -m jobs.local_etcd`: what they refuse, how they judge a run (a kill, a drain),
that a kill comes at the step asked and its report names the steps trained again, and that their etcd is the
platform's. The longer training runs (and the drain's) are in test_distributed_training.py."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import urllib.request

import pytest
from support import STACKS, cached_plan, evaluate, one, one_group

from jobs.local_etcd import LocalEtcd
from jobs.rehearsal.local_agents import TINY_CPU_TRAINING
from jobs.rehearsal.report import DrainEvent, JobRun, RehearsalRequest, crash_loop_refusal, outcome, progress
from jobs.rehearsal.volcano_lifecycle import JobStatus
from jobs.workloads import registry
from preflight.stackfile import REPO_ROOT
from trainium_eks.contract import PlatformContract

INTERVAL = int(TINY_CPU_TRAINING["--checkpoint-every"])  # the rehearsal's checkpoint interval
# The Volcano Job of a run that trained to its end: Completed, as its lifecycle left it.
COMPLETED = JobRun(JobStatus("Completed", retry_count=1), max_retry=2**31 - 1, crash_budget=3, crash_restarts=2)


@functools.cache
def fixture_outputs() -> str:
    """A stack of one elastic trn1.32xlarge group, whatever the shipped stacks hold."""
    return json.dumps(evaluate("staging", **one_group("trn1.32xlarge")).outputs)


def outputs_file(tmp_path):
    path = tmp_path / "outputs.json"
    path.write_text(fixture_outputs())
    return path


def run_module(module: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("module", ["jobs.rehearsal", "jobs.local_etcd"])
def test_help_says_how_to_run_it(module):
    result = run_module(module, "--help")
    assert result.returncode == 0 and f"python -m {module}" in result.stdout and "--outputs" in result.stdout
    assert module != "jobs.rehearsal" or ("--drain-at" in result.stdout and "--workload" in result.stdout)


def elastic_group() -> dict:
    return json.loads(fixture_outputs())["trainiumNodeGroups"][0]


# What the rehearsal refuses, by the fixture's group: the options and the words of its one line.
BAD_OPTIONS = {
    "kill-before-checkpoint": lambda g: (["--kill-at", str(INTERVAL - 2)], f"the first checkpoint is written at step {INTERVAL}"),
    "kill-at-end": lambda g: (["--kill-at", "40"], "--kill-at 40: the run ends at step 40"),
    "drain-at-end": lambda g: (["--drain-at", "40"], "--drain-at 40: the run ends at step 40"),
    "kill-and-drain": lambda g: (["--kill-at", "12", "--drain-at", "14"], "--kill-at and --drain-at: give one"),
    "drains-without-a-step": lambda g: (["--drains", "3"], "--drains 3: give --drain-at STEP too"),
    "drains-past-the-end": lambda g: (
        ["--drain-at", "10", "--drains", "4"],
        "--drains 4: 4 drains --drain-at 10 steps apart need more than 40 steps, and the run ends at step 40",
    ),
    "crash-and-drain": lambda g: (["--crash-at-start", "--drain-at", "14"], "--drain-at and --crash-at-start: give one"),
    "crash-torchtitan": lambda g: (
        ["--crash-at-start", "--workload", "torchtitan"],
        f"--crash-at-start: {crash_loop_refusal('torchtitan')}",
    ),
    "no-steps": lambda g: (["--steps", "0"], "--steps 0: input should be greater than 0"),
    "etcd-members": lambda g: (["--etcd-members", "2"], "--etcd-members 2"),
    "nodes": lambda g: (
        ["--nodes", str(int(g["maxSize"]) + 1)],
        f"--nodes {int(g['maxSize']) + 1}: elastic node group {g['name']} grows to {int(g['maxSize'])} nodes",
    ),
    "node-group": lambda g: (["--node-group", "gpu"], "--node-group gpu: no such node group"),
    "torchtitan-on-trn1": lambda g: (["--workload", "torchtitan"], registry.workloads()["torchtitan"].runs_on()),
    "workers": lambda g: (
        ["--workers-per-node", str(int(g["neuronCoresPerNode"]) + 1)],
        f"has {int(g['neuronCoresPerNode'])} NeuronCores",
    ),
}


@pytest.mark.parametrize("case", BAD_OPTIONS)
def test_bad_options_exit_2_with_one_line_before_anything_starts(tmp_path, case):
    args, words = BAD_OPTIONS[case](elastic_group())
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    command = [sys.executable, "-m", "jobs.rehearsal", "--outputs", str(outputs_file(tmp_path)), *args]
    environment = {**os.environ, "TMPDIR": str(scratch)}
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=environment)
    assert result.returncode == 2, result.stdout
    assert result.stderr.strip().count("\n") == 0 and words in result.stderr, result.stderr
    assert not list(scratch.iterdir())  # refused before a temporary directory, etcd or an agent was made


def records(steps: list[int], resumed_from: list[int], start: float = 100.0) -> list[dict]:
    return [
        {"step": step, "loss": 5.0 - 0.01 * i, "resumed_from": loaded, "time": start + i}
        for i, (step, loaded) in enumerate(zip(steps, resumed_from, strict=True))
    ]


SAVED = [5, 10, 15, 20]  # the checkpoints on the volume at the end of a 20-step run


@pytest.mark.parametrize(
    ("steps", "resumed_from", "exits", "problem"),
    [
        ([*range(1, 13), *range(11, 21)], [0] * 12 + [10] * 10, [0, 0], None),
        ([*range(1, 13), *range(1, 21)], [0] * 32, [0, 0], "training restarted from step 0, not from checkpoint-10"),
        ([*range(1, 13), *range(6, 21)], [0] * 12 + [5] * 15, [0, 0], "training restarted from step 5, not from checkpoint-10"),
        ([*range(1, 16), *range(16, 21)], [0] * 15 + [15] * 5, [0, 0], "the worker was killed after step 15, not at step 12"),
        ([*range(1, 21)], [0] * 20, [0, 0], "training never restarted after the kill at step 12"),
        ([*range(1, 13), *range(11, 16)], [0] * 12 + [10] * 5, [0, 0], "training stopped at step 15 of 20"),
        ([*range(1, 13), *range(11, 21)], [0] * 12 + [10] * 10, [0, 1], "an agent exited with 1"),
    ],
    ids=["resumed", "started-over", "older-checkpoint", "killed-late", "never-killed", "stopped-early", "agent-failed"],
)
def test_a_run_passes_only_when_killed_at_the_step_asked_and_resumed_from_the_checkpoint_before(
    steps, resumed_from, exits, problem
):
    request = RehearsalRequest(steps=20, kill_at=12)
    result = outcome(request, records(steps, resumed_from), exits, 95.0, SAVED, COMPLETED)
    assert result.problem == problem
    assert result.summary().endswith("PASSED" if problem is None else f"FAILED: {problem}")
    if problem is None:
        assert (result.killed_at_step, result.checkpoint_at_kill, result.resumed_from) == (12, 10, 10)
        assert result.steps_retrained == [11, 12]  # the work lost with the worker, trained again
        assert "steps 11-12 trained again" in result.summary()
        assert result.recovery_seconds == pytest.approx(1.0)  # from the killed step's record to the next one


def test_the_progress_shows_the_kill_and_the_resume_where_they_happen():
    request = RehearsalRequest(steps=20, kill_at=12)
    run = records([*range(1, 13), *range(11, 21)], [0] * 12 + [10] * 10)
    lines = list(progress(run, 0, request))
    kill = lines.index("step 12/20 loss 4.890") + 1
    assert lines[kill].startswith("killing worker rank 3 after step 12")  # the last of 2 nodes x 2 workers
    assert lines[kill + 1] == "step 11/20 loss 4.880 (resumed from checkpoint-10)"
    assert sum(line.startswith("killing") for line in lines) == 1  # step 12 trained again kills nothing
    assert list(progress(run, 12, request)) == lines[kill + 1 :]  # a later poll prints only the records after the 12th


def drain(after_step: int, sent_at: float, killed: bool = False) -> DrainEvent:
    return DrainEvent(sent_at=sent_at, after_step=after_step, grace_seconds=30, exit_seconds=4.0, killed=killed)


@pytest.mark.parametrize(
    ("steps", "resumed_from", "event", "problem"),
    [
        ([*range(1, 14), *range(14, 21)], [0] * 13 + [13] * 7, drain(12, 111.5), None),
        ([*range(1, 14), *range(11, 21)], [0] * 13 + [10] * 10, drain(12, 111.5), "3 steps lost"),
        ([*range(1, 14), *range(14, 21)], [0] * 13 + [13] * 7, drain(12, 111.5, killed=True), "outlived the 30 s grace"),
        ([*range(1, 21)], [0] * 20, drain(12, 111.5), "training never restarted after the SIGTERM after step 12"),
        ([*range(1, 21)], [0] * 20, None, "the agents ended before drain 1 of 1 was due"),
    ],
    ids=["nothing-lost", "steps-lost", "killed-after-grace", "never-restarted", "never-drained"],
)
def test_a_drain_passes_only_when_the_resumed_job_loses_no_step(steps, resumed_from, event, problem):
    request = RehearsalRequest(steps=20, drain_at=12)
    result = outcome(request, records(steps, resumed_from), [0, 0], 95.0, SAVED, COMPLETED, [event] if event else [])
    if problem is not None:
        assert problem in result.problem and result.summary().endswith(f"FAILED: {result.problem}")
    else:
        assert result.problem is None
        assert (result.drained_at_step, result.resumed_from, result.steps_lost) == (13, 13, 0)
        assert result.drain_to_step_seconds == pytest.approx(113.0 - 111.5)  # SIGTERM to the first step after it
        assert "0 steps lost" in result.summary() and result.summary().endswith("PASSED")


def test_kill_at_kills_at_that_step_and_reports_the_steps_trained_again(tmp_path):
    """A real run, small: two agents of one worker each through a real etcd; the kill between two checkpoints."""
    kill_at = 2 * INTERVAL + 2
    outputs = outputs_file(tmp_path)
    group = PlatformContract.from_outputs(json.loads(fixture_outputs())).node_groups[0]
    nodes = str(min(2, group.max_size))
    ran = run_module(
        "jobs.rehearsal", "--outputs", str(outputs), "--workdir", str(tmp_path / "w"), "--json",
        "--nodes", nodes, "--workers-per-node", "1", "--steps", str(kill_at + 2), "--kill-at", str(kill_at),
        timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    report = json.loads(ran.stdout)
    assert report["passed"] and report["killed_at_step"] == kill_at
    assert report["resumed_from"] == report["checkpoint_at_kill"] == 2 * INTERVAL
    assert report["steps_retrained"] == list(range(2 * INTERVAL + 1, kill_at + 1))
    assert f"killing worker rank {int(nodes) - 1} after step {kill_at}" in ran.stderr


@pytest.mark.stacks
@pytest.mark.parametrize("stack", STACKS)
def test_the_rehearsal_runs_etcd_with_the_stacks_own_member_flags(stack, tmp_path):
    plan = cached_plan(stack, False)
    statefulset = one(plan.find("kubernetes:apps/v1:StatefulSet")).inputs
    planned = LocalEtcd.from_statefulset(statefulset, tmp_path)
    local = LocalEtcd.for_platform(plan.outputs["jobNamespace"], int(statefulset["spec"]["replicas"]), tmp_path)
    assert local.members == planned.members
    assert local.flags == planned.flags and local.health_path == planned.health_path
    # and as many members as the stack runs, which the rehearsal starts unless --etcd-members says otherwise
    assert PlatformContract.from_outputs(plan.outputs).etcd_members == int(statefulset["spec"]["replicas"])


def test_local_etcd_serves_until_stopped_and_prints_where(tmp_path):
    command = [sys.executable, "-m", "jobs.local_etcd", "--outputs", str(outputs_file(tmp_path)), "--members", "3"]
    server = subprocess.Popen([*command, "--workdir", str(tmp_path / "etcd")], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        endpoints = [server.stdout.readline().strip() for _ in range(3)]
        assert [line.split(":")[0] for line in endpoints] == ["etcd-0", "etcd-1", "etcd-2"]
        endpoint = endpoints[0].split("--rdzv_endpoint=", 1)[1]
        with urllib.request.urlopen(f"http://{endpoint}/health", timeout=5) as answer:
            assert json.load(answer)["health"] == "true"
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    assert not any(line.startswith("etcd-") for line in server.stdout.read().splitlines())
