"""What Volcano's job controller does with a Volcano Job when one of its pods ends: the action its lifecycle policies
choose and the job's retryCount, version and phase after it (Volcano release-1.15, the version the platform pins).
`jobs.rehearsal` restarts a rehearsed job by it, so a job spec Volcano would fail at its third drain fails there too.

Sources, all under ``pkg/`` of volcano-sh/volcano at release-1.15:

- admission: ``webhooks/admission/jobs/validate/util.go`` validatePolicies (62-123) refuses a policy with both an event
  and an exit code or neither, exit code 0, an event or exit code twice, and an event or action a job may not name
  (policyEventMap, policyActionMap, 30-60); ``webhooks/admission/jobs/mutate/mutate_job.go`` (161-164) makes a
  maxRetry of 0 the default 3.
- the event of a pod's end: ``controllers/job/job_controller_handler.go`` updatePod (269-301) reacts to the pod's
  phase alone: a pod turning Failed is PodFailed with its first container's exit code, or 0 where no container
  reports one (a pod whose node vanished, which Kubernetes' pod garbage collector fails and deletes:
  ``pkg/controller/podgc/gc_controller.go`` gcOrphaned, markFailedAndDeletePodWithCondition); one turning Succeeded
  is TaskCompleted once every pod of its task has succeeded (else nothing to match); deletePod (377): a pod deleted
  before Volcano saw it end is PodEvicted (exit code 0). A pod being deleted (a drain, an eviction) is nothing yet:
  the job reacts when its container ends, 143 after a drain's checkpoint, 137 when the grace period ran out first.
  Volcano v1.7.0's updatePod (213-216) still treated a terminating pod as deleted, a PodEvicted at once.
- the action: ``controllers/job/job_controller_util.go`` applyPolicies (182-284): an event of an older job version
  syncs (212-216); else the task's policies, then the job's, in order, each matched by its events ('*' for any;
  PodPending only with a timeout) or by its exit code; the first match wins; none: SyncJob.
- the status: ``controllers/job/state/running.go`` and ``pending.go``: RestartJob, RestartTask, RestartPod and
  RestartPartition add one to retryCount (running.go 35-46); TerminateJob, AbortJob and CompleteJob end the job
  (47-61; ``terminating.go`` 28-36: Terminated once no pod is alive); SyncJob completes the job once every pod has
  ended, Completed if at least minAvailable succeeded, else Failed (running.go 62-104). Killing the whole job bumps
  its version (``job_controller_actions.go`` killPods 147-149); ``restarting.go`` (31-40) then fails the job if
  retryCount >= maxRetry, else creates its pods again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError

INT32_MAX = 2**31 - 1
DEFAULT_MAX_RETRY = 3  # mutate_job.go DefaultMaxRetry, given to a job whose maxRetry is 0
# The events and actions a job's policies may name (util.go policyEventMap and policyActionMap, those marked true).
POLICY_EVENTS = ("*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated")
POLICY_ACTIONS = (
    "AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob", "CompleteJob", "ResumeJob",
)  # fmt: skip
RESTARTS = ("RestartJob", "RestartTask", "RestartPod", "RestartPartition")  # each one adds to retryCount
ENDINGS = {"TerminateJob": "Terminated", "AbortJob": "Aborted", "CompleteJob": "Completed"}
FINISHED = ("Completed", "Failed", "Terminated", "Aborted")
SYNC = "SyncJob"

Phase = Literal["Running", "Restarting", "Completed", "Failed", "Terminated", "Aborted"]


class VolcanoRefusal(ValueError):
    """What Volcano's admission webhook would answer to the job, in its words."""


class Policy(BaseModel):
    """One lifecycle policy of a job or a task (batch/v1alpha1 LifecyclePolicy)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    action: str
    event: str | None = None
    events: tuple[str, ...] = ()
    exit_code: Annotated[int, Field(ge=-(2**31), le=INT32_MAX)] | None = Field(None, alias="exitCode")
    timeout: str | None = None

    @property
    def event_list(self) -> tuple[str, ...]:
        """Its events, ``event`` last (job_controller_util.go getEventlist)."""
        return (*self.events, self.event) if self.event else self.events

    def matches(self, event: str, exit_code: int) -> bool:
        """Whether applyPolicies picks this policy for ``event`` with ``exit_code`` (job_controller_util.go 259-280)."""
        named = bool(self.event_list) and ("*" in self.event_list or event in self.event_list)
        # shouldConfigureTimeout: a PodPending policy applies only with a timeout
        if named and (event != "PodPending" or self.timeout is not None):
            return True
        return self.exit_code is not None and self.exit_code == exit_code


def admission_problem(policies: tuple[Policy, ...]) -> str | None:
    """Why Volcano's admission webhook refuses these policies (util.go validatePolicies 62-123), or None."""
    events: set[str] = set()
    exit_codes: set[int] = set()
    for policy in policies:
        if policy.event_list and policy.exit_code is not None:
            return "must not specify event and exitCode simultaneously"
        if not policy.event_list and policy.exit_code is None:
            return "either event and exitCode should be specified"
        for event in policy.event_list:
            if event not in POLICY_EVENTS:
                return f"{event}: invalid policy event"
            if policy.action not in POLICY_ACTIONS:
                return f"{policy.action}: invalid policy action"
            if event in events:
                return f"duplicate event {event}  across different policy"
            events.add(event)
        if not policy.event_list:
            if policy.exit_code == 0:
                return "0 is not a valid error code"
            if policy.exit_code in exit_codes:
                return f"duplicate exitCode {policy.exit_code}"
            exit_codes.add(policy.exit_code)
    if "*" in events and len(events) > 1:
        return "if there's * here, no other policy should be here"
    return None


class Task(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    replicas: NonNegativeInt = 1
    policies: tuple[Policy, ...] = ()


class JobLifecycle(BaseModel):
    """The part of a Volcano Job's spec that decides its restarts, as Volcano admits it."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    max_retry: Annotated[int, Field(ge=0, le=INT32_MAX)] = Field(0, alias="maxRetry")  # the CRD: int32, minimum 0
    min_available: NonNegativeInt = Field(0, alias="minAvailable")
    policies: tuple[Policy, ...] = ()
    tasks: tuple[Task, ...]

    @classmethod
    def of(cls, job: dict) -> JobLifecycle:
        """The lifecycle of ``job`` (a Volcano Job manifest) after Volcano's admission webhook: its maxRetry of 0 made
        the default 3; a job the webhook refuses raises VolcanoRefusal."""
        if "minSuccess" in job["spec"]:  # running.go 70-74 completes such a job early; the launcher's jobs have none
            raise ValueError("spec.minSuccess: the lifecycle model covers jobs without it, as the launcher builds them")
        try:
            lifecycle = cls.model_validate(job["spec"])
        except ValidationError as error:
            detail = error.errors(include_url=False)[0]
            raise VolcanoRefusal(f"spec.{'.'.join(map(str, detail['loc']))}: {detail['msg']}") from None
        for policies in (lifecycle.policies, *(task.policies for task in lifecycle.tasks)):
            problem = admission_problem(policies)
            if problem is not None:
                raise VolcanoRefusal(problem)
        return lifecycle if lifecycle.max_retry else lifecycle.model_copy(update={"max_retry": DEFAULT_MAX_RETRY})

    @property
    def replicas(self) -> int:
        return sum(task.replicas for task in self.tasks)

    def action(self, task: str, event: str, exit_code: int) -> str:
        """The action applyPolicies chooses for a current pod's event: the task's policies first, then the job's."""
        (own,) = [t.policies for t in self.tasks if t.name == task]
        return next((policy.action for policy in (*own, *self.policies) if policy.matches(event, exit_code)), SYNC)


@dataclass(frozen=True)
class PodEnd:
    """How one pod of the job ended: its container's exit code; or None, with ``how``: ``node-lost`` (failed by the
    pod garbage collector, no container end) or ``deleted`` (gone before Volcano saw it end)."""

    task: str
    version: int  # the job version the pod was created at (its volcano.sh/job-version annotation)
    exit_code: int | None
    how: Literal["exited", "node-lost", "deleted"] = "exited"

    @classmethod
    def node_lost(cls, task: str, version: int) -> PodEnd:
        return cls(task, version, None, "node-lost")

    @classmethod
    def deleted(cls, task: str, version: int) -> PodEnd:
        return cls(task, version, None, "deleted")


@dataclass(frozen=True)
class JobStatus:
    """The job's status.state.phase, retryCount and version, and how its current pods ended so far."""

    phase: Phase = "Running"
    retry_count: int = 0
    version: int = 0
    succeeded: tuple[str, ...] = ()  # the task of each pod of the current version that succeeded
    failed: int = 0


def event_of(lifecycle: JobLifecycle, status: JobStatus, end: PodEnd) -> tuple[str, int]:
    """The event and exit code Volcano's pod handlers send for ``end`` (updatePod 269-301, deletePod 377)."""
    if end.how == "deleted":
        return "PodEvicted", 0
    if end.how == "node-lost":  # Failed, and no container reports an exit code
        return "PodFailed", 0
    if end.exit_code != 0:
        return "PodFailed", end.exit_code
    (task,) = [t for t in lifecycle.tasks if t.name == end.task]
    return ("TaskCompleted" if status.succeeded.count(end.task) + 1 == task.replicas else "OutOfSync"), 0


def pod_ended(lifecycle: JobLifecycle, status: JobStatus, end: PodEnd) -> tuple[str, JobStatus]:
    """The action Volcano takes on ``end`` and the job's status after it, its pods gone when it restarts or ends."""
    if status.phase in FINISHED:
        return SYNC, status
    if end.version < status.version:  # a pod of a run the job already left (applyPolicies 212-216)
        return SYNC, status
    event, exit_code = event_of(lifecycle, status, end)
    action = lifecycle.action(end.task, event, exit_code) if event != "OutOfSync" else SYNC
    if action in RESTARTS:
        retries = status.retry_count + 1
        version = status.version + (action == "RestartJob")
        phase = "Failed" if retries >= lifecycle.max_retry else "Restarting"
        return action, JobStatus(phase, retries, version)
    if action in ENDINGS:
        return action, JobStatus(ENDINGS[action], status.retry_count, status.version + 1)
    if end.how == "deleted":  # SyncJob creates the deleted pod again (job_controller_actions.go syncJob 444-494)
        return action, status
    ok = end.how == "exited" and end.exit_code == 0
    succeeded = (*status.succeeded, end.task) if ok else status.succeeded
    failed = status.failed + (not ok)
    phase = status.phase
    if len(succeeded) + failed == lifecycle.replicas:
        phase = "Completed" if len(succeeded) >= lifecycle.min_available else "Failed"
    return action, JobStatus(phase, status.retry_count, status.version, succeeded, failed)


def pods_recreated(status: JobStatus) -> JobStatus:
    """The job once its pods are created again after a restart (restarting.go 41-49, pending.go 58-65)."""
    return JobStatus("Running", status.retry_count, status.version)
