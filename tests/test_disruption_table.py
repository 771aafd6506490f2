"""Every disruption ends in a resumed run, for real: `jobs.rehearsal --disruptions` runs the stack's own BERT job (the
launcher's, grace period and crash budget included) on CPUs through a real etcd and real torchrun agents, once per kind
of disruption, doing to the agents what Karpenter's termination path (``trainium_eks.karpenter_termination``, on the
platform's pool) or a crash does, with Volcano 1.15's lifecycle restarting or ending the job; and every row meets its
target: no step lost where the pods were warned, at most a checkpoint interval where not, a crash loop Terminated
after the run's crash budget (read from the row's whole rehearsal report, which the table's JSON carries as ``run``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import evaluate, one_group

from jobs.job_building.grace_period import pod_grace_seconds
from jobs.job_building.platform_job import CRASH_BUDGET
from jobs.rehearsal import rehearsal_job
from jobs.rehearsal.disruptions import KINDS, action_for
from jobs.rehearsal.report import CHECKPOINT_EVERY, RehearsalRequest
from preflight.stackfile import REPO_ROOT
from training import crash_budget
from trainium_eks.contract import PlatformContract

pytestmark = pytest.mark.minutes  # real components for minutes: scheduled first (tests/conftest.py)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict:
    return evaluate("staging", **one_group("trn1.32xlarge")).outputs


@pytest.fixture(scope="module")
def table(outputs, tmp_path_factory) -> tuple[list[dict], str]:
    directory = tmp_path_factory.mktemp("disruptions")
    path = directory / "outputs.json"
    path.write_text(json.dumps(outputs))
    command = [sys.executable, "-m", "jobs.rehearsal", "--outputs", str(path), "--nodes", "1", "--workers-per-node", "1"]
    ran = subprocess.run(
        [*command, "--disruptions", "--json", "--workdir", str(directory / "w")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert ran.stdout, ran.stderr[-3000:]
    rows = json.loads(ran.stdout)
    assert ran.returncode == (0 if all(row["met"] for row in rows) else 1)
    return rows, ran.stderr


def test_every_kind_of_disruption_meets_its_target(table):
    rows, progress = table
    assert [row["disruption"] for row in rows] == list(KINDS)
    missed = [row for row in rows if not row["met"]]
    assert not missed, (missed, progress[-4000:])


def test_warned_pods_lose_no_step_and_the_others_at_most_a_checkpoint_interval(table, outputs):
    rows, _ = table
    contract = PlatformContract.from_outputs(outputs)
    grace = pod_grace_seconds(rehearsal_job(contract, RehearsalRequest(nodes=1, workers_per_node=1)))
    for row in rows:
        action = action_for(row["disruption"], grace, capacity_block=False)
        if row["disruption"] == "crash-loop":
            assert row["phaseAfter"] == "Terminated"
        elif action.warned:
            assert row["stepsLost"] == 0, row
        else:
            assert 0 <= row["stepsLost"] <= CHECKPOINT_EVERY, row
    by_kind = {row["disruption"]: row for row in rows}
    # the drains the launcher's grace period covers, and the model's verdicts on them
    assert action_for("capacity-block-expiry", grace, False).warned and action_for("manual-drain", grace, False).warned
    assert not action_for("interruption", grace, False).warned  # two minutes end before the pool deletes the pods
    assert by_kind["consolidation"]["phaseAfter"] == "Completed"  # the node was kept, the run untouched


def test_the_rehearsal_drains_with_the_launchers_grace_period_and_the_stacks_etcd(table, outputs):
    _, progress = table
    contract = PlatformContract.from_outputs(outputs)
    grace = pod_grace_seconds(rehearsal_job(contract, RehearsalRequest(nodes=1, workers_per_node=1)))
    assert grace > 30  # the launcher's (a step, the checkpoint, the exit), not Kubernetes' default
    assert f"SIGTERM, SIGKILL {grace} s later" in progress
    assert f"etcd: {contract.etcd_members} member(s)" in progress
    assert "failed with its node -> RestartJob" in progress and "exited 137 -> RestartJob" in progress


def run_of(table, kind: str) -> tuple[dict, str]:
    """``kind``'s rehearsal: its whole report and the progress it printed (from its "--- KIND" line to the next)."""
    rows, progress = table
    lines = progress.splitlines()
    starts = [index for index, line in enumerate(lines) if line.startswith("--- ") and line[4:] in KINDS]
    start = next(index for index in starts if lines[index] == f"--- {kind}")
    end = next((index for index in starts if index > start), len(lines))
    return next(row["run"] for row in rows if row["disruption"] == kind), "\n".join(lines[start:end])


def test_a_worker_that_crashes_at_every_start_ends_the_job_after_the_runs_crash_budget(table):
    report, progress = run_of(table, "crash-loop")
    assert report["passed"], report["problem"]
    runs = report["crash_restarts"] + 1  # the first run of the job and each restart the budget allows
    assert report["crash_restarts"] == CRASH_BUDGET and report["job_retry_count"] == CRASH_BUDGET
    assert report["worker_starts"] == runs * (report["crash_budget"] + 1)  # torchrun's own restarts in each run
    assert report["job_phase"] == "Terminated"
    assert progress.count("exited 1 -> RestartJob") == CRASH_BUDGET
    assert f"exited {crash_budget.BUDGET_SPENT_EXIT_CODE} -> TerminateJob" in progress
