"""Acceptance at line rate: the two-node all-reduce bus bandwidth against the type's floor of its EFA line rate, measured
by nccom-test (efa-bandwidth, every generation) and by torch.distributed on the training process group
(collective-bandwidth, the backends whose collectives run when called: TorchNeuron's ``neuron``, on trn2)."""

from __future__ import annotations

from jobs.acceptance.check_pods import SHARED_VOLUME_OWNER, two_efa_nodes
from jobs.acceptance.check_workload import NODE, Check, PodShape, check_job
from jobs.errors import LaunchError
from jobs.job_building.platform_job import group_software
from trainium_eks import catalog, versions
from trainium_eks.backends import BACKENDS
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup
from trainium_eks.pod_security import ROOT_UID

# efa-bandwidth. nccom-test runs a multi-node benchmark through MPI: given every host and NEURON_RT_ROOT_COMM_ID (the
# first host's address and a free port), it starts neuron-bench on each host and gathers the latencies on the host
# it runs on, which need not take part (NCCOM-TEST User Guide, "MPI Execution"; Neuron tools 2.16.1.0 release notes).
# How MPI reaches the hosts, and why the nodes run sshd as they do: jobs/acceptance/check_workload.py.
BANDWIDTH_NODES = 2
ROOT_COMM_PORT = 63182  # any free port on the first host
DATA_COLLECTOR_PORT = 60006  # nccom-test's default
# Message sizes from 64 MiB to 2 GiB, doubling: large enough to reach the fabric's plateau (the check takes the peak).
NCCOM_SIZES = ("-b", "64MB", "-e", "2GB", "-f", "2", "-n", "20", "-w", "5", "-d", "fp32")


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
    floor = catalog.INSTANCE_TYPES[group.instance_type].acceptance_bus_bandwidth_fraction
    two_efa_nodes(contract, group, "efa-bandwidth", floor)
    launcher = ("bash", "-c", _launcher_script(group, floor))
    return check_job(contract, group, Check("efa-bandwidth", PodShape.MPI, launcher, BANDWIDTH_NODES, uid=ROOT_UID))


def collective_bandwidth(contract: PlatformContract, group: NodeGroup, nodes: int | None = None) -> dict:
    """torch.distributed's all-reduce across two whole nodes on the group's image and process group (one rank per
    NeuronCore), judged against the same floor of the line rate as nccom-test's (the type's
    ``acceptance_bus_bandwidth_fraction`` in the catalog: an engineering choice, not a published figure)."""
    floor = catalog.INSTANCE_TYPES[group.instance_type].acceptance_bus_bandwidth_fraction
    software = group_software(contract, group)
    # Only the backends whose collectives run when called can be timed call by call (training/collective_bandwidth.py);
    # PyTorch/XLA's run when the step's graph is cut: trn1's are nccom-test's to measure.
    if not BACKENDS[software.backend].eager_collectives:
        trained = [b for b in BACKENDS.values() if b.eager_collectives and versions.backend_generations(b.name)]
        eager = " or ".join(backend.name for backend in trained)
        raise LaunchError(
            f"collective-bandwidth: times torch.distributed on the {eager} backend; node group "
            f"{group.name} trains with {software.training_stack} ({software.backend} backend), whose collectives "
            "efa-bandwidth measures with nccom-test"
        )
    two_efa_nodes(contract, group, "collective-bandwidth", floor)
    line_rate_gbps = catalog.INSTANCE_TYPES[group.instance_type].network_bandwidth_gbps
    measure = ("--line-rate-gbps", f"{line_rate_gbps:g}", "--min-fraction", f"{floor:g}")
    module = ("training.collective_bandwidth", *measure)
    check = Check("collective-bandwidth", PodShape.TORCHRUN, module, BANDWIDTH_NODES, uid=SHARED_VOLUME_OWNER)
    return check_job(contract, group, check)
