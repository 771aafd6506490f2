"""An acceptance check as a workload: what it runs (a module under torchrun, a container's command, an MPI launcher's
script), on how many nodes or pods, as which user, with which volume, and its pod shape; and the one builder,
``check_job``, that turns any check and a node group into its job.

The pod shapes genuinely differ: torchrun on whole nodes is a training job (``jobs.workloads.workload.training_job``) run once;
plain pods are a batch Job, on Trainium nodes placed by Volcano or on a system node by the default scheduler; MPI is a
Volcano Job of a launcher and whole-node workers that run sshd."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from torchx import specs
from torchx.schedulers.kubernetes_scheduler import app_to_resource, sanitize_for_serialization

from jobs.acceptance.check_pods import ACCEPTANCE_CACHE, CHECK_UID, check_image, hardened, run_once
from jobs.job_building.platform_job import (
    DO_NOT_DISRUPT,
    JobRequest,
    Placement,
    add_platform_scheduling,
    group_software,
    node_shape,
)
from jobs.job_building.torchx_component import COLLECTIVES_ENVIRONMENT, EFA_ENVIRONMENT
from jobs.workloads.compile_cache import CompileCache
from jobs.workloads.workload import TrainingRun, training_job
from trainium_eks import layout
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup
from trainium_eks.pod_security import root_pod_security_context

LABEL = "trainium-eks/acceptance"  # a plain pod's check, by which a spread check keeps one pod per node
SHARED_VOLUME = "shared"  # the shared file system's volume in a plain pod

# The MPI shape. MPI reaches the hosts over SSH: Volcano's ssh plugin gives the job's pods one key pair (mounted at
# /root/.ssh) and its svc plugin their host names (Volcano docs, "MPI on Volcano" and "Job plugins"); the training
# image's base has Open MPI and an SSH server configured "for MPI in K8s" (aws-neuron/deep-learning-containers
# pytorch/training/2.9.0/Dockerfile.neuronx). aws-k8s-tester's Neuron MPIJob runs nccom-test the same way.
LAUNCHER, NODE = "launcher", "node"
LAUNCHER_SHARE = {"cpu": 2, "mem_mb": 4096}  # the launched program (nccom-test), mpirun and ssh; the nodes do the work
# The nodes' pods run sshd, which starts as root and separates privileges (a chroot, a change of user), so they keep
# the container runtime's default capabilities, which the job namespace's "baseline" level admits.
# sshd starts each session with a fresh environment, so the ranks mpirun starts over SSH would lack the image's PATH
# (/opt/aws/neuron/bin, Neuron's tools) and LD_LIBRARY_PATH (the Neuron and EFA libraries) and the pod's EFA and
# Neuron variables. The pod writes them to /etc/environment before sshd starts: the openssh-server package of Debian,
# and so of the image's Ubuntu 24.04, sets UsePAM yes (Ubuntu noble sshd_config(5)), and its /etc/pam.d/sshd (Debian
# 12's 1:9.2p1-2+deb12u10, read here; Ubuntu's not) runs pam_env in the session, which reads KEY=VAL lines from
# /etc/environment (pam_env(8)) in order, setting each, so an appended line replaces an earlier one (Linux-PAM
# modules/pam_env/pam_env.c, _parse_env_file). nccom-test has no option to pass mpirun's -x (NCCOM-TEST User Guide,
# "MPI Execution" and its option tables). Unverified on hardware: no Trainium node is reachable from here.
FORWARDED_VARIABLES = r"^(PATH|LD_LIBRARY_PATH|(FI|CCOM|NEURON)_[A-Za-z0-9_]*)="
SSHD = (
    f"env | grep -E '{FORWARDED_VARIABLES}' >> /etc/environment && "
    "ssh-keygen -A && mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e"  # host keys if the image has none
)


class PodShape(enum.Enum):
    TORCHRUN = "torchrun on whole nodes, one rank per NeuronCore"
    PODS = "plain pods, one container each"
    MPI = "an MPI launcher and whole-node workers running sshd"


@dataclass(frozen=True)
class Check:
    """One acceptance check's job, declared: ``name`` follows ``acceptance-`` in the job's name (and labels a plain
    pod); ``command``: the module and its options under torchrun, a plain pod's command, or the MPI launcher's; ``size``:
    the nodes of torchrun and MPI, the pods of plain pods."""

    name: str
    shape: PodShape
    command: tuple[str, ...]
    size: int
    uid: int = CHECK_UID  # the pods' user: root (0) to write the shared volume or read Volcano's SSH key
    on_trainium: bool = True  # plain pods: on the group's nodes, or on a system node
    spread: bool = False  # plain pods: one per node
    container: str = ""  # a plain pod's container name
    neuron_devices: int = 0  # the Neuron devices a plain pod asks for
    shared_volume: str | None = None  # where a plain pod mounts the shared file system
    bf16: bool = False  # torchrun: compute in bfloat16, as a training job does


def check_job(contract: PlatformContract, group: NodeGroup, check: Check) -> dict:
    """The job of ``check`` on ``group`` in the workspace's first queue, its pods restricted, run once."""
    return SHAPES[check.shape](contract, group, check)


def _torchrun(contract: PlatformContract, group: NodeGroup, check: Check) -> dict:
    """A training job of the group's image and backend; it writes its compiled graphs to the shared volume's
    ``acceptance`` cache."""
    software = group_software(contract, group)
    placed = Placement(group, software, group.neuron_cores_per_node, contract.queues[0], check.size, software.training_image)
    module, *options = check.command
    cache = CompileCache(ACCEPTANCE_CACHE, {})
    run = TrainingRun(JobRequest(name=f"acceptance-{check.name}"), placed, module, tuple(options), cache, bf16_flag=check.bf16)
    job = training_job(contract, run)
    for task in job["spec"]["tasks"]:
        hardened(task["template"]["spec"], check.uid)
    return run_once(job)


def _plain_pods(contract: PlatformContract, group: NodeGroup, check: Check) -> dict:
    """A batch Job of ``check.size`` pods, ``check.spread`` one per node. On Trainium nodes Volcano places it in the
    workspace's first queue (the one ``acceptance.build`` admits it to): Volcano's podgroup controller gives the pods a
    PodGroup in the queue their annotation names, and a team's namespace admits a pod that tolerates the Trainium taint
    on Volcano only (components/team_admission.py)."""
    container = {"name": check.container, "image": check_image(contract, group), "command": list(check.command)}
    if check.neuron_devices:
        container["resources"] = {"limits": {layout.NEURON_DEVICE_RESOURCE: str(check.neuron_devices)}}
    if check.shared_volume:
        container["volumeMounts"] = [{"name": SHARED_VOLUME, "mountPath": check.shared_volume}]
    claim = {"persistentVolumeClaim": {"claimName": contract.fsx_claim_name}}
    volumes = {"volumes": [{"name": SHARED_VOLUME, **claim}]} if check.shared_volume else {}
    if check.on_trainium:
        nodes = {"nodeSelector": dict(group.node_selector), "tolerations": contract.tolerations()}
        pod = {**nodes, "containers": [container], **volumes, "schedulerName": layout.VOLCANO_SCHEDULER}
    else:
        pod = {"nodeSelector": {layout.NODE_ROLE_LABEL: layout.SYSTEM_NODE_ROLE}, "containers": [container], **volumes}
    labels = {LABEL: check.name}
    if check.spread:
        pod["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    annotations = {**DO_NOT_DISRUPT, **({layout.VOLCANO_QUEUE_ANNOTATION: contract.queues[0]} if check.on_trainium else {})}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"acceptance-{check.name}", "namespace": contract.job_namespace, "labels": labels},
        "spec": {
            "completions": check.size,
            "parallelism": check.size,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": dict(labels), "annotations": annotations},
                "spec": {"restartPolicy": "Never", **hardened(pod, check.uid)},
            },
        },
    }


def _mpi(contract: PlatformContract, group: NodeGroup, check: Check) -> dict:
    """The launcher runs ``check.command`` as root (to read the key Volcano mounts at /root/.ssh), its end the job's;
    ``check.size`` whole nodes run sshd, their hosts in VC_NODE_<index>_HOSTS (Volcano's svc plugin)."""
    image = check_image(contract, group)
    efa_env = {**COLLECTIVES_ENVIRONMENT, **EFA_ENVIRONMENT}
    launcher = specs.Role(
        name=LAUNCHER,
        image=image,
        entrypoint=check.command[0],
        args=list(check.command[1:]),
        resource=specs.Resource(cpu=LAUNCHER_SHARE["cpu"], gpu=0, memMB=LAUNCHER_SHARE["mem_mb"]),
        env={**efa_env, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"},
    )
    node = node_shape(group).resource()
    sshd = {"entrypoint": "bash", "args": ["-c", SSHD]}
    nodes = specs.Role(name=NODE, image=image, **sshd, num_replicas=check.size, resource=node, env=efa_env)
    app = specs.AppDef(name=f"acceptance-{check.name}", roles=[launcher, nodes])
    resource = sanitize_for_serialization(app_to_resource(app, queue=contract.queues[0], service_account=None))
    job = run_once(add_platform_scheduling(resource, contract, group))
    job["spec"]["plugins"]["ssh"] = []
    for task in job["spec"]["tasks"]:
        spec = task["template"]["spec"]
        if task["name"].startswith(LAUNCHER):
            # The nodes' sshd never ends, so the launcher's end ends the job: Completed when the check passes. A launcher
            # that fails (exit 1 below the floor, 2 no result) meets the job's PodFailed policy: Terminated.
            task["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
            spec["containers"][0]["env"].append({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
            hardened(spec, uid=check.uid)
        else:
            spec["securityContext"] = root_pod_security_context()
            for container in spec["containers"]:
                container["securityContext"] = {"allowPrivilegeEscalation": False}
    return job


SHAPES: dict[PodShape, Callable[[PlatformContract, NodeGroup, Check], dict]] = {
    PodShape.TORCHRUN: _torchrun,
    PodShape.PODS: _plain_pods,
    PodShape.MPI: _mpi,
}
