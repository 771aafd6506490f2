"""`python -m jobs.rehearsal` and `python -m jobs.local_etcd`: what they refuse, how they judge a run, and that
their etcd is the platform's. The training runs themselves are in test_distributed_training.py."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

import pytest
from support import STACKS, cached_plan, one

from jobs.local_etcd import LocalEtcd
from jobs.rehearsal import RehearsalRequest, outcome
from preflight.stackfile import REPO_ROOT


def outputs_file(tmp_path, stack: str = "staging"):
    path = tmp_path / f"{stack}.json"
    path.write_text(json.dumps(cached_plan(stack, False).outputs))
    return path


def run_module(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", ["jobs.rehearsal", "jobs.local_etcd"])
def test_help_says_how_to_run_it(module):
    result = run_module(module, "--help")
    assert result.returncode == 0 and f"python -m {module}" in result.stdout and "--outputs" in result.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--kill-at", "3"], "--kill-at 3: the first checkpoint is written at step 5"),
        (["--kill-at", "40"], "--kill-at 40: the run ends at step 40"),
        (["--steps", "0"], "--steps 0: input should be greater than 0"),
        (["--etcd-members", "2"], "--etcd-members 2"),
        (["--nodes", "3"], "--nodes 3: elastic node group trn1-32xl grows to 2 nodes at most"),
        (["--node-group", "gpu"], "--node-group gpu: no such node group"),
        (["--workers-per-node", "64"], "has 32 NeuronCores"),
    ],
)
def test_bad_options_exit_2_with_one_line_before_anything_starts(tmp_path, args, words):
    result = run_module("jobs.rehearsal", "--outputs", str(outputs_file(tmp_path)), "--workdir", str(tmp_path / "w"), *args)
    assert result.returncode == 2, result.stdout
    assert result.stderr.strip().count("\n") == 0 and words in result.stderr, result.stderr
    assert not (tmp_path / "w" / "etcd").exists()  # refused before etcd or an agent ran


def records(steps: list[int], resumed_from: list[int], start: float = 100.0) -> list[dict]:
    return [
        {"step": step, "loss": 5.0 - 0.01 * i, "resumed_from": loaded, "time": start + i}
        for i, (step, loaded) in enumerate(zip(steps, resumed_from, strict=True))
    ]


KILLED_AT_12 = {"killed_at_step": 12, "checkpoint_at_kill": 10, "time": 111.5}


@pytest.mark.parametrize(
    ("steps", "resumed_from", "exits", "problem"),
    [
        ([*range(1, 13), *range(11, 21)], [0] * 12 + [10] * 10, [0, 0], None),
        ([*range(1, 13), *range(1, 21)], [0] * 32, [0, 0], "no worker resumed after the kill"),
        ([*range(1, 13), *range(6, 21)], [0] * 12 + [5] * 15, [0, 0], "training restarted from step 5, not from checkpoint-10"),
        ([*range(1, 13), *range(11, 16)], [0] * 12 + [10] * 5, [0, 0], "training stopped at step 15 of 20"),
        ([*range(1, 13), *range(11, 21)], [0] * 12 + [10] * 10, [0, 1], "an agent exited with 1"),
    ],
    ids=["resumed", "started-over", "older-checkpoint", "stopped-early", "agent-failed"],
)
def test_a_run_passes_only_when_training_resumed_from_the_checkpoint_before_the_kill(steps, resumed_from, exits, problem):
    request = RehearsalRequest(steps=20, kill_at=12)
    result = outcome(request, records(steps, resumed_from), exits, 95.0, KILLED_AT_12)
    assert result.problem == problem
    assert result.summary().endswith("PASSED" if problem is None else f"FAILED: {problem}")
    if problem is None:
        assert result.recovery_seconds == pytest.approx(12 + 100 - 111.5)  # from the kill to the first step trained again


@pytest.mark.parametrize("stack", STACKS)
def test_the_rehearsal_runs_etcd_with_the_stacks_own_member_flags(stack, tmp_path):
    plan = cached_plan(stack, False)
    statefulset = one(plan.find("kubernetes:apps/v1:StatefulSet")).inputs
    planned = LocalEtcd.from_statefulset(statefulset, tmp_path)
    local = LocalEtcd.for_platform(plan.outputs["jobNamespace"], int(statefulset["spec"]["replicas"]), tmp_path)
    assert local.members == planned.members
    assert local.flags == planned.flags and local.health_path == planned.health_path


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
