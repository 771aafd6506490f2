"""Launch a training job on the platform, configured from a stack's outputs alone: one of the registered workloads
(``jobs.workloads.registry``): BERT pretraining (or its Neuron precompile), the default, or LLM pre-training with
TorchTitan (``--workload torchtitan``, on the groups that train on TorchNeuron).

    python -m jobs.launch [--stack STACK | --outputs FILE] [--workload NAME] [--nodes N]
                          [--workers-per-node N] [--node-group NAME] [--queue NAME] [--team NAME] [--image-tag TAG]
                          [--name NAME] [--precompile] [--no-bf16] [--step-seconds S] [--checkpoint-gib G]
                          [--capacity-blocks FILE] [--dryrun] [--json] [--api-tunnel PORT] [-- TRAINING ARGS...]

With ``--team NAME`` the job runs in that team's workspace: its namespace, queue and volume. The queue, etcd
endpoint, FSx claim and paths, the node group's training image (its generation's; ``--image-tag`` replaces the tag
alone) and PyTorch backend, instance type and per-node Neuron and EFA counts all come from the platform's output
contract. ``--precompile`` runs on PyTorch/XLA groups; TorchNeuron's first steps compile and cache the graphs. TorchX
builds the Volcano Job; the launcher then adds what TorchX cannot express: the toleration for the Trainium taint, the
node group's node selector and the job namespace. Each training argument after ``--`` replaces the launcher's own
option of that name (its directories on the shared volume, the tutorial's batch), or adds one; the others stay.

Every job's pods get a termination grace period long enough for a drain to lose no step (`jobs.job_building.grace_period`): a
step, a checkpoint written at the file system's throughput (the contract's ``fsxThroughputMBps``) and Kubernetes'
default. Where no source gives the step's time, the period leaves it out and says so (``--step-seconds`` adds it);
where none gives the checkpoint's size, the launcher asks for it (``--checkpoint-gib``). On a group whose nodes run in a
Capacity Block, a drain has ten minutes before EC2 reclaims the node (``jobs.job_building.grace_period``): a job whose grace
period is longer is refused, with the file system throughput (``fsxThroughputMBps``) and the step time that would fit; with
the step not known, the other terms must fit and the launcher says how long the step may take.

On such a group the launcher also reads the group's active Capacity Blocks (`jobs.job_building.capacity_blocks`: from EC2 through
the AWS CLI, or ``--capacity-blocks FILE``, that command's saved output; a ``--dryrun`` without the file reads none and
says so), prints how long a job can run before the last of them ends, annotates the job with it, and refuses a job
that cannot write its first checkpoint by then. Exit status: 0 submitted (or printed), 2 bad input (one line on stderr).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import yaml

from jobs.cluster_access.kube_api import submit
from jobs.cluster_access.outputs import (
    add_api_tunnel_option,
    add_source_options,
    add_team_option,
    report_bad_input,
    source_contract,
    workspace,
)
from jobs.errors import LaunchError
from jobs.job_building.capacity_blocks import (
    FirstCheckpoint,
    describe_from_ec2,
    in_capacity_block,
    read_blocks_file,
    time_in_blocks,
)
from jobs.job_building.grace_period import GracePeriod
from jobs.job_building.platform_job import (
    COMPILE_CACHE_ANNOTATION,
    COMPILE_CACHE_INPUTS,
    GRACE_PERIOD_ANNOTATION,
    JobRequest,
)
from jobs.workloads import registry
from jobs.workloads.workload import CAPACITY_BLOCK_ANNOTATION, DISRUPTIONS_ANNOTATION, TrainingRun
from trainium_eks.cli import OneLineParser, description
from trainium_eks.contract import PlatformContract

# When the group's last active Capacity Block ends and how long the job can run until then.
CAPACITY_BLOCK_END_ANNOTATION = "trainium-eks/capacity-block-end"


def capacity_block_end(
    contract: PlatformContract, workload: registry.Workload, run: TrainingRun, args, grace: GracePeriod | None, now: datetime
) -> str | None:
    """How long ``run``'s job can run in its group's active Capacity Blocks (``jobs.job_building.capacity_blocks``), read from
    ``--capacity-blocks`` or EC2, in words; refused in one line where it cannot reach its first checkpoint before
    they end. None where the group runs in no block; a note where a ``--dryrun`` has no file to read them from.
    ``workload``: the run's, whose options the refusal names; ``grace``: the job's grace period (``launched_job``),
    whose step and checkpoint write it counts."""
    group = run.placed.group
    if not in_capacity_block(contract, group):
        if args.capacity_blocks is not None:
            raise LaunchError(f"--capacity-blocks: node group {group.name} runs in no Capacity Block; drop the option")
        return None
    if group.capacity_block_tag is None and group.capacity_block_id is None:
        return "not read (the platform publishes no capacityBlockTag or capacityBlockId for the group: upgrade it)"
    if args.dryrun and args.capacity_blocks is None:
        return "not read (--dryrun reads no blocks from EC2; pass --capacity-blocks FILE)"
    first = FirstCheckpoint.of(
        contract.elastic(group),
        run.first_checkpoint_steps,
        run.request.step_seconds if grace is None else grace.step_seconds,
        None if grace is None else grace.write_seconds,
        workload.checkpoint_options,
    )
    if args.capacity_blocks is not None:
        blocks = read_blocks_file(args.capacity_blocks)
    else:
        blocks = describe_from_ec2(contract.region, group)
    return time_in_blocks(blocks, group, first, now)


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m jobs.launch", description=description(__doc__))
    add_source_options(p)
    p.add_argument(
        "--nodes",
        type=int,
        help="Trainium nodes (default: 2, or fewer if the group holds fewer, desiredSize or an elastic group's maxSize, or "
        "the workspace's quota and queue admit fewer)",
    )
    p.add_argument("--workers-per-node", type=int, help="workers per node (default: one per NeuronCore)")
    p.add_argument("--node-group", help="node group name (default: the first)")
    p.add_argument("--queue", help="Volcano queue (default: the first; with --team, the team's)")
    add_team_option(p)
    p.add_argument("--image-tag", help="training image tag (default: the tag of the node group's training image)")
    workloads = registry.workloads()
    default = next(iter(workloads.values()))
    p.add_argument(
        "--workload",
        choices=tuple(workloads),
        default=default.name,
        help="what to train: " + "; ".join(f"{w.name}: {w.help()}" for w in workloads.values()) + f" (default: {default.name})",
    )
    names = []
    for workload in workloads.values():
        chosen = "" if workload is default else f" with --workload {workload.name}"
        names.append(workload.default_name + chosen)
        if workload.default_precompile_name:
            names.append(f"{workload.default_precompile_name}{chosen or ' with'} --precompile")
    p.add_argument("--name", help=f"job name (default: {', '.join(names)})")
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
    p.add_argument(
        "--capacity-blocks",
        type=Path,
        metavar="FILE",
        help="the group's Capacity Blocks from this saved `aws ec2 describe-capacity-reservations` JSON output, not EC2",
    )
    p.add_argument("--dryrun", action="store_true", help="print the Volcano Job instead of submitting it")
    add_api_tunnel_option(p)
    p.add_argument("--json", action="store_true", help="print JSON (with --dryrun: the Volcano Job)")
    p.add_argument("training_args", nargs="*", help="arguments for the training module, after --")
    return p


def main(argv: list[str] | None = None, *, now: datetime | None = None) -> int:
    """The command; ``now`` stands in for the clock (tests only), against which a Capacity Block's end is read."""

    def run(args) -> None:
        workload = registry.workloads()[args.workload]
        request = JobRequest.from_options(
            name=args.name if args.name is not None else workload.job_name(args.precompile),
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
        contract = workspace(source_contract(args), args.team)
        built = workload.build(contract, request)
        job, annotations = built.job, built.job["metadata"]["annotations"]
        block_end = capacity_block_end(contract, workload, built.run, args, built.grace, now or datetime.now(UTC))
        if block_end:
            annotations[CAPACITY_BLOCK_END_ANNOTATION] = block_end
        print(
            f"compile cache {annotations[COMPILE_CACHE_ANNOTATION]} ({annotations[COMPILE_CACHE_INPUTS]}); "
            f"termination grace period {annotations[GRACE_PERIOD_ANNOTATION]}",
            file=sys.stderr,
        )
        if CAPACITY_BLOCK_ANNOTATION in annotations:
            print(f"Capacity Block: {annotations[CAPACITY_BLOCK_ANNOTATION]}", file=sys.stderr)
        if DISRUPTIONS_ANNOTATION in annotations:
            print(f"Disruptions: {annotations[DISRUPTIONS_ANNOTATION]}", file=sys.stderr)
        if block_end:
            print(f"Capacity Block end: {block_end}", file=sys.stderr)
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
