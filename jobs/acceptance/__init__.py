"""Acceptance jobs that prove a fresh cluster works, built from the stack's outputs.

python -m jobs.acceptance CHECK|all [--stack STACK | --outputs FILE] [--node-group NAME] [--nodes N] [--dryrun] [--json]
                          [--team NAME] [--api-tunnel PORT]

`all` runs every check that applies to the node group and says in one line which it skipped and why.

neuron-devices        every Trainium node advertises all its Neuron devices (neuron-ls, one pod per node)
efa-allreduce         an all-reduce across two nodes' workers over EFA (torchrun with etcd rendezvous)
efa-bandwidth         the two-node all-reduce bus bandwidth (nccom-test) reaches the type's floor of its EFA line rate
collective-bandwidth  the same through torch.distributed on the training process group (trn2: the neuron backend)
train-step            one BERT training step on one node, on the group's image and backend (XLA on trn1, neuron on trn2)
fsx-shared            two pods on two nodes write to the shared volume and read each other's file
etcd-rendezvous       the rendezvous etcd answers torch's client (python-etcd, v2 API)
team-volume           with --team: the team's volume is its own directory of the file system, and writable

With --team NAME every check runs in that team's workspace (its namespace, queue and volume), so etcd-rendezvous
proves the team's pods reach etcd and fsx-shared that its volume is shared between its nodes.
"""

from __future__ import annotations

import json
import sys

import yaml

from jobs.acceptance.bandwidth import collective_bandwidth, efa_bandwidth
from jobs.acceptance.check_pods import SHARED_VOLUME_OWNER, two_efa_nodes
from jobs.acceptance.check_workload import LAUNCHER, NODE, Check, PodShape, check_job
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
from jobs.job_building.capacity import admit, held_nodes, job_pods, job_usage, node_count

__all__ = ["CHECKS", "LAUNCHER", "NODE", "main"]  # the bandwidth check's task names, as the tests and README name them
from trainium_eks import layout
from trainium_eks.cli import OneLineParser
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup
from trainium_eks.wording import counted


def neuron_devices(contract: PlatformContract, group: NodeGroup, nodes: int | None = None) -> dict:
    """On every node a managed group runs (default), or on ``nodes`` nodes; an elastic pool's come up for the check."""

    def on(count: int) -> Check:
        devices = group.neuron_devices_per_node
        command = ("neuron-ls",)
        return Check("neuron-devices", PodShape.PODS, command, count, spread=True, container="neuron-ls", neuron_devices=devices)

    # as many nodes as the group holds and the workspace admits, each node's pod asking what the job's pods ask
    count = node_count(contract, group, nodes, job_usage(check_job(contract, group, on(1))), default=contract.node_ceiling(group))
    return check_job(contract, group, on(count))


def efa_allreduce(contract: PlatformContract, group: NodeGroup, nodes: int | None = None) -> dict:
    two_efa_nodes(contract, group, "efa-allreduce")
    return check_job(contract, group, Check("efa", PodShape.TORCHRUN, ("training.allreduce_check",), 2, uid=SHARED_VOLUME_OWNER))


def train_step(contract: PlatformContract, group: NodeGroup, nodes: int | None = None) -> dict:
    """``training.smoke_step`` on one whole node (every NeuronCore a worker): the tiny BERT on a synthetic shard, so
    it needs no dataset; what it proves is the group's image, device, process group, compiler and checkpoint path."""
    held_nodes(contract, group, 1, 1)  # refuses a group that runs no node (``build`` one the workspace does not admit)
    # bf16 as a training job computes: the component passes --bf16 (and on XLA sets XLA_DOWNCAST_BF16)
    check = Check("train-step", PodShape.TORCHRUN, ("training.smoke_step",), 1, uid=SHARED_VOLUME_OWNER, bf16=True)
    return check_job(contract, group, check)


def fsx_shared(contract: PlatformContract, group: NodeGroup, nodes: int | None = None) -> dict:
    available = held_nodes(contract, group, nodes, contract.node_ceiling(group))
    directory = f"{contract.fsx_mount_path}/acceptance/fsx-shared"
    script = (
        f'set -eu; mkdir -p {directory}; echo "$HOSTNAME" > {directory}/$JOB_COMPLETION_INDEX; '
        f"peer={directory}/$((1 - JOB_COMPLETION_INDEX)); for _ in $(seq 120); do [ -s $peer ] && break; sleep 1; done; "
        'echo "read $(cat $peer) from the shared volume"'
    )
    check = Check(
        "fsx-shared",
        PodShape.PODS,
        ("bash", "-c", script),
        2,
        uid=SHARED_VOLUME_OWNER,
        spread=available >= 2,  # two nodes when there are two; else two pods on the one node
        container="fsx",
        shared_volume=contract.fsx_mount_path,
    )
    return check_job(contract, group, check)


def etcd_rendezvous(contract: PlatformContract, group: NodeGroup, nodes: int | None = None) -> dict:
    """On a system node (neither the group nor ``nodes`` applies)."""
    host, port = contract.etcd_endpoint.rsplit(":", 1)
    client = (
        f"import etcd; c = etcd.Client(host={host!r}, port={int(port)}, protocol='http'); "
        "c.write('/acceptance/rendezvous', 'ok', ttl=60); assert c.read('/acceptance/rendezvous').value == 'ok'; "
        "print('etcd v2 API answers torch rendezvous')"
    )
    check = Check("etcd-rendezvous", PodShape.PODS, ("python", "-c", client), 1, on_trainium=False, container="etcd")
    return check_job(contract, group, check)


def team_volume(contract: PlatformContract, group: NodeGroup, nodes: int | None = None) -> dict:
    """On a system node: the team's /data is its directory, not the file system's root (where /teams would be), and
    the team can write it."""
    teams = [team for team in contract.teams if team.namespace == contract.job_namespace]
    if not teams:
        raise LaunchError("team-volume: checks a team's workspace; add --team NAME")
    mount, marker = contract.fsx_mount_path, f"{contract.fsx_mount_path}/.workspace-check"
    script = (
        f"set -eu; if [ -e {mount}{layout.TEAMS_DIR} ]; then echo '{mount} is the file system root, not "
        f'{teams[0].file_system_path}\'; exit 1; fi; echo "$HOSTNAME" > {marker}; cat {marker} >/dev/null; rm {marker}; '
        f"echo '{mount} is {teams[0].file_system_path} of the file system, and writable'"
    )
    check = Check(
        "team-volume",
        PodShape.PODS,
        ("bash", "-c", script),
        1,
        uid=SHARED_VOLUME_OWNER,
        on_trainium=False,
        container="volume",
        shared_volume=mount,
    )
    return check_job(contract, group, check)


CHECKS = {
    "neuron-devices": neuron_devices,
    "efa-allreduce": efa_allreduce,
    "efa-bandwidth": efa_bandwidth,
    "collective-bandwidth": collective_bandwidth,
    "train-step": train_step,
    "fsx-shared": fsx_shared,
    "etcd-rendezvous": etcd_rendezvous,
    "team-volume": team_volume,
}


def check_group(contract: PlatformContract, name: str | None) -> NodeGroup:
    """The group ``--node-group`` names; without it the stack's only group, as a check must not guess among several."""
    groups = contract.node_groups
    if name is None and len(groups) > 1:
        raise LaunchError(
            f"--node-group: the stack has {len(groups)} node groups ({', '.join(g.name for g in groups)}); name one"
        )
    matching = [g for g in groups if name in (None, g.name)]
    if not matching:
        raise LaunchError(f"--node-group {name}: no such node group; the stack has {', '.join(g.name for g in groups)}")
    return matching[0]


def build(contract: PlatformContract, group: NodeGroup, names: list[str], nodes: int | None) -> tuple[list, dict]:
    """The jobs of the checks ``names``, and why each check that does not apply to ``group`` (or that the workspace's
    quota or queue would refuse: ``capacity.admit``) was skipped. A check asked for alone that cannot run is an error;
    ``all`` skips it."""
    jobs, skipped = [], {}
    for name in names:
        try:
            job = CHECKS[name](contract, group, nodes)
            admit(contract, job, name, f"{counted(len(job_pods(job)), 'pod')} of acceptance-{name}")
            jobs.append((name, job))
        except LaunchError as error:
            if len(names) == 1:
                raise
            skipped[name] = str(error)
    return jobs, skipped


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m jobs.acceptance", description=__doc__.splitlines()[0])
    p.add_argument("check", choices=[*CHECKS, "all"], help="one check, or all that apply to the node group")
    add_source_options(p)
    p.add_argument("--node-group", help="the node group to check (default: the stack's only one)")
    p.add_argument(
        "--nodes",
        type=int,
        help="nodes neuron-devices checks (default: every node a managed group runs, or an elastic group's maxSize, "
        "which Karpenter brings up for it, as far as the workspace's quota and queue admit); the EFA checks always take "
        "two nodes, fsx-shared two if the group holds two",
    )
    p.add_argument("--dryrun", action="store_true", help="print the jobs instead of submitting them")
    add_team_option(p)
    add_api_tunnel_option(p)
    p.add_argument("--json", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    def run(args) -> None:
        contract = workspace(source_contract(args), args.team)
        if args.nodes is not None and args.nodes < 1:
            raise LaunchError(f"--nodes {args.nodes}: a check on no node checks nothing; give 1 or more")
        group = check_group(contract, args.node_group)
        # `all` is every check of the workspace: team-volume only in a team's
        every = [name for name in CHECKS if args.team or name != "team-volume"]
        jobs, skipped = build(contract, group, every if args.check == "all" else [args.check], args.nodes)
        if skipped:
            print(f"skipped on node group {group.name}: " + "; ".join(skipped.values()), file=sys.stderr)
        manifests = [job for _, job in jobs]
        if args.dryrun:
            print(
                json.dumps(manifests if len(manifests) > 1 else manifests[0], indent=2)
                if args.json
                else yaml.safe_dump_all(manifests)
            )
        verdicts = [
            f"{name}: {'built' if args.dryrun else 'submitted'} {job['kind']} {contract.job_namespace}/"
            f"{job['metadata']['name'] if args.dryrun else submit(job, contract, args.api_tunnel)}"
            for name, job in jobs
        ]
        verdicts += [f"{name}: skipped" for name in skipped]
        # The manifests own stdout in a dry run; the verdicts, one line per check, close the report.
        print("\n".join(verdicts), file=sys.stderr if args.dryrun else sys.stdout)

    return report_bad_input(parser, argv, run)
