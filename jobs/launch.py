"""Launch BERT pretraining (or its Neuron precompile) on the platform, configured from a stack's outputs alone.

    python -m jobs.launch [--stack STACK | --outputs FILE] [--nodes N] [--workers-per-node N] [--node-group NAME]
                          [--queue NAME] [--team NAME] [--image-tag TAG] [--name NAME] [--precompile] [--no-bf16]
                          [--dryrun] [--json] [--api-tunnel PORT] [-- TRAINING ARGS...]

With ``--team NAME`` the job runs in that team's workspace: its namespace, queue and volume. The queue, etcd
endpoint, FSx claim and paths, image repository, instance type and per-node Neuron and EFA
counts all come from the platform's output contract. TorchX builds the Volcano Job; the launcher then adds
what TorchX cannot express: the toleration for the Trainium taint, the node group's node selector and the
job namespace. Each training argument after ``--`` replaces the launcher's own option of that name (its directories
on the shared volume, the tutorial's batch), or adds one; the others stay. Exit status: 0 submitted (or printed),
2 bad input (one line on stderr).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, PositiveInt, StrictStr, StringConstraints, ValidationError
from torchx.schedulers.kubernetes_scheduler import app_to_resource, sanitize_for_serialization

from jobs import TRAINING_IMAGE_TAG, training_security
from jobs.api_tunnel import port
from jobs.capacity import LaunchError, choose_node_group, node_count, whole_node_share
from jobs.compile_cache import compile_cache
from jobs.components import JOB_VERSION_ANNOTATION, JOB_VERSION_ENV, trainium_ddp
from jobs.kube_api import submit
from jobs.outputs import add_team_option, read_outputs, report_bad_input, workspace
from training import options
from trainium_eks import layout
from trainium_eks.cli import OneLineParser, UsageError
from trainium_eks.contract import NodeGroup, PlatformContract

DATASET = "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128"
PRECOMPILE_STEPS = 10  # a few steps trace every graph
# The training module's options that name directories on the shared volume, which every pod mounts.
VOLUME_OPTIONS = ("data_dir", "output_dir", "tensorboard_dir")


DEVICE_RESOURCES = (layout.NEURON_DEVICE_RESOURCE, layout.NEURON_CORE_RESOURCE, layout.EFA_RESOURCE)
# Karpenter disrupts no node a pod so marked runs on, by consolidation or drift (Karpenter docs, Disruption,
# "Pod-Level Controls"): an elastic Trainium node is never taken from a job that runs on it.
DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}
COMPILE_CACHE_ANNOTATION = "trainium-eks/compile-cache"
COMPILE_CACHE_INPUTS = "trainium-eks/compile-cache-inputs"
# A pod that fails (its torchrun gave up after --max-restarts) or is evicted (a node drain, a lost node) restarts
# the whole job: every pod is recreated, the agents meet again and resume from the last checkpoint. Volcano
# counts these restarts against maxRetry, then fails the job.
JOB_RESTARTS = 3
JOB_LIFECYCLE = [{"event": "PodFailed", "action": "RestartJob"}, {"event": "PodEvicted", "action": "RestartJob"}]


# A job name becomes the Volcano Job's name (TorchX adds a suffix of up to 14 characters to stay within a
# 63-character DNS label) and a directory on the shared volume.
JOB_NAME = re.compile(r"^[a-z]([a-z0-9-]{0,44}[a-z0-9])?$")
# Docker image tags: up to 128 of letters, digits, '_', '.' and '-', not starting with '.' or '-'.
IMAGE_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


class JobRequest(BaseModel):
    """What the command line asks for, validated once; ``None`` means the option was not given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[StrictStr, StringConstraints(pattern=JOB_NAME.pattern)]
    nodes: PositiveInt | None = None
    workers_per_node: PositiveInt | None = None
    node_group: StrictStr | None = None
    queue: StrictStr | None = None
    image_tag: Annotated[StrictStr, StringConstraints(pattern=IMAGE_TAG.pattern)] = TRAINING_IMAGE_TAG
    precompile: bool = False
    bf16: bool = True
    training_args: tuple[str, ...] = ()

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
}


def option_error(error: ValidationError) -> str:
    """The first validation error as ``--option value: problem; fix``."""
    detail = error.errors(include_url=False)[0]
    field = str(detail["loc"][0])
    return f"--{field.replace('_', '-')} {detail['input']}: {detail['msg'].lower()}; {FIXES.get(field, 'see --help')}"


def volcano_job(contract: PlatformContract, request: JobRequest) -> dict:
    """The Volcano Job for ``request``, validated against the platform's capacity."""
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
    nodes = node_count(contract, group, request.nodes, queue=queue)

    chosen = training_options(contract, request)
    cache = compile_cache(
        chosen,
        bf16=request.bf16,
        world_size=nodes * workers,
        instance_type=group.instance_type,
        image_tag=request.image_tag,
    )
    job = whole_node_job(
        contract,
        group,
        *options.command_line(chosen),
        name=request.name,
        queue=queue,
        image_tag=request.image_tag,
        nnodes=nodes,
        nproc_per_node=workers,
        cache_set=cache.name,
        bf16=request.bf16,
        precompile=request.precompile,
    )
    # Which cache, and why: `kubectl describe vcjob` shows it as the launcher prints it.
    job["metadata"].setdefault("annotations", {}).update(
        {COMPILE_CACHE_ANNOTATION: f"{contract.neuron_compile_cache_path}/{cache.name}", COMPILE_CACHE_INPUTS: cache.describe()}
    )
    return job


def training_options(contract: PlatformContract, request: JobRequest) -> dict[str, Any]:
    """The training module's options the job passes, by name: the launcher's own (its dataset, checkpoint and
    TensorBoard directories on the shared volume, the tutorial's micro-batch and accumulation, a few steps for a
    precompile), each replaced by the option of the same name given after `--`, and the other options given."""
    try:
        given = options.given(request.training_args)
    except UsageError as error:
        raise LaunchError(f"after --: {error}") from None
    if "bf16" in given:
        raise LaunchError("--bf16 after --: the launcher passes it itself (bf16 is its default); --no-bf16 turns it off")
    chosen = {
        "data_dir": f"{contract.datasets_path}/{DATASET}",
        "output_dir": f"{contract.checkpoints_path}/{request.name}",
        "tensorboard_dir": f"{contract.tensorboard_log_path}/{request.name}",
        "batch_size": 16,
        "grad_accum_steps": 32,
        **({"steps_this_run": PRECOMPILE_STEPS} if request.precompile else {}),
        **given,
    }
    for name in VOLUME_OPTIONS:
        on_shared_volume(contract, name, chosen[name])
    return chosen


def on_shared_volume(contract: PlatformContract, name: str, value: Any) -> None:
    """Refuse a directory given after `--` that is not on the shared volume: a pod's own disk goes with the pod."""
    path, mount = PurePosixPath(str(value)), PurePosixPath(contract.fsx_mount_path)
    if ".." in path.parts or not path.is_relative_to(mount):
        flag = "--" + name.replace("_", "-")
        raise LaunchError(
            f"{flag} {value} after --: not on the shared volume; give a path under {mount}, where every pod mounts it "
            "(what a pod writes elsewhere is lost when it restarts)"
        )


def whole_node_job(
    contract: PlatformContract,
    group: NodeGroup,
    *script_args: str,
    name: str,
    queue: str,
    image_tag: str,
    nnodes: int,
    nproc_per_node: int,
    cache_set: str,
    module: str = "training.pretrain_bert",
    bf16: bool = True,
    precompile: bool = False,
) -> dict:
    """The Volcano Job of a trainium_ddp run on whole nodes of ``group``, wired to the platform's services."""
    app = trainium_ddp(
        *script_args,
        image=f"{contract.ecr_repository_url}:{image_tag}",
        module=module,
        name=name,
        nnodes=nnodes,
        nproc_per_node=nproc_per_node,
        instance_type=group.instance_type,
        neuron_devices=group.neuron_devices_per_node,
        efa_interfaces=group.efa_interfaces_per_node,
        **whole_node_share(group),
        etcd_endpoint=contract.etcd_endpoint,
        claim_name=contract.fsx_claim_name,
        mount_path=contract.fsx_mount_path,
        compile_cache=f"{contract.neuron_compile_cache_path}/{cache_set}",
        bf16=bf16,
        precompile=precompile,
    )
    job = sanitize_for_serialization(app_to_resource(app, queue=queue, service_account=None))
    return add_platform_scheduling(job, contract, group)


def add_platform_scheduling(job: dict, contract: PlatformContract, group: NodeGroup) -> dict:
    """What TorchX's Kubernetes scheduler cannot set: tolerations, the node group selector (which also tells Karpenter
    which pool to scale), the namespace, device requests, the job's lifecycle, Karpenter's do-not-disrupt mark and
    the pods' security settings (``jobs.training_security``)."""
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


def add_api_tunnel_option(p: OneLineParser) -> None:
    p.add_argument(
        "--api-tunnel",
        type=port,
        metavar="PORT",
        help="reach a private endpoint through the local end of `python -m jobs.api_tunnel`'s session on PORT",
    )


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m jobs.launch", description=__doc__.splitlines()[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="read `pulumi stack output --json --show-secrets` of this stack")
    source.add_argument("--outputs", type=Path, help="a JSON file of stack outputs (or a `preflight plan --json` object)")
    p.add_argument(
        "--nodes", type=int, help="Trainium nodes (default: 2, or what the group holds if fewer: desiredSize; maxSize if elastic)"
    )
    p.add_argument("--workers-per-node", type=int, help="workers per node (default: one per NeuronCore)")
    p.add_argument("--node-group", help="node group name (default: the first)")
    p.add_argument("--queue", help="Volcano queue (default: the first; with --team, the team's)")
    add_team_option(p)
    p.add_argument("--image-tag", default=TRAINING_IMAGE_TAG, help=f"training image tag (default {TRAINING_IMAGE_TAG})")
    p.add_argument("--name", help="job name (default: berttrain, or bertcompile with --precompile)")
    p.add_argument("--precompile", action="store_true", help="run neuron_parallel_compile to fill the compile cache")
    p.add_argument("--no-bf16", dest="bf16", action="store_false", help="compute in float32")
    p.add_argument("--dryrun", action="store_true", help="print the Volcano Job instead of submitting it")
    add_api_tunnel_option(p)
    p.add_argument("--json", action="store_true", help="print JSON (with --dryrun: the Volcano Job)")
    p.add_argument("training_args", nargs="*", help="arguments for the training module, after --")
    return p


def main(argv: list[str] | None = None) -> int:
    def run(args) -> None:
        request = JobRequest.from_options(
            name=args.name if args.name is not None else ("bertcompile" if args.precompile else "berttrain"),
            nodes=args.nodes,
            workers_per_node=args.workers_per_node,
            node_group=args.node_group,
            queue=args.queue,
            image_tag=args.image_tag,
            precompile=args.precompile,
            bf16=args.bf16,
            training_args=tuple(args.training_args),
        )
        contract = workspace(PlatformContract.from_outputs(read_outputs(args.stack, args.outputs)), args.team)
        job = volcano_job(contract, request)
        annotations = job["metadata"]["annotations"]
        print(f"compile cache {annotations[COMPILE_CACHE_ANNOTATION]} ({annotations[COMPILE_CACHE_INPUTS]})", file=sys.stderr)
        if args.dryrun:
            print(json.dumps(job, indent=2, sort_keys=True) if args.json else yaml.safe_dump(job, sort_keys=False))
        else:
            submitted = submit(job, contract, args.api_tunnel)
            print(
                json.dumps({"job": submitted, "namespace": contract.job_namespace})
                if args.json
                else f"submitted Volcano Job {contract.job_namespace}/{submitted}"
            )

    return report_bad_input(parser, argv, run)


if __name__ == "__main__":
    sys.exit(main())
