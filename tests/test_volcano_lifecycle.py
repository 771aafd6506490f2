"""The Volcano Jobs the launcher builds, under Volcano's own rules (``jobs.rehearsal.volcano_lifecycle``, release-1.15): admitted
by its CRD and webhook, restarted by a drain or an eviction without end, ended by a crash budget spent; and the
spec they replace (maxRetry 3, every failure a restart) failed at its third drain, as Volcano fails it."""

from __future__ import annotations

import pytest
from job_outputs import TWO_GENERATIONS, assert_valid_lifecycle, launch_json, outputs_file

from jobs.rehearsal.volcano_lifecycle import (
    JobLifecycle,
    JobStatus,
    PodEnd,
    Policy,
    VolcanoRefusal,
    admission_problem,
    pod_ended,
    pods_recreated,
)

DRAINED, CRASH_BUDGET_SPENT, DELETED = 143, 1, None
# The lifecycle the launcher's jobs had before: every failed or evicted pod restarts the job, 3 restarts at most.
OLD_SPEC = {
    "maxRetry": 3,
    "policies": [{"event": "PodFailed", "action": "RestartJob"}, {"event": "PodEvicted", "action": "RestartJob"}],
}


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> dict[str, dict]:
    """The Volcano Jobs `jobs.launch --dryrun` builds for BERT on the trn1 group and TorchTitan on the trn2 group."""
    path, _ = outputs_file(tmp_path_factory.mktemp("outputs"), **TWO_GENERATIONS)
    common = ("--outputs", str(path), "--dryrun", "--json", "--step-seconds", "7.5")
    return {
        "bert": launch_json(*common, "--node-group", "trn1-32xl"),
        "torchtitan": launch_json(*common, "--workload", "torchtitan", "--node-group", "trn2-48xl"),
    }


def with_lifecycle(job: dict, spec: dict) -> dict:
    return {**job, "spec": {**job["spec"], **spec}}


def drains(lifecycle: JobLifecycle, count: int, exit_code: int | None = DRAINED) -> list[JobStatus]:
    """The job's status after each of ``count`` drains of its first pod, each run's pods created again if it restarts."""
    status, seen = JobStatus(), []
    task = lifecycle.tasks[0].name
    for _ in range(count):
        _, status = pod_ended(lifecycle, status, PodEnd(task, status.version, exit_code))
        seen.append(status)
        if status.phase != "Restarting":
            break
        status = pods_recreated(status)
    return seen


@pytest.mark.parametrize("workload", ["bert", "torchtitan"])
def test_the_launchers_jobs_pass_volcanos_crd_and_admission_webhook(launched, workload):
    job = launched[workload]
    assert_valid_lifecycle(job)
    assert JobLifecycle.of(job).max_retry == job["spec"]["maxRetry"]  # not 0, which the webhook would make 3


@pytest.mark.parametrize("workload", ["bert", "torchtitan"])
def test_the_launchers_jobs_outlive_a_thousand_drains_and_evictions_and_end_when_torchrun_gives_up(launched, workload):
    lifecycle = JobLifecycle.of(launched[workload])
    for ending in (DRAINED, DELETED):
        history = drains(lifecycle, 1000, ending)
        assert len(history) == 1000 and {status.phase for status in history} == {"Restarting"}
        assert history[-1].retry_count == 1000 and history[-1].version == 1000  # each restart a new rendezvous id
    action, status = pod_ended(lifecycle, JobStatus(), PodEnd(lifecycle.tasks[0].name, 0, CRASH_BUDGET_SPENT))
    assert (action, status.phase, status.retry_count) == ("TerminateJob", "Terminated", 0)


def test_the_old_spec_fails_the_job_at_its_third_drain(launched):
    lifecycle = JobLifecycle.of(with_lifecycle(launched["bert"], OLD_SPEC))
    history = drains(lifecycle, 10)
    assert [(status.phase, status.retry_count) for status in history] == [("Restarting", 1), ("Restarting", 2), ("Failed", 3)]
    # A crash and a drain share the one counter, and nothing resets it.
    task = lifecycle.tasks[0].name
    _, status = pod_ended(lifecycle, JobStatus(), PodEnd(task, 0, CRASH_BUDGET_SPENT))
    assert (status.phase, status.retry_count) == ("Restarting", 1)


def test_policies_match_in_order(launched):
    """A PodFailed policy listed before the exit-code one would take a drained pod's end first and end the job."""
    policies = launched["bert"]["spec"]["policies"]
    reordered = JobLifecycle.of(with_lifecycle(launched["bert"], {"policies": policies[::-1]}))
    assert drains(reordered, 1)[-1].phase == "Terminated"


def test_a_pod_of_a_run_already_restarted_changes_nothing(launched):
    """Every agent of a drained job exits 143: the first restarts the job; the others belong to the old version."""
    lifecycle = JobLifecycle.of(launched["bert"])
    first, second = [t.name for t in lifecycle.tasks]  # two nodes, a task each
    _, restarted = pod_ended(lifecycle, JobStatus(), PodEnd(first, 0, DRAINED))
    action, after = pod_ended(lifecycle, restarted, PodEnd(second, 0, DRAINED))
    assert (action, after) == ("SyncJob", restarted)


def test_the_job_completes_when_every_pod_succeeds(launched):
    job = launched["bert"]
    two_pods = with_lifecycle(job, {"minAvailable": 2, "tasks": [{**job["spec"]["tasks"][0], "replicas": 2}]})
    lifecycle = JobLifecycle.of(two_pods)
    task = lifecycle.tasks[0].name
    action, first = pod_ended(lifecycle, JobStatus(), PodEnd(task, 0, 0))
    assert (action, first.phase) == ("SyncJob", "Running")
    _, both = pod_ended(lifecycle, first, PodEnd(task, 0, 0))
    assert both.phase == "Completed"


def test_a_max_retry_of_zero_is_volcanos_default_three(launched):
    assert JobLifecycle.of(with_lifecycle(launched["bert"], {"maxRetry": 0})).max_retry == 3


@pytest.mark.parametrize(
    ("policies", "problem"),
    [
        ([{"event": "PodFailed", "exitCode": 143, "action": "RestartJob"}], "must not specify event and exitCode"),
        ([{"action": "RestartJob"}], "either event and exitCode should be specified"),
        ([{"exitCode": 0, "action": "RestartJob"}], "0 is not a valid error code"),
        ([{"exitCode": 143, "action": "RestartJob"}, {"exitCode": 143, "action": "TerminateJob"}], "duplicate exitCode 143"),
        ([{"event": "PodFailed", "action": "RestartJob"}, {"events": ["PodFailed"], "action": "AbortJob"}], "duplicate event"),
        ([{"event": "*", "action": "RestartJob"}, {"event": "PodEvicted", "action": "RestartJob"}], "if there's * here"),
        ([{"event": "PodRunning", "action": "RestartJob"}], "PodRunning: invalid policy event"),
        ([{"event": "PodFailed", "action": "SyncJob"}], "SyncJob: invalid policy action"),
    ],
    ids=["event-and-exit-code", "neither", "exit-code-0", "exit-code-twice", "event-twice", "any-and-more", "event", "action"],
)
def test_what_volcanos_webhook_refuses_is_refused(launched, policies, problem):
    assert problem in admission_problem(tuple(Policy.model_validate(policy) for policy in policies))
    with pytest.raises(VolcanoRefusal, match="^" + problem.replace("*", r"\*")):
        JobLifecycle.of(with_lifecycle(launched["bert"], {"policies": policies}))
