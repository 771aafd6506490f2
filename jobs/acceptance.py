"""Acceptance jobs that prove a fresh cluster works, built from the stack's outputs.

python -m jobs.acceptance CHECK [--stack STACK | --outputs FILE] [--nodes N] [--dryrun] [--json]

neuron-devices    every Trainium node advertises all its Neuron devices (neuron-ls, one pod per node)
efa-allreduce     an all-reduce across two nodes' workers over EFA (torchrun with etcd rendezvous)
efa-bandwidth     the two-node all-reduce bus bandwidth (nccom-test) reaches the type's floor of its EFA line rate
fsx-shared        two pods on two nodes write to the shared volume and read each other's file
etcd-rendezvous   the rendezvous etcd answers torch's client (python-etcd, v2 API)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from jobs import TRAINING_IMAGE_TAG
from jobs.bandwidth import LAUNCHER, NODE, efa_bandwidth
from jobs.capacity import LaunchError, choose_node_group, node_count
from jobs.check_pods import SHARED_VOLUME_OWNER, batch_job, check_image, hardened, run_once, two_efa_nodes
from jobs.launch import read_outputs, report_bad_input, submit, whole_node_job

__all__ = ["CHECKS", "LAUNCHER", "NODE", "main"]  # the bandwidth check's task names, as the tests and README name them
from trainium_eks import layout
from trainium_eks.cli import OneLineParser
from trainium_eks.contract import PlatformContract


def _on_trainium(contract: PlatformContract, group, container: dict, volumes: list | None = None) -> dict:
    return {
        "nodeSelector": dict(group.node_selector),
        "tolerations": contract.tolerations(),
        "containers": [container],
        **({"volumes": volumes} if volumes else {}),
    }


def neuron_devices(contract: PlatformContract, nodes: int | None = None) -> dict:
    """On every node a managed group runs (default), or on ``nodes`` nodes; an elastic pool's come up for the check."""
    group = choose_node_group(contract, None)
    count = node_count(contract, group, nodes, default=contract.node_ceiling(group))
    container = {
        "name": "neuron-ls",
        "image": check_image(contract),
        "command": ["neuron-ls"],
        "resources": {"limits": {layout.NEURON_DEVICE_RESOURCE: str(group.neuron_devices_per_node)}},
    }
    return batch_job(contract, "neuron-devices", count, _on_trainium(contract, group, container), spread=True)


def efa_allreduce(contract: PlatformContract, nodes: int | None = None) -> dict:
    group = two_efa_nodes(contract, "efa-allreduce")
    job = whole_node_job(
        contract,
        group,
        name="acceptance-efa",
        queue=contract.queues[0],
        image_tag=TRAINING_IMAGE_TAG,
        nnodes=2,
        nproc_per_node=group.neuron_cores_per_node,
        cache_set="acceptance",
        module="training.allreduce_check",
        bf16=False,
    )
    for task in job["spec"]["tasks"]:  # writes its compiled graph to the cache on the shared volume
        hardened(task["template"]["spec"], SHARED_VOLUME_OWNER)
    return run_once(job)


def fsx_shared(contract: PlatformContract, nodes: int | None = None) -> dict:
    group = choose_node_group(contract, None)
    available = node_count(contract, group, nodes)
    directory = f"{contract.fsx_mount_path}/acceptance/fsx-shared"
    script = (
        f'set -eu; mkdir -p {directory}; echo "$HOSTNAME" > {directory}/$JOB_COMPLETION_INDEX; '
        f"peer={directory}/$((1 - JOB_COMPLETION_INDEX)); for _ in $(seq 120); do [ -s $peer ] && break; sleep 1; done; "
        'echo "read $(cat $peer) from the shared volume"'
    )
    container = {
        "name": "fsx",
        "image": check_image(contract),
        "command": ["bash", "-c", script],
        "volumeMounts": [{"name": "shared", "mountPath": contract.fsx_mount_path}],
    }
    volumes = [{"name": "shared", "persistentVolumeClaim": {"claimName": contract.fsx_claim_name}}]
    spread = available >= 2  # two nodes when there are two; else two pods on the one node
    pod = _on_trainium(contract, group, container, volumes)
    return batch_job(contract, "fsx-shared", 2, pod, spread=spread, uid=SHARED_VOLUME_OWNER)


def etcd_rendezvous(contract: PlatformContract, nodes: int | None = None) -> dict:
    """On a system node (``nodes`` does not apply)."""
    host, port = contract.etcd_endpoint.rsplit(":", 1)
    check = (
        f"import etcd; c = etcd.Client(host={host!r}, port={int(port)}, protocol='http'); "
        "c.write('/acceptance/rendezvous', 'ok', ttl=60); assert c.read('/acceptance/rendezvous').value == 'ok'; "
        "print('etcd v2 API answers torch rendezvous')"
    )
    container = {"name": "etcd", "image": check_image(contract), "command": ["python", "-c", check]}
    pod = {"nodeSelector": {layout.NODE_ROLE_LABEL: layout.SYSTEM_NODE_ROLE}, "containers": [container]}
    return batch_job(contract, "etcd-rendezvous", 1, pod, spread=False)


CHECKS = {
    "neuron-devices": neuron_devices,
    "efa-allreduce": efa_allreduce,
    "efa-bandwidth": efa_bandwidth,
    "fsx-shared": fsx_shared,
    "etcd-rendezvous": etcd_rendezvous,
}


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m jobs.acceptance", description=__doc__.splitlines()[0])
    p.add_argument("check", choices=[*CHECKS, "all"])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack")
    source.add_argument("--outputs", type=Path)
    p.add_argument(
        "--nodes",
        type=int,
        help="nodes neuron-devices checks (default: every node a managed group runs, or an elastic group's maxSize, "
        "which Karpenter brings up for it); the EFA checks always take two nodes, fsx-shared two if the group holds two",
    )
    p.add_argument("--dryrun", action="store_true", help="print the jobs instead of submitting them")
    p.add_argument("--json", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    def run(args) -> None:
        contract = PlatformContract.from_outputs(read_outputs(args.stack, args.outputs))
        names = list(CHECKS) if args.check == "all" else [args.check]
        if args.nodes is not None and args.nodes < 1:
            raise LaunchError(f"--nodes {args.nodes}: a check on no node checks nothing; give 1 or more")
        jobs = [CHECKS[name](contract, args.nodes) for name in names]
        if args.dryrun:
            print(json.dumps(jobs if len(jobs) > 1 else jobs[0], indent=2) if args.json else yaml.safe_dump_all(jobs))
        else:
            for job in jobs:
                print(f"submitted {job['kind']} {contract.job_namespace}/{submit(job, contract)}")

    return report_bad_input(parser, argv, run)


if __name__ == "__main__":
    sys.exit(main())
