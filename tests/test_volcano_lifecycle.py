"""The Volcano Jobs the launcher builds, under Volcano's own rules (``jobs.rehearsal.volcano_lifecycle``, release-1.15): admitted
by its CRD and webhook, restarted without end by every end a drain or a lost node gives a pod (143 after its
checkpoint, 137 when the grace period ran out, a node gone, a pod deleted) and by a crash within the budget, ended
by a crash budget spent; the spec of release 0.18.0 ended by a drain's SIGKILL and a lost node on 1.15; and the
spec before it (maxRetry 3, every failure a restart) failed at its third drain, as Volcano fails it."""

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
from training import crash_budget

DRAINED, KILLED, CRASHED = 143, 137, 1
# The lifecycle of release 0.18.0's jobs, written for a Volcano that saw a terminating pod as evicted.
SPEC_0_18 = {
    "policies": [
        {"exitCode": 143, "action": "RestartJob"},
        {"event": "PodEvicted", "action": "RestartJob"},
        {"event": "PodFailed", "action": "TerminateJob"},
    ]
}
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


def ends(task: str, version: int) -> dict[str, PodEnd]:
    """Each way a pod of the job ends after a disruption: what its container exits with, or how it went."""
    return {
        "drained": PodEnd(task, version, DRAINED),
        "killed-at-grace-end": PodEnd(task, version, KILLED),
        "node-lost": PodEnd.node_lost(task, version),
        "deleted": PodEnd.deleted(task, version),
        "crashed": PodEnd(task, version, CRASHED),
    }


def drains(lifecycle: JobLifecycle, count: int, how: str = "drained") -> list[JobStatus]:
    """The job's status after each of ``count`` ends (``ends``) of its first pod, each run's pods created again if it
    restarts."""
    status, seen = JobStatus(), []
    task = lifecycle.tasks[0].name
    for _ in range(count):
        _, status = pod_ended(lifecycle, status, ends(task, status.version)[how])
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
@pytest.mark.parametrize("how", ["drained", "killed-at-grace-end", "node-lost", "deleted", "crashed"])
def test_the_launchers_jobs_outlive_a_thousand_disruptions_of_each_kind(launched, workload, how):
    """A crash restarts the job too: the agent, not Volcano, ends a crash loop (the next test)."""
    history = drains(JobLifecycle.of(launched[workload]), 1000, how)
    assert len(history) == 1000 and {status.phase for status in history} == {"Restarting"}
    assert history[-1].retry_count == 1000 and history[-1].version == 1000  # each restart a new rendezvous id


@pytest.mark.parametrize("workload", ["bert", "torchtitan"])
def test_a_crash_budget_spent_ends_the_launchers_jobs(launched, workload):
    lifecycle = JobLifecycle.of(launched[workload])
    spent = PodEnd(lifecycle.tasks[0].name, 0, crash_budget.BUDGET_SPENT_EXIT_CODE)
    action, status = pod_ended(lifecycle, JobStatus(), spent)
    assert (action, status.phase, status.retry_count) == ("TerminateJob", "Terminated", 0)


@pytest.mark.parametrize("how", ["killed-at-grace-end", "node-lost"])
def test_release_0_18s_lifecycle_ends_the_run_when_a_drain_overruns_or_a_node_vanishes(launched, how):
    """On 1.15 the job sees a drained pod's end, not its deletion: a SIGKILL'd drain or a lost node was PodFailed."""
    lifecycle = JobLifecycle.of(with_lifecycle(launched["bert"], SPEC_0_18))
    assert drains(lifecycle, 10, "drained")[-1].phase == "Restarting"
    assert [status.phase for status in drains(lifecycle, 10, how)] == ["Terminated"]


def test_the_old_spec_fails_the_job_at_its_third_drain(launched):
    lifecycle = JobLifecycle.of(with_lifecycle(launched["bert"], OLD_SPEC))
    history = drains(lifecycle, 10)
    assert [(status.phase, status.retry_count) for status in history] == [("Restarting", 1), ("Restarting", 2), ("Failed", 3)]
    # A crash and a drain share the one counter, and nothing resets it.
    task = lifecycle.tasks[0].name
    _, status = pod_ended(lifecycle, JobStatus(), PodEnd(task, 0, CRASHED))
    assert (status.phase, status.retry_count) == ("Restarting", 1)


def test_policies_match_in_order(launched):
    """A PodFailed policy listed before the exit-code one would take a spent budget's end first: a crash loop forever."""
    policies = launched["bert"]["spec"]["policies"]
    reordered = JobLifecycle.of(with_lifecycle(launched["bert"], {"policies": policies[::-1]}))
    spent = PodEnd(reordered.tasks[0].name, 0, crash_budget.BUDGET_SPENT_EXIT_CODE)
    assert pod_ended(reordered, JobStatus(), spent)[1].phase == "Restarting"


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
