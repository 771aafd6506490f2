"""TorchX component for data-parallel training on Trainium: `torchrun` with etcd rendezvous, per node (run by the
platform's entrypoint, ``training.agent``).

Unlike TorchX's ``dist.ddp``, it points the rendezvous at the platform's etcd Service (``dist.ddp`` can only
use rank 0's host), asks for whole Trainium nodes (all Neuron devices and EFA interfaces), mounts the FSx
claim, and sets the Neuron and EFA environment of the reference tutorial.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchx import specs

from training import crash_budget
from trainium_eks import catalog, layout, versions
from trainium_eks.backends import BACKENDS

NEURON_DEVICE = layout.NEURON_DEVICE_RESOURCE
EFA_DEVICE = layout.EFA_RESOURCE
ROLE = "worker"
RENDEZVOUS_BACKEND = "etcd-v2"
# torchrun, run by the platform's entrypoint, which exits 143 when SIGTERM stops it and counts a crash against the run's
# budget (``training/agent.py``, ``training/crash_budget.py``, ``jobs.job_building.platform_job``).
AGENT_COMMAND = ("python", "-m", "training.agent")
# The Volcano Job's version (the pod annotation volcano.sh/job-version), which the launcher exposes to the
# container under this name; the kubelet expands $(NAME) in the command, and the agent counts crashes by it.
JOB_VERSION_ENV = crash_budget.JOB_VERSION_ENV
JOB_VERSION_ANNOTATION = "volcano.sh/job-version"
# The component's defaults are a node of the reference tutorial's; the launcher passes each node group's own.
TUTORIAL_NODE = catalog.INSTANCE_TYPES["trn1.32xlarge"]
TUTORIAL_BACKEND = versions.training_stack_of(TUTORIAL_NODE.generation).backend.name


# The Neuron collectives over EFA: their bootstrap interface (the pod's primary interface) and libfabric's EFA provider.
COLLECTIVES_ENVIRONMENT = {"CCOM_SOCKET_IFNAME": "eth0"}
EFA_ENVIRONMENT = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1"}


def training_environment(compile_cache: str, efa: bool, bf16: bool, backend: str = TUTORIAL_BACKEND) -> dict[str, str]:
    """A job's environment on ``backend`` (``trainium_eks/backends.py``), its compiled graphs in ``compile_cache``."""
    chosen = BACKENDS[backend]
    # compiled graphs on FSx, shared by every job of the same configuration (and the precompile job's)
    cache = {chosen.cache_variable: chosen.cache_value.format(compile_cache)} if chosen.cache_variable else {}
    env = {
        "NEURON_RT_RESET_CORES": "1",  # start from clean NeuronCores when a pod restarts
        **chosen.environment,
        **cache,
        **COLLECTIVES_ENVIRONMENT,
        # Workers start their own store on every attempt. The agents' shared store keeps the previous attempt's
        # keys, and a node whose workers restart alone reads its peers' stale addresses and cannot connect
        # (pytorch/pytorch#135712); the kill-and-resume test fails without this.
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }
    if efa:
        env.update(EFA_ENVIRONMENT)
    if bf16:
        env.update(chosen.bf16_environment)
    return env


@dataclass(frozen=True)
class NodeShape:
    """A whole Trainium node as its one pod asks for it: every Neuron device and EFA interface (0 on types without
    EFA), and the node's share of vCPUs and memory (MB). The defaults are a node of the reference tutorial's; the
    launcher passes each node group's own (``jobs.job_building.platform_job.node_shape``)."""

    instance_type: str = TUTORIAL_NODE.name
    neuron_devices: int = TUTORIAL_NODE.neuron_devices
    efa_interfaces: int = TUTORIAL_NODE.max_efa_interfaces
    cpu: int = 124
    mem_mb: int = 460_000

    def resource(self) -> specs.Resource:
        return specs.Resource(
            cpu=self.cpu,
            gpu=0,
            memMB=self.mem_mb,
            capabilities={"node.kubernetes.io/instance-type": self.instance_type},
            devices={NEURON_DEVICE: self.neuron_devices, **({EFA_DEVICE: self.efa_interfaces} if self.efa_interfaces else {})},
        )


@dataclass(frozen=True)
class PlatformServices:
    """What a training pod reaches of the platform: the etcd server of the rendezvous (host:port) and the shared file
    system's PersistentVolumeClaim, mounted at ``mount_path``."""

    etcd_endpoint: str = "etcd.training.svc.cluster.local:2379"
    claim_name: str = "fsx-claim"
    mount_path: str = "/data"


@dataclass(frozen=True)
class DdpRun:
    """What runs on the nodes: ``module`` of ``image`` under torchrun, ``nproc_per_node`` workers (one per NeuronCore)
    on each of ``nnodes`` nodes, its compiled graphs in ``compile_cache`` on the shared file system; ``backend``: the
    image's PyTorch backend, the name of a record of ``trainium_eks/backends.py``; ``bf16``: compute in bfloat16;
    ``precompile``: wrap the run in the backend's precompiler (compiles and caches the graphs, trains nothing; only a
    backend whose record names a precompiler);
    ``max_restarts``: times torchrun restarts the workers of every node after one of them fails."""

    image: str
    module: str = "training.pretrain_bert"
    name: str = "bert-pretrain"
    nnodes: int = 2
    nproc_per_node: int = TUTORIAL_NODE.neuron_cores
    compile_cache: str = "/data/neuron-compile-cache/default"
    backend: str = TUTORIAL_BACKEND
    bf16: bool = True
    precompile: bool = False
    max_restarts: int = 3


def trainium_ddp(
    *script_args: str, run: DdpRun, node: NodeShape = NodeShape(), services: PlatformServices = PlatformServices()
) -> specs.AppDef:
    """Data-parallel training of ``run`` over its ``nnodes`` whole Trainium nodes of shape ``node``.

    Args:
        script_args: arguments of the training module
        run: what runs (image, module, workers, compile cache, backend, precision)
        node: the whole node each pod takes
        services: the platform's etcd and shared file system
    """
    torchrun_args = [
        f"--nnodes={run.nnodes}",
        f"--nproc_per_node={run.nproc_per_node}",
        # etcd-v2 rewrites the run's state on every heartbeat, which renews its TTL; torch's older "etcd"
        # backend renews a directory with a refresh that etcd 3.5 rejects, and loses the run after 2 hours.
        f"--rdzv_backend={RENDEZVOUS_BACKEND}",
        f"--rdzv_endpoint={services.etcd_endpoint}",
        # One rendezvous per run of the job: torchrun closes a run id's rendezvous when it gives up, and a job
        # that Volcano restarts must not find it closed. Volcano bumps the version on every job restart.
        f"--rdzv_id={specs.macros.app_id}-$({JOB_VERSION_ENV})",
        f"--max-restarts={run.max_restarts}",  # a failed worker restarts every node's workers from the last checkpoint
        "--tee=3",
        "-m",
        run.module,
        *("--device", run.backend),  # the script computes on the group's backend, or refuses an image without it
        *script_args,
        *(["--bf16"] if run.bf16 else []),
    ]
    precompiler = BACKENDS[run.backend].precompiler
    if run.precompile and precompiler is None:
        raise ValueError(f"precompile: the {run.backend} backend compiles at a job's first steps; drop precompile")
    # neuron_parallel_compile wraps torchrun itself, with its own exit status on SIGTERM: a drained precompile pod
    # restarts its job by its eviction (PodEvicted), not by exit code 143.
    command = [precompiler, "torchrun", *torchrun_args] if run.precompile else [*AGENT_COMMAND, *torchrun_args]
    return specs.AppDef(
        name=run.name,
        roles=[
            specs.Role(
                name=ROLE,
                image=run.image,
                entrypoint=command[0],
                args=command[1:],
                num_replicas=run.nnodes,
                resource=node.resource(),
                env=training_environment(run.compile_cache, node.efa_interfaces > 0, run.bf16, run.backend),
                mounts=[specs.VolumeMount(src=services.claim_name, dst_path=services.mount_path)],
            )
        ],
    )
