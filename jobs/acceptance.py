"""Acceptance jobs that prove a fresh cluster works, built from the stack's outputs.

python -m jobs.acceptance CHECK [--stack STACK | --outputs FILE] [--dryrun] [--json]

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
from torchx import specs
from torchx.schedulers.kubernetes_scheduler import app_to_resource, sanitize_for_serialization

from jobs import TRAINING_IMAGE_TAG
from jobs.components import COLLECTIVES_ENVIRONMENT, EFA_ENVIRONMENT, whole_node_resource
from jobs.launch import (
    LaunchError,
    add_platform_scheduling,
    choose_node_group,
    read_outputs,
    report_bad_input,
    request_devices,
    submit,
    whole_node_job,
    whole_node_share,
)
from trainium_eks import catalog, layout
from trainium_eks.cli import OneLineParser
from trainium_eks.contract import NodeGroup, PlatformContract
from trainium_eks.pod_security import restricted_container_security_context, restricted_pod_security_context

LABEL = "trainium-eks/acceptance"
# Checks run as an unprivileged user. The Neuron driver's udev rule makes /dev/neuron* usable without root
# (aws-neuron-driver README: KERNEL=="neuron*", MODE="0666"); a node that restricts the devices to a group, as
# Neuron's security guidance suggests, needs that group in the pods' supplementalGroups. Checks that write to
# the shared volume run as root, its owner (the training image writes it as root), with every other control.
CHECK_UID = 1000
SHARED_VOLUME_OWNER = 0
SCRATCH = {"name": "scratch", "mountPath": "/tmp"}  # the only writable path under a read-only root filesystem
# cpu and memory of each check's container: enough for a shell, neuron-ls or a Python client.
CHECK_RESOURCES = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}


def _image(contract: PlatformContract) -> str:
    return f"{contract.ecr_repository_url}:{TRAINING_IMAGE_TAG}"


def hardened(pod_spec: dict, uid: int = CHECK_UID) -> dict:
    """The pod under the "restricted" Pod Security Standard (as root only when ``uid`` is 0), with a scratch
    /tmp and cpu, memory and device requests on every container."""
    pod_spec["securityContext"] = restricted_pod_security_context(uid)
    if uid == 0:
        pod_spec["securityContext"]["runAsNonRoot"] = False
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


def _batch_job(contract: PlatformContract, name: str, pods: int, pod_spec: dict, spread: bool, uid: int = CHECK_UID) -> dict:
    labels = {LABEL: name}
    if spread:  # one pod per node
        pod_spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"acceptance-{name}", "namespace": contract.job_namespace, "labels": labels},
        "spec": {
            "completions": pods,
            "parallelism": pods,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {"metadata": {"labels": dict(labels)}, "spec": {"restartPolicy": "Never", **hardened(pod_spec, uid)}},
        },
    }


# A check runs once: a rerun after a failure (a bandwidth below the floor, a wrong sum) could end in one lucky pass.
# Any failed or evicted pod ends the job with TerminateJob: Volcano kills the other pods, keeps the failed one for its
# log and leaves the job Terminated, a finished phase that cannot be resumed (AbortJob's Aborted can be, by ResumeJob:
# Volcano 1.15 batch/v1alpha1 job.go phases, bus/v1alpha1 actions.go, controllers/job/state/). No policy restarts the
# job, and maxRetry is 1, not 0: Volcano's admission webhook replaces 0 by its default 3 (webhooks/admission/jobs/
# mutate/mutate_job.go), while 1 fails the job on any restart (state/restarting.go: RetryCount >= maxRetry).
CHECK_RESTARTS = 1
CHECK_LIFECYCLE = [{"event": "PodFailed", "action": "TerminateJob"}, {"event": "PodEvicted", "action": "TerminateJob"}]


def run_once(job: dict) -> dict:
    """The Volcano Job with the one-shot lifecycle of a check in place of the training job's restarts."""
    job["spec"]["maxRetry"] = CHECK_RESTARTS
    job["spec"]["policies"] = [dict(policy) for policy in CHECK_LIFECYCLE]
    return job


def _on_trainium(contract: PlatformContract, group, container: dict, volumes: list | None = None) -> dict:
    return {
        "nodeSelector": dict(group.node_selector),
        "tolerations": contract.tolerations(),
        "containers": [container],
        **({"volumes": volumes} if volumes else {}),
    }


def neuron_devices(contract: PlatformContract) -> dict:
    group = choose_node_group(contract, None)
    container = {
        "name": "neuron-ls",
        "image": _image(contract),
        "command": ["neuron-ls"],
        "resources": {"limits": {layout.NEURON_DEVICE_RESOURCE: str(group.neuron_devices_per_node)}},
    }
    return _batch_job(contract, "neuron-devices", group.desired_size, _on_trainium(contract, group, container), spread=True)


def efa_allreduce(contract: PlatformContract) -> dict:
    group = choose_node_group(contract, None)
    if group.desired_size < 2 or not group.efa_interfaces_per_node:
        raise LaunchError(
            f"efa-allreduce: node group {group.name} needs two or more EFA nodes "
            f"(it has {group.desired_size} x {group.instance_type})"
        )
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


# efa-bandwidth. nccom-test runs a multi-node benchmark through MPI: given every host and NEURON_RT_ROOT_COMM_ID (the
# first host's address and a free port), it starts neuron-bench on each host and gathers the latencies on the host
# it runs on, which need not take part (NCCOM-TEST User Guide, "MPI Execution"; Neuron tools 2.16.1.0 release notes).
# MPI reaches the hosts over SSH: Volcano's ssh plugin gives the job's pods one key pair (mounted at /root/.ssh) and
# its svc plugin their host names (Volcano docs, "MPI on Volcano" and "Job plugins"); the training image's base has
# Open MPI and an SSH server configured "for MPI in K8s" (aws-neuron/deep-learning-containers
# pytorch/training/2.9.0/Dockerfile.neuronx). aws-k8s-tester's Neuron MPIJob runs nccom-test the same way.
LAUNCHER, NODE = "launcher", "node"
BANDWIDTH_NODES = 2
ROOT_COMM_PORT = 63182  # any free port on the first host
DATA_COLLECTOR_PORT = 60006  # nccom-test's default
# Message sizes from 64 MiB to 2 GiB, doubling: large enough to reach the fabric's plateau (the check takes the peak).
NCCOM_SIZES = ("-b", "64MB", "-e", "2GB", "-f", "2", "-n", "20", "-w", "5", "-d", "fp32")
LAUNCHER_SHARE = {"cpu": 2, "mem_mb": 4096}  # nccom-test itself, mpirun and ssh; the nodes do the work
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


def _launcher_script(group: NodeGroup, floor: float) -> str:
    ranks = BANDWIDTH_NODES * group.neuron_cores_per_node  # every NeuronCore of both nodes is a rank
    line_rate_gbps = catalog.INSTANCE_TYPES[group.instance_type].network_bandwidth_gbps
    # Volcano's svc plugin names each task's hosts in VC_<TASK>_HOSTS (TorchX's Kubernetes scheduler relies on the same).
    hosts = " ".join(f"$VC_{NODE.upper()}_{index}_HOSTS" for index in range(BANDWIDTH_NODES))
    nccom = [
        "nccom-test", "-r", str(ranks), "-N", str(BANDWIDTH_NODES), *NCCOM_SIZES, "--non-interactive", "allr",
        "--hosts", '"${addresses[@]}"', "--data-collector-host", '"$POD_IP"', "--data-collector-port", str(DATA_COLLECTOR_PORT),
    ]  # fmt: skip
    return "\n".join(
        [
            "set -euo pipefail; cd /tmp; addresses=()",
            f"for host in {hosts}; do",  # each node's address once its sshd answers (up to 10 minutes)
            '  for _ in $(seq 120); do address=$(getent hosts "$host" | cut -d" " -f1 || true)',
            '    [ -n "$address" ] && (exec 3<>"/dev/tcp/$address/22") 2>/dev/null && break; address=""; sleep 5; done',
            '  [ -n "$address" ] || { echo "$host never answered on port 22"; exit 1; }; addresses+=("$address"); done',
            f'export NEURON_RT_ROOT_COMM_ID="${{addresses[0]}}:{ROOT_COMM_PORT}"',
            " ".join(nccom) + " | tee /tmp/nccom-test.txt",
            "python -m training.bus_bandwidth_check /tmp/nccom-test.txt"
            f" --line-rate-gbps {line_rate_gbps:g} --min-fraction {floor:g}",
        ]
    )


def efa_bandwidth(contract: PlatformContract) -> dict:
    """nccom-test's all-reduce across two whole nodes, judged against the instance type's floor of its line rate."""
    group = choose_node_group(contract, None)
    floor = catalog.ACCEPTANCE_BUS_BANDWIDTH_FRACTION.get(group.instance_type)
    if group.desired_size < BANDWIDTH_NODES or not group.efa_interfaces_per_node or floor is None:
        raise LaunchError(
            f"efa-bandwidth: node group {group.name} needs two or more EFA nodes of a type with a bandwidth floor in "
            f"the catalog (it has {group.desired_size} x {group.instance_type})"
        )
    image = _image(contract)
    efa_env = {**COLLECTIVES_ENVIRONMENT, **EFA_ENVIRONMENT}
    node = whole_node_resource(
        group.instance_type, group.neuron_devices_per_node, group.efa_interfaces_per_node, **whole_node_share(group)
    )
    app = specs.AppDef(
        name="acceptance-efa-bandwidth",
        roles=[
            specs.Role(
                name=LAUNCHER,
                image=image,
                entrypoint="bash",
                args=["-c", _launcher_script(group, floor)],
                resource=specs.Resource(cpu=LAUNCHER_SHARE["cpu"], gpu=0, memMB=LAUNCHER_SHARE["mem_mb"]),
                env={**efa_env, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"},
            ),
            specs.Role(
                name=NODE,
                image=image,
                entrypoint="bash",
                args=["-c", SSHD],
                num_replicas=BANDWIDTH_NODES,
                resource=node,
                env=efa_env,
            ),
        ],
    )
    job = run_once(
        add_platform_scheduling(
            sanitize_for_serialization(app_to_resource(app, queue=contract.queues[0], service_account=None)), contract, group
        )
    )
    job["spec"]["plugins"]["ssh"] = []
    for task in job["spec"]["tasks"]:
        spec = task["template"]["spec"]
        if task["name"].startswith(LAUNCHER):
            # The nodes' sshd never ends, so the launcher's end ends the job: Completed when the check passes. A launcher
            # that fails (exit 1 below the floor, 2 no result) meets the job's PodFailed policy: Terminated.
            task["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
            spec["containers"][0]["env"].append({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
            hardened(spec, uid=0)  # as root, to read the key Volcano mounts at /root/.ssh
        else:
            spec["securityContext"] = {"runAsUser": 0, "runAsNonRoot": False, "seccompProfile": {"type": "RuntimeDefault"}}
            for container in spec["containers"]:
                container["securityContext"] = {"allowPrivilegeEscalation": False}
    return job


def fsx_shared(contract: PlatformContract) -> dict:
    group = choose_node_group(contract, None)
    directory = f"{contract.fsx_mount_path}/acceptance/fsx-shared"
    script = (
        f'set -eu; mkdir -p {directory}; echo "$HOSTNAME" > {directory}/$JOB_COMPLETION_INDEX; '
        f"peer={directory}/$((1 - JOB_COMPLETION_INDEX)); for _ in $(seq 120); do [ -s $peer ] && break; sleep 1; done; "
        'echo "read $(cat $peer) from the shared volume"'
    )
    container = {
        "name": "fsx",
        "image": _image(contract),
        "command": ["bash", "-c", script],
        "volumeMounts": [{"name": "shared", "mountPath": contract.fsx_mount_path}],
    }
    volumes = [{"name": "shared", "persistentVolumeClaim": {"claimName": contract.fsx_claim_name}}]
    spread = group.desired_size >= 2  # two nodes when there are two; else two pods on the one node
    pod = _on_trainium(contract, group, container, volumes)
    return _batch_job(contract, "fsx-shared", 2, pod, spread=spread, uid=SHARED_VOLUME_OWNER)


def etcd_rendezvous(contract: PlatformContract) -> dict:
    host, port = contract.etcd_endpoint.rsplit(":", 1)
    check = (
        f"import etcd; c = etcd.Client(host={host!r}, port={int(port)}, protocol='http'); "
        "c.write('/acceptance/rendezvous', 'ok', ttl=60); assert c.read('/acceptance/rendezvous').value == 'ok'; "
        "print('etcd v2 API answers torch rendezvous')"
    )
    container = {"name": "etcd", "image": _image(contract), "command": ["python", "-c", check]}
    pod = {"nodeSelector": {layout.NODE_ROLE_LABEL: layout.SYSTEM_NODE_ROLE}, "containers": [container]}
    return _batch_job(contract, "etcd-rendezvous", 1, pod, spread=False)


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
    p.add_argument("--dryrun", action="store_true", help="print the jobs instead of submitting them")
    p.add_argument("--json", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    def run(args) -> None:
        contract = PlatformContract.from_outputs(read_outputs(args.stack, args.outputs))
        names = list(CHECKS) if args.check == "all" else [args.check]
        jobs = [CHECKS[name](contract) for name in names]
        if args.dryrun:
            print(json.dumps(jobs if len(jobs) > 1 else jobs[0], indent=2) if args.json else yaml.safe_dump_all(jobs))
        else:
            for job in jobs:
                print(f"submitted {job['kind']} {contract.job_namespace}/{submit(job, contract)}")

    return report_bad_input(parser, argv, run)


if __name__ == "__main__":
    sys.exit(main())
