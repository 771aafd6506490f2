"""Runs that outlive any number of planned drains, and a crash budget that still ends a job, for real: the pods'
entrypoint (``training.agent``) under real torchrun agents, and `jobs.rehearsal` restarting the launcher's BERT job by
its own Volcano lifecycle (``jobs.rehearsal.volcano_lifecycle``) on one node of one worker, through a real etcd. A
worker that crashes at every start is the disruption table's crash-loop row (tests/test_disruption_table.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support import evaluate, one_group

from jobs.rehearsal import rehearsal_job, rehearse
from jobs.rehearsal.report import RehearsalRequest
from preflight.stackfile import REPO_ROOT
from training import crash_budget
from trainium_eks.contract import PlatformContract

pytestmark = pytest.mark.minutes  # real components for minutes: scheduled first (tests/conftest.py)

WORKER = """
import sys, time
print("worker started", flush=True)
if sys.argv[1] == "crash":
    sys.exit(3)
time.sleep(120)
"""
ONE_WORKER = ("--nodes", "1", "--workers-per-node", "1")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    path = tmp_path_factory.mktemp("outputs") / "outputs.json"
    path.write_text(json.dumps(evaluate("staging", **one_group("trn1.32xlarge")).outputs))
    return path


def agent(tmp_path, mode: str, max_restarts: int, env: dict[str, str] | None = None) -> subprocess.Popen:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    command = [sys.executable, "-m", "training.agent", "--standalone", "--nproc_per_node=1", f"--max-restarts={max_restarts}"]
    log = (tmp_path / f"{mode}.log").open("w")
    environment = {**os.environ, **(env or {})}
    return subprocess.Popen([*command, str(script), mode], cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, env=environment)


def test_the_entrypoint_exits_143_when_sigterm_stops_torchrun_and_1_when_torchrun_gives_up(tmp_path):
    crashing = agent(tmp_path, "crash", max_restarts=1)
    assert crashing.wait(timeout=120) == 1  # ChildFailedError after the one restart; no budget set: torchrun's status
    assert (tmp_path / "crash.log").read_text().count("worker started") == 2
    sleeping = agent(tmp_path, "sleep", max_restarts=3)
    deadline = time.monotonic() + 60
    while "worker started" not in (tmp_path / "sleep.log").read_text():
        assert time.monotonic() < deadline and sleeping.poll() is None, (tmp_path / "sleep.log").read_text()
        time.sleep(0.1)
    sleeping.send_signal(signal.SIGTERM)  # as the kubelet sends it to a drained pod's PID 1
    assert sleeping.wait(timeout=60) == 143, (tmp_path / "sleep.log").read_text()


def test_the_entrypoint_ends_a_run_whose_crashes_in_a_row_pass_its_budget(tmp_path):
    """The count lives in the run's directory, across job versions: 1 restarts the job, 3 ends it; a version that
    did not crash (a drain's) breaks the row."""
    run_directory = tmp_path / "run"

    def crash_in(version: int) -> int:
        env = {crash_budget.BUDGET_ENV: "1", crash_budget.RUN_DIRECTORY_ENV: str(run_directory)}
        return agent(tmp_path, "crash", max_restarts=0, env={crash_budget.JOB_VERSION_ENV: str(version), **env}).wait(120)

    assert [crash_in(0), crash_in(1)] == [crash_budget.CRASHED_EXIT_CODE, crash_budget.BUDGET_SPENT_EXIT_CODE]
    assert crash_in(3) == crash_budget.CRASHED_EXIT_CODE  # version 2 was drained: the row starts again


def rehearsal(outputs, tmp_path, *args: str) -> dict:
    command = [sys.executable, "-m", "jobs.rehearsal", "--outputs", str(outputs), "--workdir", str(tmp_path / "w")]
    ran = subprocess.run([*command, "--json", *ONE_WORKER, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    report = json.loads(ran.stdout)
    assert ran.returncode == (0 if report["passed"] else 1), ran.stderr[-3000:]
    return report | {"progress": ran.stderr}


def test_ten_drains_in_a_row_lose_no_step_and_the_job_goes_on(outputs, tmp_path):
    report = rehearsal(outputs, tmp_path, "--steps", "25", "--drain-at", "1", "--drains", "10")
    assert report["passed"], report["problem"]
    assert len(report["drains"]) == 10 and report["steps_lost"] == 0
    assert report["steps_trained"][-1] == 25 and report["job_phase"] == "Completed"
    assert report["job_retry_count"] == 10  # Volcano counted every drain, and maxRetry let every one restart the job
    assert report["progress"].count("exited 143 -> RestartJob") == 10


def test_the_old_lifecycle_dies_at_its_third_drain_in_the_rehearsal_too(outputs, tmp_path):
    """The spec the launcher built before (maxRetry 3, a failed pod restarts the job), rehearsed as Volcano runs it."""
    contract = PlatformContract.from_outputs(json.loads(outputs.read_text()))
    request = RehearsalRequest(nodes=1, workers_per_node=1, steps=25, drain_at=1, drains=5)
    job = rehearsal_job(contract, request)
    job["spec"] |= {"maxRetry": 3, "policies": [{"event": "PodFailed", "action": "RestartJob"}]}
    result = rehearse(contract, request, job, tmp_path, say=lambda line: None)
    assert len(result.drains) == 3 and (result.job_phase, result.job_retry_count) == ("Failed", 3)
    assert not result.passed and result.problem.startswith("Volcano left the job Failed")
