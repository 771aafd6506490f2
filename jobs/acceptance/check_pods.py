"""What every acceptance check's pods share: the restricted security context, a scratch /tmp, requests on every
container, the one-shot lifecycle, and the refusal of a two-node EFA check where it cannot run.

Every check takes the stack's contract, the node group it checks and the nodes asked (``--nodes``, or None)."""

from __future__ import annotations

from jobs.errors import LaunchError
from jobs.job_building.platform_job import request_devices
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup
from trainium_eks.pod_security import (
    ROOT_UID,
    restricted_container_security_context,
    restricted_pod_security_context,
    root_pod_security_context,
)

# Checks run as an unprivileged user. The Neuron driver's udev rule makes /dev/neuron* usable without root
# (aws-neuron-driver README: KERNEL=="neuron*", MODE="0666"); a node that restricts the devices to a group, as
# Neuron's security guidance suggests, needs that group in the pods' supplementalGroups. Checks that write to
# the shared volume run as root, its owner (the training image writes it as root), with every other control.
CHECK_UID = 1000
ACCEPTANCE_CACHE = "acceptance"  # the torchrun checks' compile cache on the shared volume, one for every check
SHARED_VOLUME_OWNER = ROOT_UID
SCRATCH = {"name": "scratch", "mountPath": "/tmp"}  # the only writable path under a read-only root filesystem
# cpu and memory of each check's container: enough for a shell, neuron-ls or a Python client.
CHECK_RESOURCES = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}


def check_image(contract: PlatformContract, group: NodeGroup) -> str:
    """The checks run the tools of the image ``group``'s jobs run (neuron-ls, nccom-test, python-etcd, bash)."""
    return contract.software(group).training_image


def hardened(pod_spec: dict, uid: int = CHECK_UID) -> dict:
    """The pod under the "restricted" Pod Security Standard (as root only when ``uid`` is 0), with a scratch
    /tmp and cpu, memory and device requests on every container."""
    pod_spec["securityContext"] = root_pod_security_context() if uid == ROOT_UID else restricted_pod_security_context(uid)
    pod_spec["volumes"] = [*pod_spec.get("volumes", []), {"name": SCRATCH["name"], "emptyDir": {}}]
    for container in pod_spec["containers"]:
        container["securityContext"] = restricted_container_security_context()
        container["volumeMounts"] = [*container.get("volumeMounts", []), dict(SCRATCH)]
        container["env"] = [*container.get("env", []), {"name": "HOME", "value": SCRATCH["mountPath"]}]
        resources = container.setdefault("resources", {})
        for kind in ("requests", "limits"):
            resources[kind] = {**CHECK_RESOURCES[kind], **resources.get(kind, {})}
        request_devices(resources)
    return pod_spec


# A check runs once: a rerun after a failure (a bandwidth below the floor, a wrong sum) could end in one lucky pass.
# Any failed or evicted pod ends the job with TerminateJob: Volcano kills the other pods, keeps the failed one for its
# log and leaves the job Terminated, a finished phase that cannot be resumed (AbortJob's Aborted can be, by ResumeJob:
# Volcano 1.15 batch/v1alpha1 job.go phases, bus/v1alpha1 actions.go, controllers/job/state/). No policy restarts the
# job, and maxRetry is 1, not 0: Volcano's admission webhook replaces 0 by its default 3 (webhooks/admission/jobs/
# mutate/mutate_job.go), while 1 fails the job on any restart (state/restarting.go: RetryCount >= maxRetry).
CHECK_RESTARTS = 1
CHECK_LIFECYCLE = [{"event": "PodFailed", "action": "TerminateJob"}, {"event": "PodEvicted", "action": "TerminateJob"}]
TORCHRUN_ONCE = "--max-restarts=0"  # torchrun's restarts of a node's workers after one fails (the launcher's are 3)


def run_once(job: dict) -> dict:
    """The Volcano Job with the one-shot lifecycle of a check in place of the training job's restarts, torchrun's
    included: a check that runs under torchrun gets no restart of its failed workers either."""
    job["spec"]["maxRetry"] = CHECK_RESTARTS
    job["spec"]["policies"] = [dict(policy) for policy in CHECK_LIFECYCLE]
    for task in job["spec"]["tasks"]:
        for container in task["template"]["spec"]["containers"]:
            command = container.get("command", [])
            container["command"] = [TORCHRUN_ONCE if word.startswith("--max-restarts=") else word for word in command]
    return job


def two_efa_nodes(contract: PlatformContract, group: NodeGroup, check: str, floor: float | None = 1.0) -> None:
    """Refuse a two-node EFA check on a group that cannot hold two EFA nodes (or whose type has no floor); whether the
    workspace admits the two nodes' pods is ``acceptance.build``'s to check, on the job built."""
    ceiling = contract.node_ceiling(group)
    if ceiling < 2 or not group.efa_interfaces_per_node or floor is None:
        held = f"up to {ceiling}" if contract.elastic(group) else str(ceiling)
        raise LaunchError(
            f"{check}: node group {group.name} needs two or more EFA nodes"
            f"{' of a type with a bandwidth floor (its acceptance_bus_bandwidth_fraction)' if floor is None else ''} "
            f"(it holds {held} x {group.instance_type})"
        )
