"""How the API server's quota admission and Volcano's queue count the pods of a job, for tests: an oracle written apart
from ``jobs.job_building.capacity`` (which the tools size their jobs by), from the Kubernetes and Volcano sources, so that a test
can check the tools' jobs against the plan's own ResourceQuota and Queue objects.

- The pods: what the Job controllers create (``admitted_workloads``): a Volcano Job's ``replicas`` pods of each task
  (pkg/controllers/job/job_controller_actions.go syncJob, 469), a batch Job's ``parallelism`` pods of its template
  (Kubernetes docs, "Jobs", "Parallel execution for Jobs"). The tools' jobs run every pod at once (a Volcano Job's
  minAvailable is all of them, a batch Job's completions its parallelism), so all of them count together.
- A container's limit of a resource whose request it does not set becomes its request when the API server defaults
  the pod (Kubernetes docs, "Resource Management for Pods and Containers"); a pod's request is its containers' sum
  (the tools' pods have no init containers, which would count where larger: Kubernetes docs, "Init containers"; the
  oracle refuses to count one, so that a tool that adds one fails here until both counts take it).
- ResourceQuota (Kubernetes docs, "Resource Quotas"): ``pods`` and ``count/pods`` count pods; ``requests.<name>`` and
  the bare ``cpu``, ``memory`` and ``ephemeral-storage`` sum the pods' requests, ``limits.<name>`` their limits; a pod
  that would take the sum beyond ``hard`` is refused at creation.
- Volcano's proportion plugin (release-1.15 pkg/scheduler/plugins/proportion/proportion.go 120-127, 132-138 and 412-430,
  pkg/scheduler/api/resource_info.go 87-123 ``NewResource``, 479-524 ``LessEqualWithDimensionAndResourcesName``,
  949-985 ``MinDimensionResource``): a job is enqueued only while its minResources fit the queue's capability in each
  dimension the job requests; cpu in millicores, memory in bytes, a scalar resource in thousandths; a capability's cpu
  or memory at 0 or below is no bound, and a scalar the capability does not name is bounded by the cluster's total
  alone, which a plan does not know (none here)."""

from __future__ import annotations

import math
from fractions import Fraction

from admitted_workloads import POD, workloads

from trainium_eks.quantities import quantity

BARE_REQUESTS = ("cpu", "memory", "ephemeral-storage")  # quota keys that count requests without the prefix
POD_COUNTS = ("pods", "count/pods")


def pods_created(job: dict) -> list[dict]:
    """Every pod the controllers create for one of the tools' manifests, as the API server admits it."""
    created = [pod for kind, pod in workloads(job) if kind == POD]
    if job["apiVersion"] == "batch/v1":
        (pod,) = created
        return [pod] * job["spec"]["parallelism"]
    replicas = [task["replicas"] for task in job["spec"]["tasks"]]
    return [pod for pod, count in zip(created, replicas, strict=True) for _ in range(count)]


def _defaulted(container: dict, kind: str) -> dict[str, Fraction]:
    resources = container.get("resources", {})
    limits = {name: quantity(value) for name, value in resources.get("limits", {}).items()}
    if kind == "limits":
        return limits
    return {**limits, **{name: quantity(value) for name, value in resources.get("requests", {}).items()}}


def pod_amounts(pod: dict, kind: str) -> dict[str, Fraction]:
    """A pod's ``requests`` (or ``limits``) by resource: its containers' sum."""
    assert "initContainers" not in pod["spec"], "the oracle does not count init containers"
    total: dict[str, Fraction] = {}
    for container in pod["spec"]["containers"]:
        for name, amount in _defaulted(container, kind).items():
            total[name] = total.get(name, Fraction(0)) + amount
    return total


def quota_used(pods: list[dict], key: str) -> Fraction:
    """What ``pods`` take of the quota key ``key``."""
    if key in POD_COUNTS:
        return Fraction(len(pods))
    if key in BARE_REQUESTS:
        kind, name = "requests", key
    else:
        kind, dot, name = key.partition(".")
        assert dot and kind in ("requests", "limits"), f"the oracle does not count the quota key {key}"
    return sum((pod_amounts(pod, kind).get(name, Fraction(0)) for pod in pods), Fraction(0))


def quota_refusals(pods: list[dict], quota: dict) -> dict[str, tuple[Fraction, Fraction]]:
    """Each key of the ResourceQuota object ``quota`` that ``pods`` would take beyond its ``hard``: (used, hard)."""
    refused = {}
    for key, hard in quota["spec"]["hard"].items():
        used, most = quota_used(pods, key), quantity(hard)
        if used > most:
            refused[key] = (used, most)
    return refused


def _volcano_units(name: str, amount: Fraction) -> float:
    """A quantity as Volcano's Resource holds it: cpu in millicores, memory in bytes, a scalar in thousandths."""
    if name == "memory":
        return float(math.ceil(amount))
    return float(math.ceil(amount * 1000))


def queue_refusals(pods: list[dict], queue: dict) -> dict[str, tuple[float, float]]:
    """Each resource in which the pods' requests together exceed the Queue object ``queue``'s capability:
    (requested, capability), in Volcano's units."""
    requested: dict[str, Fraction] = {}
    for pod in pods:
        for name, amount in pod_amounts(pod, "requests").items():
            requested[name] = requested.get(name, Fraction(0)) + amount
    capability = {name: quantity(value) for name, value in queue["spec"].get("capability", {}).items()}
    refused = {}
    for name, amount in requested.items():
        if amount <= 0 or name not in capability:
            continue  # not requested; or not named: bounded by the cluster's total alone
        most = capability[name]
        if name in ("cpu", "memory") and most <= 0:
            continue
        asked, limit = _volcano_units(name, amount), _volcano_units(name, most)
        if asked > limit:
            refused[name] = (asked, limit)
    return refused
