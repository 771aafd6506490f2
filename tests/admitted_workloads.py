"""What reaches validating admission, for tests: a pod as the API server hands it over (after its defaults), and what
the controllers create for one manifest of the platform's tools: Volcano's PodGroup and pods for a Volcano Job, the Job
controller's pods for a batch Job, and the PodGroup Volcano creates for those of its pods on Volcano's scheduler.
"""

from __future__ import annotations

import copy

from admission_review import Kind

from trainium_eks import layout

VOLCANO_JOB = Kind("batch.volcano.sh", "v1alpha1", "Job", "jobs")
POD_GROUP = Kind("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups")
POD = Kind("", "v1", "Pod", "pods")
BATCH_JOB = "batch/v1"

# What the API server sets on every pod before validating admission: the scheduler's default (Pod defaulting) and the
# not-ready and unreachable tolerations (the DefaultTolerationSeconds admission plugin).
DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_TOLERATIONS = [
    {"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    for taint in ("not-ready", "unreachable")
]


def admitted_pod(spec: dict, namespace: str, **metadata) -> dict:
    """A pod as validating admission sees it, after the API server's defaults."""
    pod_spec = copy.deepcopy(spec)
    pod_spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    pod_spec["tolerations"] = [*pod_spec.get("tolerations", []), *DEFAULT_TOLERATIONS]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace, **metadata}, "spec": pod_spec}


def pod_group(name: str, namespace: str, queue: str | None) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": 1, **({"queue": queue} if queue else {})},
    }


def created_by_volcano(job: dict) -> list[tuple[Kind, dict]]:
    """What Volcano's job controller creates for ``job``: its PodGroup on the Job's queue, and each task's pods with
    the Job's schedulerName where the template names none (pkg/controllers/job/job_controller_util.go, createJobPod)."""
    namespace = job["metadata"]["namespace"]
    group = pod_group(job["metadata"]["name"], namespace, job["spec"]["queue"])
    pods = []
    for task in job["spec"]["tasks"]:
        spec = {"schedulerName": job["spec"].get("schedulerName", ""), **task["template"]["spec"]}
        spec["schedulerName"] = spec["schedulerName"] or job["spec"]["schedulerName"]
        pods.append((POD, admitted_pod(spec, namespace, labels=task["template"].get("metadata", {}).get("labels", {}))))
    return [(POD_GROUP, group), *pods]


def workloads(job: dict) -> list[tuple[Kind, dict]]:
    """What reaches admission for one manifest of the tools: a Volcano Job, its PodGroup and pods; or a batch Job's
    pods, which the Job controller creates from its template, and for pods on Volcano's scheduler the PodGroup that
    Volcano's podgroup controller creates in the queue their annotation names (buildPodGroupFromPod)."""
    if job["apiVersion"] != BATCH_JOB:
        return [(VOLCANO_JOB, job), *created_by_volcano(job)]
    namespace, template = job["metadata"]["namespace"], job["spec"]["template"]
    annotations = template.get("metadata", {}).get("annotations", {})
    pod = admitted_pod(template["spec"], namespace, annotations=annotations)
    if pod["spec"]["schedulerName"] != layout.VOLCANO_SCHEDULER:
        return [(POD, pod)]
    return [
        (POD, pod),
        (POD_GROUP, pod_group(job["metadata"]["name"], namespace, annotations.get(layout.VOLCANO_QUEUE_ANNOTATION))),
    ]
