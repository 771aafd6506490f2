"""Launch a training job on the platform, configured from a stack's outputs alone: BERT pretraining (or its Neuron
precompile), or LLM pre-training with TorchTitan (``--workload torchtitan``, `jobs.torchtitan_job`, on trn2/trn3 groups).

    python -m jobs.launch [--stack STACK | --outputs FILE] [--workload bert|torchtitan] [--nodes N]
                          [--workers-per-node N] [--node-group NAME] [--queue NAME] [--team NAME] [--image-tag TAG]
                          [--name NAME] [--precompile] [--no-bf16] [--step-seconds S] [--checkpoint-gib G]
                          [--dryrun] [--json] [--api-tunnel PORT] [-- TRAINING ARGS...]

With ``--team NAME`` the job runs in that team's workspace: its namespace, queue and volume. The queue, etcd
endpoint, FSx claim and paths, the node group's training image (its generation's; ``--image-tag`` replaces the tag
alone) and PyTorch backend, instance type and per-node Neuron and EFA counts all come from the platform's output
contract. ``--precompile`` runs on PyTorch/XLA groups; TorchNeuron's first steps compile and cache the graphs. TorchX
builds the Volcano Job; the launcher then adds what TorchX cannot express: the toleration for the Trainium taint, the
node group's node selector and the job namespace. Each training argument after ``--`` replaces the launcher's own
option of that name (its directories on the shared volume, the tutorial's batch), or adds one; the others stay.

Every job's pods get a termination grace period long enough for a drain to lose no step (`jobs.grace_period`): a
step, a checkpoint written at the file system's throughput (the contract's ``fsxThroughputMBps``) and Kubernetes'
default. Where no source gives the step's time, the period leaves it out and says so (``--step-seconds`` adds it);
where none gives the checkpoint's size, the launcher asks for it (``--checkpoint-gib``). On a group whose nodes run in a
Capacity Block, a drain has ten minutes before EC2 reclaims the node (``jobs.grace_period``): a job whose grace period
is longer is refused, with the file system throughput (``fsxThroughputMBps``) and the step time that would fit; with
the step not known, the other terms must fit and the launcher says how long the step may take. Exit status: 0
submitted (or printed), 2 bad input (one line on stderr).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from jobs.api_tunnel import port
from jobs.capacity import LaunchError, choose_node_group
from jobs.compile_cache import compile_cache
from jobs.grace_period import KUBERNETES_DEFAULT_GRACE_SECONDS, GracePeriod, job_grace_period
from jobs.kube_api import submit
from jobs.outputs import add_team_option, read_contract, report_bad_input, workspace
from jobs.paths import run_directory
from jobs.platform_job import (
    COMPILE_CACHE_ANNOTATION,
    COMPILE_CACHE_INPUTS,
    GRACE_PERIOD_ANNOTATION,
    JobRequest,
    placement,
    whole_node_job,
    with_grace_period,
)
from jobs.torchtitan_job import titan_grace_period, titan_job
from training import options
from trainium_eks import catalog
from trainium_eks.cli import OneLineParser, UsageError, description
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup

DATASET = "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128"
PRECOMPILE_STEPS = 10  # a few steps trace every graph
# The training module's options that name directories on the shared volume, which every pod mounts.
VOLUME_OPTIONS = ("data_dir", "output_dir", "tensorboard_dir")


def volcano_job(contract: PlatformContract, request: JobRequest) -> dict:
    """The Volcano Job for ``request``, validated against the platform's capacity."""
    placed = placement(contract, request)
    chosen = training_options(contract, request)
    cache = compile_cache(
        chosen,
        bf16=request.bf16,
        world_size=placed.world_size,
        instance_type=placed.group.instance_type,
        training_stack=placed.software.training_stack,
        image_tag=placed.image.rpartition(":")[2],
    )
    job = whole_node_job(
        contract,
        placed.group,
        *options.command_line(chosen),
        name=request.name,
        queue=placed.queue,
        image=placed.image,
        backend=placed.software.backend,
        nnodes=placed.nodes,
        nproc_per_node=placed.workers,
        cache_set=cache.name,
        bf16=request.bf16,
        precompile=request.precompile,
    )
    # Which cache, and why: `kubectl describe vcjob` shows it as the launcher prints it.
    job["metadata"].setdefault("annotations", {}).update(
        {COMPILE_CACHE_ANNOTATION: f"{contract.neuron_compile_cache_path}/{cache.name}", COMPILE_CACHE_INPUTS: cache.describe()}
    )
    return job


def bert_grace_period(contract: PlatformContract, request: JobRequest, throughput_mb_s: float) -> GracePeriod:
    """The pods' grace period of ``request``'s BERT job: the checkpoint of the model it trains, and a step at the
    sourced rate of that model on the group's instance type, or ``--step-seconds``."""
    chosen = training_options(contract, request)
    group = choose_node_group(contract, request.node_group)
    model = chosen.get("model", options.parser().get_default("model"))
    return job_grace_period(
        model, group.instance_type, chosen["batch_size"], chosen["grad_accum_steps"], throughput_mb_s, request.step_seconds
    )


WORKLOADS = {"bert": (volcano_job, bert_grace_period), "torchtitan": (titan_job, titan_grace_period)}
DEFAULT_NAMES = {"bert": "berttrain", "torchtitan": "qwen3train"}
# Whether a drain of the job's pods fits a Capacity Block's window, on a group whose nodes run in one.
CAPACITY_BLOCK_ANNOTATION = "trainium-eks/capacity-block-drain"


def in_capacity_block(contract: PlatformContract, group: NodeGroup) -> bool:
    """Whether ``group``'s nodes run in a Capacity Block, as far as the contract tells: a type its region sells in
    Capacity Blocks only (``catalog``: trn2.48xlarge in us-east-2) does, since the stack refuses it any other way
    (``trainium_eks/config/node_groups.py``); which reservation another group targets is not in the contract."""
    spec = catalog.INSTANCE_TYPES.get(group.instance_type)
    return spec is not None and spec.block_only(contract.region)


def launched_job(contract: PlatformContract, request: JobRequest, workload: str = "bert") -> dict:
    """The Volcano Job of ``workload`` for ``request``, its pods given the grace period a drain needs, refused where
    its nodes run in a Capacity Block and that drain does not fit the block's window; on a platform older than contract
    1.6.0, which publishes no file system throughput, Kubernetes' default, and the annotation says why."""
    build, grace_period = WORKLOADS[workload]
    job = build(contract, request)
    if contract.fsx_throughput_mbps is None:
        job["metadata"]["annotations"][GRACE_PERIOD_ANNOTATION] = (
            f"Kubernetes' default {KUBERNETES_DEFAULT_GRACE_SECONDS} s: contract {contract.version} publishes no "
            "fsxThroughputMBps to size a drain's checkpoint write by; upgrade the platform stack"
        )
        return job
    grace = grace_period(contract, request, contract.fsx_throughput_mbps)
    too_long = grace.beyond_bound()
    if too_long:
        raise LaunchError(f"fsxThroughputMBps or --step-seconds: {too_long}; check the outputs' throughput and the step")
    group = choose_node_group(contract, request.node_group)
    if in_capacity_block(contract, group):
        if not grace.fits_capacity_block_window:
            raise LaunchError(f"--node-group {group.name}: {grace.capacity_block_verdict()}")
        job["metadata"]["annotations"][CAPACITY_BLOCK_ANNOTATION] = grace.capacity_block_verdict()
    return with_grace_period(job, grace)


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
    group = choose_node_group(contract, request.node_group)
    backend = contract.software(group).backend
    if given.get("device", "auto") not in ("auto", backend):
        raise LaunchError(
            f"--device {given['device']} after --: node group {group.name}'s image trains on the {backend} backend; "
            f"drop it (auto takes the image's) or pass --device {backend}"
        )
    chosen = {
        "data_dir": f"{contract.datasets_path}/{DATASET}",
        # The run's own: another node group's run of the same name never resumes from these checkpoints.
        "output_dir": run_directory(contract, request.name, group),
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


def add_api_tunnel_option(p: OneLineParser) -> None:
    p.add_argument(
        "--api-tunnel",
        type=port,
        metavar="PORT",
        help="reach a private endpoint through the local end of `python -m jobs.api_tunnel`'s session on PORT",
    )


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m jobs.launch", description=description(__doc__))
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
    p.add_argument("--image-tag", help="training image tag (default: the tag of the node group's training image)")
    p.add_argument(
        "--workload",
        choices=tuple(WORKLOADS),
        default="bert",
        help="what to train: bert (default) or torchtitan (LLM pre-training, the Neuron tutorial's configuration for "
        "the group's instance type; trn2/trn3 groups)",
    )
    p.add_argument(
        "--name", help="job name (default: berttrain, bertcompile with --precompile, qwen3train with --workload torchtitan)"
    )
    p.add_argument(
        "--precompile",
        action="store_true",
        help="run neuron_parallel_compile to fill the compile cache (PyTorch/XLA groups; TorchNeuron compiles as it trains)",
    )
    p.add_argument("--no-bf16", dest="bf16", action="store_false", help="compute in float32")
    p.add_argument(
        "--step-seconds",
        type=float,
        help="the longest training step in seconds, for the pods' grace period where no source gives it",
    )
    p.add_argument(
        "--checkpoint-gib", type=float, help="one checkpoint's size in GiB, for the grace period where no source gives it"
    )
    p.add_argument("--dryrun", action="store_true", help="print the Volcano Job instead of submitting it")
    add_api_tunnel_option(p)
    p.add_argument("--json", action="store_true", help="print JSON (with --dryrun: the Volcano Job)")
    p.add_argument("training_args", nargs="*", help="arguments for the training module, after --")
    return p


def main(argv: list[str] | None = None) -> int:
    def run(args) -> None:
        default_name = "bertcompile" if args.precompile and args.workload == "bert" else DEFAULT_NAMES[args.workload]
        request = JobRequest.from_options(
            name=args.name if args.name is not None else default_name,
            nodes=args.nodes,
            workers_per_node=args.workers_per_node,
            node_group=args.node_group,
            queue=args.queue,
            image_tag=args.image_tag,
            precompile=args.precompile,
            bf16=args.bf16,
            training_args=tuple(args.training_args),
            step_seconds=args.step_seconds,
            checkpoint_gib=args.checkpoint_gib,
        )
        contract = workspace(read_contract(args.stack, args.outputs), args.team)
        job = launched_job(contract, request, args.workload)
        annotations = job["metadata"]["annotations"]
        print(
            f"compile cache {annotations[COMPILE_CACHE_ANNOTATION]} ({annotations[COMPILE_CACHE_INPUTS]}); "
            f"termination grace period {annotations[GRACE_PERIOD_ANNOTATION]}",
            file=sys.stderr,
        )
        if CAPACITY_BLOCK_ANNOTATION in annotations:
            print(f"Capacity Block: {annotations[CAPACITY_BLOCK_ANNOTATION]}", file=sys.stderr)
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
