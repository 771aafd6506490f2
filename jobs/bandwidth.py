"""Acceptance at line rate: the two-node all-reduce bus bandwidth against the type's floor of its EFA line rate, measured
by nccom-test (efa-bandwidth, every generation) and by torch.distributed on the training process group
(collective-bandwidth, the backends whose collectives run when called: TorchNeuron's ``neuron``, on trn2)."""

from __future__ import annotations

from torchx import specs
from torchx.schedulers.kubernetes_scheduler import app_to_resource, sanitize_for_serialization

from jobs.capacity import LaunchError
from jobs.check_pods import check_image, hardened, run_once, torchrun_check, two_efa_nodes
from jobs.components import COLLECTIVES_ENVIRONMENT, EFA_ENVIRONMENT
from jobs.platform_job import add_platform_scheduling, group_software, node_shape
from trainium_eks import acceptance_floors, catalog
from trainium_eks.backends import BACKENDS
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup
from trainium_eks.pod_security import root_pod_security_context

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


def efa_bandwidth(contract: PlatformContract, group: NodeGroup, nodes: int | None = None) -> dict:
    """nccom-test's all-reduce across two whole nodes, judged against the instance type's floor of its line rate."""
    floor = acceptance_floors.ACCEPTANCE_BUS_BANDWIDTH_FRACTION.get(group.instance_type)
    two_efa_nodes(contract, group, "efa-bandwidth", floor)
    image = check_image(contract, group)
    efa_env = {**COLLECTIVES_ENVIRONMENT, **EFA_ENVIRONMENT}
    node = node_shape(group).resource()
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
            spec["securityContext"] = root_pod_security_context()
            for container in spec["containers"]:
                container["securityContext"] = {"allowPrivilegeEscalation": False}
    return job


def collective_bandwidth(contract: PlatformContract, group: NodeGroup, nodes: int | None = None) -> dict:
    """torch.distributed's all-reduce across two whole nodes on the group's image and process group (one rank per
    NeuronCore), judged against the same floor of the line rate as nccom-test's (``acceptance_floors``: for trn2 an
    engineering choice, not a published figure)."""
    floor = acceptance_floors.ACCEPTANCE_BUS_BANDWIDTH_FRACTION.get(group.instance_type)
    software = group_software(contract, group)
    # Only the backends whose collectives run when called can be timed call by call (training/collective_bandwidth.py);
    # PyTorch/XLA's run when the step's graph is cut: trn1's are nccom-test's to measure.
    if not BACKENDS[software.backend].eager_collectives:
        eager = " or ".join(backend.name for backend in BACKENDS.values() if backend.eager_collectives and backend.generations)
        raise LaunchError(
            f"collective-bandwidth: times torch.distributed on the {eager} backend; node group "
            f"{group.name} trains with {software.training_stack} ({software.backend} backend), whose collectives "
            "efa-bandwidth measures with nccom-test"
        )
    two_efa_nodes(contract, group, "collective-bandwidth", floor)
    line_rate_gbps = catalog.INSTANCE_TYPES[group.instance_type].network_bandwidth_gbps
    measure = ("--line-rate-gbps", f"{line_rate_gbps:g}", "--min-fraction", f"{floor:g}")
    name = "acceptance-collective-bandwidth"
    return torchrun_check(contract, group, "training.collective_bandwidth", *measure, name=name, nodes=BANDWIDTH_NODES)
