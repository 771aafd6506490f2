"""TorchX component for data-parallel training on Trainium: `torchrun` with etcd rendezvous, per node (run by the
platform's entrypoint, ``training.agent``).

Unlike TorchX's ``dist.ddp``, it points the rendezvous at the platform's etcd Service (``dist.ddp`` can only
use rank 0's host), asks for whole Trainium nodes (all Neuron devices and EFA interfaces), mounts the FSx
claim, and sets the Neuron and EFA environment of the reference tutorial.
"""

from __future__ import annotations

from torchx import specs

from trainium_eks import catalog, layout, versions
from trainium_eks.backends import BACKENDS

NEURON_DEVICE = layout.NEURON_DEVICE_RESOURCE
EFA_DEVICE = layout.EFA_RESOURCE
ROLE = "worker"
RENDEZVOUS_BACKEND = "etcd-v2"
# torchrun, run by the platform's entrypoint, which exits 143 when SIGTERM stops it instead of torchrun's 1, the status
# of a crash budget spent: Volcano restarts a drained job by that exit code (``training/agent.py``, ``jobs.platform_job``).
AGENT_COMMAND = ("python", "-m", "training.agent")
# The Volcano Job's version (the pod annotation volcano.sh/job-version), which the launcher exposes to the
# container under this name; the kubelet expands $(NAME) in the command.
JOB_VERSION_ENV = "VOLCANO_JOB_VERSION"
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


def whole_node_resource(instance_type: str, neuron_devices: int, efa_interfaces: int, cpu: int, mem_mb: int) -> specs.Resource:
    """A whole Trainium node: every Neuron device and EFA interface, and the node's share of CPU and memory."""
    return specs.Resource(
        cpu=cpu,
        gpu=0,
        memMB=mem_mb,
        capabilities={"node.kubernetes.io/instance-type": instance_type},
        devices={NEURON_DEVICE: neuron_devices, **({EFA_DEVICE: efa_interfaces} if efa_interfaces else {})},
    )


def trainium_ddp(
    *script_args: str,
    image: str,
    module: str = "training.pretrain_bert",
    name: str = "bert-pretrain",
    nnodes: int = 2,
    nproc_per_node: int = TUTORIAL_NODE.neuron_cores,
    instance_type: str = TUTORIAL_NODE.name,
    neuron_devices: int = TUTORIAL_NODE.neuron_devices,
    efa_interfaces: int = TUTORIAL_NODE.max_efa_interfaces,
    cpu: int = 124,
    mem_mb: int = 460_000,
    etcd_endpoint: str = "etcd.training.svc.cluster.local:2379",
    claim_name: str = "fsx-claim",
    mount_path: str = "/data",
    compile_cache: str = "/data/neuron-compile-cache/default",
    backend: str = TUTORIAL_BACKEND,
    bf16: bool = True,
    precompile: bool = False,
    max_restarts: int = 3,
) -> specs.AppDef:
    """Data-parallel training over ``nnodes`` Trainium nodes, ``nproc_per_node`` workers each.

    Args:
        script_args: arguments of the training module
        image: training image (repository:tag)
        module: Python module to run with torchrun -m
        name: job name
        nnodes: number of Trainium nodes
        nproc_per_node: workers per node (one per NeuronCore)
        instance_type: EC2 instance type of the nodes
        neuron_devices: Neuron devices per node (all of them: one pod per node)
        efa_interfaces: EFA interfaces per node (0 on types without EFA)
        cpu: vCPUs requested per pod
        mem_mb: memory requested per pod, in MB
        etcd_endpoint: host:port of the etcd server for rendezvous
        claim_name: PersistentVolumeClaim of the shared file system
        mount_path: where the claim is mounted
        compile_cache: Neuron compiler cache directory on the shared file system
        backend: the image's PyTorch backend: xla (PyTorch/XLA) or neuron (TorchNeuron)
        bf16: compute in bfloat16
        precompile: wrap the run in neuron_parallel_compile (compiles and caches the graphs, trains nothing; xla only)
        max_restarts: times torchrun restarts the workers of every node after one of them fails
    """
    torchrun_args = [
        f"--nnodes={nnodes}",
        f"--nproc_per_node={nproc_per_node}",
        # etcd-v2 rewrites the run's state on every heartbeat, which renews its TTL; torch's older "etcd"
        # backend renews a directory with a refresh that etcd 3.5 rejects, and loses the run after 2 hours.
        f"--rdzv_backend={RENDEZVOUS_BACKEND}",
        f"--rdzv_endpoint={etcd_endpoint}",
        # One rendezvous per run of the job: torchrun closes a run id's rendezvous when it gives up, and a job
        # that Volcano restarts must not find it closed. Volcano bumps the version on every job restart.
        f"--rdzv_id={specs.macros.app_id}-$({JOB_VERSION_ENV})",
        f"--max-restarts={max_restarts}",  # a failed worker restarts every node's workers from the last checkpoint
        "--tee=3",
        "-m",
        module,
        *("--device", backend),  # the script computes on the group's backend, or refuses an image without it
        *script_args,
        *(["--bf16"] if bf16 else []),
    ]
    precompiler = BACKENDS[backend].precompiler
    if precompile and precompiler is None:
        raise ValueError(f"precompile: the {backend} backend compiles at a job's first steps; drop precompile")
    # neuron_parallel_compile wraps torchrun itself, with its own exit status on SIGTERM: a drained precompile pod
    # restarts its job by its eviction (PodEvicted), not by exit code 143.
    command = [precompiler, "torchrun", *torchrun_args] if precompile else [*AGENT_COMMAND, *torchrun_args]
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                name=ROLE,
                image=image,
                entrypoint=command[0],
                args=command[1:],
                num_replicas=nnodes,
                resource=whole_node_resource(instance_type, neuron_devices, efa_interfaces, cpu, mem_mb),
                env=training_environment(compile_cache, efa_interfaces > 0, bf16, backend),
                mounts=[specs.VolumeMount(src=claim_name, dst_path=mount_path)],
            )
        ],
    )
