"""What every training job the platform launches shares, whatever it trains: the request (``JobRequest``, the command
line validated once), the node group's software, and the Volcano Job of a torchrun run on whole nodes of a group wired
to the platform's services (``whole_node_job``), with its pods' termination grace period (``with_grace_period``).
``jobs.workloads.workload.training_job`` builds every workload's job on it (BERT's, TorchTitan's, the torchrun checks' of
`jobs.acceptance`), and `jobs.acceptance.bandwidth` the nodes of its MPI check."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, StrictStr, StringConstraints, ValidationError
from torchx.schedulers.kubernetes_scheduler import app_to_resource, sanitize_for_serialization

from jobs.errors import LaunchError
from jobs.job_building import training_security
from jobs.job_building.capacity import choose_node_group, job_usage, node_count, whole_node_share
from jobs.job_building.grace_period import MAX_GRACE_SECONDS, GracePeriod
from jobs.job_building.torchx_component import (
    JOB_VERSION_ANNOTATION,
    JOB_VERSION_ENV,
    DdpRun,
    NodeShape,
    PlatformServices,
    trainium_ddp,
)
from training import crash_budget
from trainium_eks import layout, versions
from trainium_eks.backends import BACKENDS
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup, NodeGroupSoftware

DEVICE_RESOURCES = (layout.NEURON_DEVICE_RESOURCE, layout.NEURON_CORE_RESOURCE, layout.EFA_RESOURCE)
# Karpenter disrupts no node a pod so marked runs on, by consolidation or drift (Karpenter docs, Disruption,
# "Pod-Level Controls"): an elastic Trainium node is never taken from a job that runs on it.
DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}
COMPILE_CACHE_ANNOTATION = "trainium-eks/compile-cache"
COMPILE_CACHE_INPUTS = "trainium-eks/compile-cache-inputs"
# Why the pods get the grace period they get: `kubectl describe vcjob` shows the terms (``GracePeriod.describe``).
GRACE_PERIOD_ANNOTATION = "trainium-eks/termination-grace-period"
# How a training job restarts (Volcano release-1.15; ``jobs.rehearsal.volcano_lifecycle`` models it and `jobs.rehearsal` runs
# it). Volcano counts every RestartJob in status.retryCount and fails the job once it reaches maxRetry
# (controllers/job/state/running.go 35-46, restarting.go 31-40), drains included, so planned restarts are not
# rationed: maxRetry is the int32 maximum the CRD allows. Release 1.15's updatePod reacts to a pod's phase
# (job_controller_handler.go 269-301): a drained pod runs until its container ends and the kubelet reports it Failed
# with its exit code, 143 when its checkpoint was written in time (``training/agent.py``), 137 when the kubelet's
# SIGKILL came first; a pod whose node vanished is failed by the pod garbage collector with no container exit code
# (Volcano reads 0). Each of those must restart the job, so a failed pod restarts it whatever its exit code, and the
# crash budget lives on the shared volume, where it outlives the pods (``training/crash_budget.py``): an agent whose
# run crashed past its budget in a row exits BUDGET_SPENT_EXIT_CODE, which ends the job. Policies match in order, by
# event or by the first container's exit code (job_controller_util.go applyPolicies 257-281):
# - exit code 3: the run crashed past its budget: the job is Terminated;
# - PodFailed (any other exit code): a drain, a lost node, a crash within the budget: every pod is recreated and
#   resumes from the newest checkpoint;
# - PodEvicted: a pod deleted under the job before Volcano saw it end (deletePod 377): the same restart.
JOB_RESTARTS = 2**31 - 1
CRASH_BUDGET = 2  # job restarts after crashes in a row, each after torchrun's own --max-restarts in place
DRAINED_EXIT_CODE = 128 + signal.SIGTERM  # training.agent's exit status when SIGTERM stopped its torchrun
JOB_LIFECYCLE = [
    {"exitCode": crash_budget.BUDGET_SPENT_EXIT_CODE, "action": "TerminateJob"},
    {"event": "PodFailed", "action": "RestartJob"},
    {"event": "PodEvicted", "action": "RestartJob"},
]

# A job name becomes the Volcano Job's name (TorchX adds a suffix of up to 14 characters to stay within a
# 63-character DNS label) and a directory on the shared volume.
JOB_NAME = re.compile(r"^[a-z]([a-z0-9-]{0,44}[a-z0-9])?$")
# Docker image tags: up to 128 of letters, digits, '_', '.' and '-', not starting with '.' or '-'.
IMAGE_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


FinitePositive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class JobRequest(BaseModel):
    """What the command line asks for, validated once; ``None`` means the option was not given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[StrictStr, StringConstraints(pattern=JOB_NAME.pattern)]
    nodes: PositiveInt | None = None
    workers_per_node: PositiveInt | None = None
    node_group: StrictStr | None = None
    queue: StrictStr | None = None
    image_tag: Annotated[StrictStr, StringConstraints(pattern=IMAGE_TAG.pattern)] | None = None  # the group's image's
    precompile: bool = False
    bf16: bool = True
    training_args: tuple[str, ...] = ()
    # For the pods' grace period where no source gives them: a step's time and the checkpoint's size.
    step_seconds: Annotated[FinitePositive, Field(le=MAX_GRACE_SECONDS)] | None = None
    checkpoint_gib: FinitePositive | None = None

    @classmethod
    def from_options(cls, **options) -> JobRequest:
        try:
            return cls(**options)
        except ValidationError as error:
            raise LaunchError(option_error(error)) from None


FIXES = {
    "name": "use lowercase letters, digits and '-', starting with a letter, up to 46 characters",
    "nodes": "give a whole number of 1 or more",
    "workers_per_node": "give a whole number of 1 or more",
    "image_tag": "use letters, digits, '_', '.' and '-', not starting with '.' or '-'",
    "step_seconds": f"give the longest step of a run in seconds, above 0 and at most {MAX_GRACE_SECONDS} (a day)",
    "checkpoint_gib": "give the size of one checkpoint in GiB, a number above 0",
}


def option_error(error: ValidationError) -> str:
    """The first validation error as ``--option value: problem; fix``."""
    detail = error.errors(include_url=False)[0]
    field = str(detail["loc"][0])
    return f"--{field.replace('_', '-')} {detail['input']}: {detail['msg'].lower()}; {FIXES.get(field, 'see --help')}"


@dataclass(frozen=True)
class Placement:
    """Where a request's job runs: its group and what the group runs, workers per node, queue, nodes and image."""

    group: NodeGroup
    software: NodeGroupSoftware
    workers: int
    queue: str
    nodes: int
    image: str

    @property
    def world_size(self) -> int:
        return self.nodes * self.workers


def placement(contract: PlatformContract, request: JobRequest) -> Placement:
    """The group, workers, queue, nodes and image of ``request``, checked against the platform's capacity: every job
    of the launcher's, whatever it trains, is placed this way."""
    group = choose_node_group(contract, request.node_group)
    workers = request.workers_per_node if request.workers_per_node is not None else group.neuron_cores_per_node
    if workers > group.neuron_cores_per_node:
        raise LaunchError(
            f"--workers-per-node {workers}: a {group.instance_type} has {group.neuron_cores_per_node} "
            "NeuronCores; use at most one worker per core"
        )
    queue = request.queue or contract.queues[0]
    if queue not in contract.queues:
        raise LaunchError(f"--queue {queue}: no such Volcano queue; the stack has {', '.join(contract.queues)}")
    software = group_software(contract, group, precompile=request.precompile)
    image = software.training_image if request.image_tag is None else f"{contract.ecr_repository_url}:{request.image_tag}"
    per_node = whole_node_usage(contract, group, queue=queue, image=image, backend=software.backend, workers=workers)
    nodes = node_count(contract, group, request.nodes, per_node, queue=queue)
    return Placement(group, software, workers, queue, nodes, image)


def whole_node_usage(contract: PlatformContract, group: NodeGroup, *, queue: str, image: str, backend: str, workers: int) -> dict:
    """What the pods of one node of a ``whole_node_job`` ask for (``capacity.job_usage``), from the job itself: the
    launcher sizes its jobs by it, so the count cannot drift from the pods it builds."""
    sizing = DdpRun(
        image=image,
        name="sizing",
        nnodes=1,
        nproc_per_node=workers,
        compile_cache=f"{contract.neuron_compile_cache_path}/sizing",
        backend=backend,
    )
    return job_usage(whole_node_job(contract, group, sizing, queue=queue))


def group_software(contract: PlatformContract, group: NodeGroup, *, precompile: bool = False) -> NodeGroupSoftware:
    """What ``group``'s jobs run (``PlatformContract.software``), refusing a backend this launcher does not know and a
    precompile on a backend that compiles at a job's first steps."""
    software = contract.software(group)
    backend = BACKENDS.get(software.backend)
    if backend is None or not versions.backend_generations(backend.name):  # CPU's is the rehearsal's, no group's
        raise LaunchError(
            f"--node-group {group.name}: its training stack {software.training_stack} runs the PyTorch backend "
            f"'{software.backend}', which this launcher does not know; upgrade trainium-eks's job tools"
        )
    if precompile and backend.precompiler is None:
        raise LaunchError(
            f"--precompile: node group {group.name} trains with {software.training_stack} ({software.backend} backend), "
            f"which compiles its graphs at a job's first steps into {contract.neuron_compile_cache_path}, where the "
            "next jobs find them; drop --precompile"
        )
    return software


def whole_node_job(contract: PlatformContract, group: NodeGroup, run: DdpRun, *script_args: str, queue: str) -> dict:
    """The Volcano Job of ``run`` (a trainium_ddp run) on whole nodes of ``group`` in ``queue``, wired to the
    platform's services."""
    services = PlatformServices(contract.etcd_endpoint, contract.fsx_claim_name, contract.fsx_mount_path)
    app = trainium_ddp(*script_args, run=run, node=node_shape(group), services=services)
    job = sanitize_for_serialization(app_to_resource(app, queue=queue, service_account=None))
    return add_platform_scheduling(job, contract, group)


def node_shape(group: NodeGroup) -> NodeShape:
    """A whole node of ``group``: every Neuron device and EFA interface, and the pod's share of the node."""
    return NodeShape(group.instance_type, group.neuron_devices_per_node, group.efa_interfaces_per_node, **whole_node_share(group))


def add_platform_scheduling(job: dict, contract: PlatformContract, group: NodeGroup) -> dict:
    """What TorchX's Kubernetes scheduler cannot set: tolerations, the node group selector (which also tells Karpenter
    which pool to scale), the namespace, device requests, the job's lifecycle, Karpenter's do-not-disrupt mark and
    the pods' security settings (``jobs.job_building.training_security``)."""
    job["metadata"]["namespace"] = contract.job_namespace
    # The gang, stated rather than left to the admission webhook's default: every pod or none. An elastic pool brings
    # the nodes for the pods that wait; none starts until all fit (Volcano's gang plugin, minAvailable).
    job["spec"]["minAvailable"] = sum(task["replicas"] for task in job["spec"]["tasks"])
    job["spec"]["maxRetry"] = JOB_RESTARTS
    job["spec"]["policies"] = [dict(policy) for policy in JOB_LIFECYCLE]
    for task in job["spec"]["tasks"]:
        metadata = task["template"].setdefault("metadata", {})
        metadata["annotations"] = {**metadata.get("annotations", {}), **DO_NOT_DISRUPT}
        spec = task["template"]["spec"]
        spec["tolerations"] = [*spec.get("tolerations", []), *contract.tolerations()]
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **group.node_selector}
        training_security.harden(spec)
        for container in spec["containers"]:
            request_devices(container["resources"])
            container["env"] = [*container.get("env", []), job_version_env()]
    return job


def job_version_env() -> dict:
    """The job's version from the pod's annotation (downward API), for the run id in torchrun's command."""
    path = f"metadata.annotations['{JOB_VERSION_ANNOTATION}']"
    return {"name": JOB_VERSION_ENV, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def request_devices(resources: dict) -> None:
    """Ask for the Neuron devices and EFA interfaces as requests too: Volcano sizes a job's PodGroup (and checks
    the queue's capability) from requests, while Kubernetes copies extended-resource limits only later."""
    devices = {k: v for k, v in resources.get("limits", {}).items() if k in DEVICE_RESOURCES}
    resources["requests"] = {**resources.get("requests", {}), **devices}


def with_crash_budget(job: dict, run_directory: str) -> dict:
    """``job`` with its agents' crash budget and the run directory that keeps its count (``training.crash_budget``)."""
    budget = {crash_budget.BUDGET_ENV: str(CRASH_BUDGET), crash_budget.RUN_DIRECTORY_ENV: run_directory}
    for task in job["spec"]["tasks"]:
        for container in task["template"]["spec"]["containers"]:
            container["env"] = [*container.get("env", []), *({"name": k, "value": v} for k, v in budget.items())]
    return job


def with_grace_period(job: dict, grace: GracePeriod) -> dict:
    """``job`` with its pods' terminationGracePeriodSeconds and torchrun's shutdown timeout set to ``grace``, and the
    annotation explaining it: a drained pod's workers finish their step and checkpoint it before the kubelet's SIGKILL
    (``jobs.job_building.grace_period``)."""
    job["metadata"].setdefault("annotations", {})[GRACE_PERIOD_ANNOTATION] = grace.describe()
    for task in job["spec"]["tasks"]:
        spec = task["template"]["spec"]
        spec.update(grace.pod_spec())
        for container in spec["containers"]:
            container["env"] = [*container.get("env", []), *({"name": k, "value": v} for k, v in grace.environment().items())]
    return job
