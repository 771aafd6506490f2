"""How long from `pulumi up` of a new stack to the first training step of a job on a Trainium group, cold (nothing
done before) and warm (the dataset on the file system and the compile cache filled by an earlier run), term by term.

Each term carries its source; what no source gives a figure for (layer unpacking, the device plugins' start, loading
cached graphs, the native backend's compile) is named and not counted, so both totals are lower bounds. The job is the
tutorial's BERT-large pretraining on the most nodes of the group a job can have, as the launcher counts them
(``job_node_ceiling``: a managed group's desiredSize, an elastic group's maxSize), on the group's training stack
(``TrainiumGroup.training_stack``): it decides how the job's graphs are compiled.
"""

from __future__ import annotations

from dataclasses import dataclass

from plan_graph.graph import Graph, Node, number, vpc_endpoint_service
from plan_graph.trainium_groups import TrainiumGroup, trainium_groups
from trainium_eks import service_prices, tokens, versions
from trainium_eks.contract import job_node_ceiling
from trainium_eks.fsx_throughput import write_mb_s
from trainium_eks.wording import counted

GIB_BITS = 8 * 1024**3
GB = 1000**3
# A Karpenter node is Ready "about 30-40s" after it is launched (a Karpenter maintainer, aws/karpenter-provider-aws
# #6165); a managed group's nodes are Ready when `pulumi up` ends, since EKS creates a node group with its nodes.
KARPENTER_NODE_READY_MINUTES = 40 / 60
# An interface endpoint carries 10 Gbps per AZ and scales to 100 (AWS PrivateLink quotas); a NAT gateway 5 Gbps,
# scaling to 100 (VPC User Guide, "NAT gateway basics"). The sustained figures: scaling takes time.
ENDPOINT_GBPS = 10.0
NAT_GBPS = 5.0
# The tutorial's dataset, "50+ GB", written once into the file system (seed tutorial, data preparation), at the file
# system's write throughput (``fsx_throughput.write_mb_s``).
DATASET_GB = 50
# The tutorial's neuron_parallel_compile of the BERT-large job on two trn1.32xlarge: "~15 min" for its 6 graphs.
# A warm cache (the same graphs compiled before, on the shared file system) skips it.
COMPILE_MINUTES = 15.0
# TorchNeuron compiles nothing ahead of a job: torch.compile(backend="neuron") compiles each graph at the first steps
# and stores its NEFF in the persistent NEFF cache, TORCH_NEURONX_NEFF_CACHE_DIR (Neuron docs, "What are Neuron
# Compiler artifacts?", 2026-11-16), which jobs point at the shared file system; no source gives how long it takes.
NATIVE_COMPILE = (
    'torch.compile(backend="neuron") compiles each graph at the first steps and keeps its NEFF in '
    "TORCH_NEURONX_NEFF_CACHE_DIR on the shared file system, which a warm run reads; not counted: no source gives "
    "its duration"
)
NOT_COUNTED = "layer unpacking, the Neuron and EFA device plugins' start, loading graphs from the cache"


@dataclass(frozen=True)
class Term:
    what: str
    minutes: float | None  # None: not estimated (the reason is in ``source``)
    source: str
    cold_only: bool = False

    def to_json(self) -> dict:
        return {"what": self.what, "minutes": self.minutes, "source": self.source, "coldOnly": self.cold_only}


@dataclass(frozen=True)
class FirstStep:
    group: str
    nodes: int
    terms: tuple[Term, ...]

    def total(self, *, cold: bool) -> float:
        return sum(t.minutes or 0.0 for t in self.terms if cold or not t.cold_only)

    def to_json(self) -> dict:
        return {
            "group": self.group,
            "nodes": self.nodes,
            "coldMinutes": round(self.total(cold=True), 1),
            "warmMinutes": round(self.total(cold=False), 1),
            "terms": [t.to_json() for t in self.terms],
            "notCounted": NOT_COUNTED,
        }


def _image_pull(group: TrainiumGroup, nodes: int, image_gib: float | None, through_endpoints: bool) -> Term:
    route, shared_gbps = ("the ECR interface endpoint", ENDPOINT_GBPS) if through_endpoints else ("the NAT gateway", NAT_GBPS)
    # The nodes pull at once and share the route; none pulls faster than its own network.
    gbps = min(shared_gbps, nodes * group.spec.network_bandwidth_gbps)
    per_gib = nodes * GIB_BITS / (gbps * 1e9) / 60
    source = f"{counted(nodes, 'node')} share {route}'s {gbps:g} Gbps: {per_gib * 60:.1f} s per GiB of image"
    if image_gib is None:
        return Term("training image pull", None, source + "; not counted: give the image's size (--image-gib)")
    pulled_gb = nodes * image_gib * 1024**3 / GB
    rate = service_prices.VPC_INTERFACE_ENDPOINT_USD_PER_GB if through_endpoints else service_prices.NAT_GATEWAY_USD_PER_GB
    cost = f"{pulled_gb * rate:.2f} USD of {route} data processing (NAT: {pulled_gb * service_prices.NAT_GATEWAY_USD_PER_GB:.2f})"
    return Term(f"training image pull ({image_gib:g} GiB)", image_gib * per_gib, f"{source}; {cost}")


def _dataset(file_system: Node | None) -> Term:
    capacity = number(file_system.props.get("storageCapacity")) if file_system else None
    if capacity is None:
        return Term("dataset into the file system", None, "no file system the plan knows the size of", cold_only=True)
    deployment = file_system.props.get("deploymentType")
    try:
        mbps = write_mb_s(deployment, capacity, number(file_system.props.get("perUnitStorageThroughput")))
    except ValueError:
        return Term("dataset into the file system", None, f"no write throughput known for {deployment}", cold_only=True)
    return Term(
        f"dataset into the file system ({DATASET_GB} GB)",
        DATASET_GB * GB / (mbps * 1e6) / 60,
        f"the tutorial's {DATASET_GB}+ GB at {deployment}'s {mbps:.0f} MB/s for {capacity:.0f} GiB",
        cold_only=True,
    )


def _compile(stack: versions.TrainingStack | None) -> Term:
    """What compiles the job's graphs on the group's training stack, before its first step (cold: a warm cache skips it)."""
    if stack is None:
        return Term(
            "graph compilation", None, "not counted: the nodes carry no training stack the platform knows", cold_only=True
        )
    if stack.backend.precompiler:
        source = f"{stack.name}: the tutorial's neuron_parallel_compile of BERT-large, 6 graphs"
        return Term("graph compilation", COMPILE_MINUTES, source, cold_only=True)
    return Term("graph compilation", None, f"{stack.name}: {NATIVE_COMPILE}", cold_only=True)


def estimate(graph: Graph, deploy_minutes: float, image_gib: float | None = None) -> list[FirstStep]:
    """The first step of a job on each Trainium group, after a `pulumi up` of ``deploy_minutes``."""
    through_endpoints = any(
        e.props.get("vpcEndpointType") == "Interface" and vpc_endpoint_service(e) == "ecr.dkr"
        for e in graph.of_type(tokens.EC2_VPC_ENDPOINT)
    )
    file_system = next(iter(graph.of_type(tokens.FSX_LUSTRE_FILE_SYSTEM)), None)
    steps = []
    for group in trainium_groups(graph):
        ceiling = job_node_ceiling(elastic=group.elastic, desired_size=group.desired_size or 0, max_size=group.max_size or 0)
        nodes = ceiling or 1
        terms = [Term("`pulumi up` of a new stack", deploy_minutes, "its critical path (plan_graph/deployment.py)")]
        if group.elastic:
            ready = "Ready about 30-40 s after launch, aws/karpenter-provider-aws#6165"
            terms.append(Term("Karpenter launches the nodes", KARPENTER_NODE_READY_MINUTES, ready))
        terms += [
            _image_pull(group, nodes, image_gib, through_endpoints),
            _dataset(file_system),
            _compile(group.training_stack()),
        ]
        steps.append(FirstStep(group.node.name, nodes, tuple(terms)))
    return steps
