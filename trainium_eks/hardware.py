"""The records of the hardware catalog (``trainium_eks.catalog``): an instance type, a Trainium generation, a launch
template's network interface slot, and what follows from their facts (NeuronCores at an LNC setting, the EFA layout,
a node's subnet addresses, where a type is offered). The facts themselves, with their sources, are the catalog's;
the bracketed tags ([EFA-LAYOUT], [PRICE], ...) name its sources. A generation or an instance type is one row here:
what else the platform knows of one (the training stacks of a generation, the backends it trains on, a workload's
recipe and step rate on a type, the acceptance checks' floor) is read from its row, never listed again elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

# Launch template interface types (EC2 LaunchTemplateInstanceNetworkInterfaceSpecificationRequest.InterfaceType).
ENA_INTERFACE = "interface"
EFA_WITH_ENA_INTERFACE = "efa"
EFA_ONLY_INTERFACE = "efa-only"
EFA_INTERFACE_TYPES = (EFA_WITH_ENA_INTERFACE, EFA_ONLY_INTERFACE)


@dataclass(frozen=True)
class NetworkInterfaceSlot:
    """One interface of a launch template: where it attaches and what kind it is."""

    network_card_index: int
    device_index: int
    interface_type: str

    @property
    def has_efa(self) -> bool:
        return self.interface_type in EFA_INTERFACE_TYPES

    @property
    def has_ip_address(self) -> bool:
        return self.interface_type != EFA_ONLY_INTERFACE


@dataclass(frozen=True)
class Generation:
    """A Trainium generation: its logical-NeuronCore settings [NEURON-HW] and the training stacks its groups may run.
    The Neuron runtime groups ``lnc`` physical NeuronCores into one logical core, and the device plugin advertises
    logical cores as ``aws.amazon.com/neuroncore``. A training stack (``versions.TRAINING_STACKS``) trains the
    generations that name it, and a backend the generations of the stacks on it."""

    name: str
    lnc_settings: tuple[int, ...]
    default_lnc: int
    # versions.TRAINING_STACKS names, the default first: what a group of the generation boots and trains with
    training_stacks: tuple[str, ...]


# The seed's trn1 stays on PyTorch/XLA, which TorchNeuron does not train; trn2 trains on TorchNeuron (versions.py
# says why each stack is the one).
GENERATIONS: Mapping[str, Generation] = MappingProxyType(
    {
        g.name: g
        for g in (
            Generation("trn1", lnc_settings=(1,), default_lnc=1, training_stacks=("pytorch-xla-2.30",)),
            Generation("trn2", lnc_settings=(1, 2), default_lnc=2, training_stacks=("torchneuron-2.33",)),
        )
    }
)


@dataclass(frozen=True)
class StepRate:
    """A measured training speed of a workload's model on an instance type, with its source: what a drain's grace
    period counts a step at (``jobs.job_building.grace_period``)."""

    workload: str  # a jobs.workloads.registry name
    model: str  # the workload's model option
    sequences_per_second_per_worker: float
    source: str


@dataclass(frozen=True)
class InstanceType:
    """One EC2 instance type and what the platform needs to know about it."""

    name: str
    family: str  # "trainium" or "general"
    vcpus: int
    memory_gib: int
    generation: str = ""  # a GENERATIONS name for Trainium types
    neuron_devices: int = 0
    physical_neuron_cores: int = 0
    accelerator_memory_gib: int = 0
    network_cards: int = 1
    # One EFA interface per network card is what the launch template attaches; 0 = no EFA support.
    max_efa_interfaces: int = 0
    network_bandwidth_gbps: float = 0.0
    # EFA-only interfaces on every card, behind an ENA primary interface [EFA-LAYOUT].
    efa_only_interfaces: bool = False
    # Pods the node runs with the VPC CNI (without prefix delegation) [MAX-PODS].
    max_pods: int = 0
    # The interfaces the VPC CNI attaches on the default network card, and the IPv4 addresses of each [VPC-CNI]:
    # max_pods is cni_interfaces x (ipv4_per_interface - 1) + 2.
    cni_interfaces: int = 0
    ipv4_per_interface: int = 0
    # Local NVMe instance store [INSTANCE-STORE]: its disks (nodeadm's RAID0 joins them) and the GB of each; 0: none.
    instance_store_disks: int = 0
    instance_store_disk_gb: int = 0
    # On-demand list price per hour, by region, where a source gives it [PRICE] (us-east-1 alone); none: it is sold
    # on demand nowhere the catalog knows.
    on_demand_usd_per_hour: Mapping[str, float] = field(default_factory=dict)
    # AZ IDs where the platform takes it on demand, by region [AZ]. Empty for general-purpose types (offered everywhere).
    az_ids: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # AZ IDs where EC2 offers it in any way, by region [OFFERINGS]: every on-demand AZ ID, and those of its blocks.
    offered_az_ids: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Regions where EC2 Capacity Blocks for ML sell it [CAPACITY-BLOCKS]; a block's AZ is the offering's.
    capacity_block_regions: tuple[str, ...] = ()
    # The fraction of its EFA line rate two nodes' all-reduce must reach in the acceptance checks [FLOOR]; None: no
    # floor chosen, and the two-node bandwidth checks refuse the type.
    acceptance_bus_bandwidth_fraction: float | None = None
    # Sourced training speeds on it [STEP-RATE]; a pairing not listed has no known step time.
    step_rates: tuple[StepRate, ...] = ()
    # The recipe each workload trains on it, by workload name (a name of the workload's recipes: TorchTitan's are
    # jobs.workloads.titan_recipes.RECIPES); a workload with per-type recipes and none here has no job on it.
    recipes: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_trainium(self) -> bool:
        return self.family == "trainium"

    def neuron_cores_at(self, lnc: int) -> int:
        """The NeuronCores the device plugin advertises (``aws.amazon.com/neuroncore``) at logical-core setting ``lnc``."""
        return self.physical_neuron_cores // lnc

    @property
    def neuron_cores(self) -> int:
        """The NeuronCores a node advertises at its generation's default LNC: what jobs and quotas count."""
        return self.neuron_cores_at(GENERATIONS[self.generation].default_lnc) if self.is_trainium else 0

    @property
    def instance_store_gb(self) -> int:
        """The instance store in total, GB: what one RAID0 array of its disks holds."""
        return self.instance_store_disks * self.instance_store_disk_gb

    def sequences_per_second_per_worker(self, workload: str, model: str) -> float | None:
        """The sourced rate of ``workload``'s ``model`` on this type; None where no source gives one."""
        rates = [rate for rate in self.step_rates if (rate.workload, rate.model) == (workload, model)]
        return rates[0].sequences_per_second_per_worker if rates else None

    @property
    def supports_efa(self) -> bool:
        return self.max_efa_interfaces > 0

    def efa_layout(self) -> tuple[NetworkInterfaceSlot, ...]:
        """The EC2-recommended interfaces for one EFA per network card [EFA-LAYOUT]; none without EFA."""
        cards = range(self.max_efa_interfaces)
        if self.efa_only_interfaces:
            primary = NetworkInterfaceSlot(0, 0, ENA_INTERFACE)
            return (primary, *(NetworkInterfaceSlot(card, int(card == 0), EFA_ONLY_INTERFACE) for card in cards))
        return tuple(NetworkInterfaceSlot(card, int(card > 0), EFA_WITH_ENA_INTERFACE) for card in cards)

    def node_addresses(self, other_interface_addresses: int, *, crowded: bool = False) -> int:
        """The subnet addresses one running node takes with the VPC CNI's defaults [VPC-CNI]: the interfaces on its
        default card, each with all its addresses (two while it runs fewer pods than one interface holds: the pods'
        and the warm one; every one when ``crowded``), and ``other_interface_addresses`` of interfaces the CNI does
        not manage (an EFA-with-ENA interface on another card has one)."""
        interfaces = self.cni_interfaces if crowded else min(2, self.cni_interfaces)
        return interfaces * self.ipv4_per_interface + other_interface_addresses

    def offered_in(self, region: str, az_id: str, *, capacity_block: bool = False) -> bool:
        """True when the catalog records an offering of this type in ``az_id`` of ``region``: on demand, or, for a
        group in a Capacity Block, an AZ where EC2 offers it in a region whose blocks sell it (the block fixes the AZ).
        A general-purpose type is offered everywhere."""
        if not self.is_trainium:
            return True  # general-purpose types are offered in every AZ of the regions the config accepts
        if capacity_block and region in self.capacity_block_regions:
            return az_id in self.offered_az_ids.get(region, ())
        return az_id in self.az_ids.get(region, ())

    def block_only(self, region: str) -> bool:
        """True when ``region`` sells the type in Capacity Blocks and not on demand."""
        return region in self.capacity_block_regions and not self.az_ids.get(region)

    def price(self, region: str) -> float | None:
        """On-demand price in ``region``; the highest recorded price where no source gives the region's (us-east-1's:
        [PRICE]); None when it is sold on demand nowhere the catalog knows (it runs in Capacity Blocks, at their price)."""
        prices = self.on_demand_usd_per_hour
        return prices.get(region, max(prices.values())) if prices else None
