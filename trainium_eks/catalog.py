"""Hardware catalog: every instance-type and region fact the platform relies on, in one table.

Nothing else in the project hard-codes a device count, an EFA count, a price or an AZ offering:
components, config validation, the preflight mocks and the tests all read them from here. The prices of the services
around the instances (EKS, NAT, VPC endpoints, EBS, FSx) are in trainium_eks/service_prices.py.

Sources (read 2026-12):
- [NEURON-HW]  aws-neuron-sdk about-neuron/arch/neuron-hardware/{trn1-arch,trn2-arch,trainium,trainium2}.rst
               (Trainium devices, NeuronCores, accelerator memory, vCPU, memory; Trn2 has 8 physical cores per
               device shown as 4 logical cores at the default LNC=2, logical-neuroncore-config.rst)
- [EFA]        aws-neuron-sdk setup-trn1-multi-node-execution.rst (8 EFA devices on trn1.32xlarge, 16 on trn1n,
               none on smaller sizes), neuron-runtime/about/collectives.rst (trn2: 16 x 200 Gbps EFAv3);
               network-card counts from the EC2 instance-type network specifications as mirrored in
               karpenter-provider-aws zz_generated.vpclimits.go (trn1, trn1n) and aws/amazon-vpc-cni-k8s
               pkg/vpc/vpc_ip_resource_limit.go (trn2.48xlarge: NetworkCards 0..15, commit b5218838)
- [LNC]        aws-neuron-sdk logical-neuroncore-config: Trn2 takes LNC 1 or 2, 2 by default, set per node (the
               NEURON_LOGICAL_NC_CONFIG a node's user data writes); trn2.48xlarge presents 64 NeuronCores at LNC=2
               and 128 at LNC=1 (trn2-arch). Trn1 has no LNC setting. Karpenter's instance-types.md lists
               aws.amazon.com/neuroncore 128 for trn2.48xlarge, the physical count it plans with; the node advertises
               what the device plugin sees at the node's LNC
- [PRICE]      EC2 on-demand Linux prices as mirrored in karpenter-provider-aws zz_generated.pricing_aws.go
               (generated 2026-07-20 "for us-east-1": it holds that region's prices only). The catalog records those;
               no source read here gives another region's, so an estimate elsewhere uses us-east-1's (price()).
               No AWS source gives trn2.48xlarge an on-demand price (the table has no entry), so the catalog records
               none: a trn2 group runs in a Capacity Block, at its price
- [CAPACITY-BLOCKS] EC2 User Guide "Capacity Blocks for ML" (ec2-capacity-blocks): "trn1.32xlarge - US East (N.
               Virginia) | Asia Pacific (Melbourne) - trn2.48xlarge - US East (Ohio)"; a block is "a targeted Capacity
               Reservation in a single Availability Zone", which the offering chooses; its price "is updated
               regularly based on trends in supply and demand" and is paid up front
- [AZ]         awslabs/data-on-eks ai-ml/trainium-inferentia/main.tf (2024-01 .. 2025-07: first AZ ID per region
               offers Trn1/Trn1n: use1-az6, usw2-az4, use2-az3) and aws-neuron-eks-samples
               determine_eks_azs.sh (use1-az6, usw2-az4): the AZs where the platform takes trn1 on demand
- [OFFERINGS]  EC2 DescribeInstanceTypeOfferings by availability-zone-id, as getmoto/moto records it
               (moto/ec2/resources/instance_type_offerings/availability-zone-id/<region>.json, commit c6bd43ff2,
               2026-08-01): the AZ IDs where EC2 offers a type in any way, Capacity Blocks included. trn2.48xlarge:
               use2-az1, use2-az2, use2-az3, none in us-east-1 or us-west-2; a Capacity Block is in one of them
- [EFA-LAYOUT] EC2 User Guide "Maximize network bandwidth on Amazon EC2 instances with multiple network cards"
               (efa-acc-inst-types): the primary interface (card 0, device 0) is an ENA interface and cannot be
               EFA-only; card 0's EFA is an EFA-only interface at device 1; every other card takes an EFA-only
               interface at device 0. The EKS User Guide "Manage EFA devices on Amazon EKS"
               (device-management-efa: managed node group launch template example, "Conserving IP address
               allocation") gives the same layout and says EFA-only interfaces get no IP address; "Run machine
               learning training on Amazon EKS with Elastic Fabric Adapter" (node-efa) needs a custom launch
               template and VPC CNI 1.18.5 or later for them. EC2's EFA-only launch announcement (2024-10-28, read
               on its amazonaws.cn copy) says EFA-only is available on all EFA-supported instances; no per-type
               table was found, so every EFA type here is recorded as supporting it. The previous guidance, EFA
               with ENA on every card (card 0 device 0, others device 1), is kept for a type that does not.
- [MAX-PODS]   awslabs/amazon-eks-ami templates/shared/runtime/eni-max-pods.txt (commit 0254c5b4): the pods a node
               runs with the VPC CNI, ENIs x (IPv4 addresses per ENI - 1) + 2 for the two host-network pods,
               counted on network card 0 alone for multi-card types
- [VPC-CNI]    aws/amazon-vpc-cni-k8s (commit b5218838, 2026-08-20): pkg/vpc/vpc_ip_resource_limit.go, the network
               interfaces the CNI attaches on the default network card (ENILimit) and the IPv4 addresses of each
               (IPv4Limit); README "WARM_ENI_TARGET" (default 1, which the platform keeps): ipamd keeps one whole free
               interface, with all its addresses, beyond those its pods use
- [FSX-QUOTA]  FSx for Lustre User Guide, "Quotas" (awsdocs/amazon-fsx-lustre-user-guide doc_source/limits.md,
               commit 15843f70): "Total storage for all file systems", 100,800 GiB by default in us-east-1,
               us-east-2 and us-west-2, raised by AWS Support "up to petabytes"; no per-file-system maximum is stated
- [INSTANCE-STORE] EC2 User Guide "Instance store volume limits for EC2 instances" (InstanceStorage.md,
               awsdocs commit e3707c43): trn1.2xlarge 1 x 474 GB NVMe SSD, trn1.32xlarge and trn1n.32xlarge
               4 x 1900 GB; trn2.48xlarge 4 x 1900 GB NVMe SSD (EC2 DescribeInstanceTypes InstanceStorageInfo, as
               getmoto/moto records it in moto/ec2/resources/instance_types.json, commit 34d6cad5a, 2026-08-02; its
               7600 GB total is also karpenter-provider-aws v1.14.1 instance-types.md's instance-local-nvme)
- [STEP-RATE]  aws-neuron/aws-neuron-eks-samples dp_bert_hf_pretrain README: the reference tutorial's BERT-large on two
               trn1.32xlarge, 64 workers at batch 16 and 32 micro-batches, bf16, logged 6449.36 sequences/s, the
               lowest of its samples; data parallel, each worker's step is its own batch at a 64th of that rate. No
               other pairing of a workload and a type has a sourced rate
- [FLOOR]      Not AWS's: an engineering choice (the comment above INSTANCE_TYPES), the acceptance checks' floor of a
               type's EFA line rate (network_bandwidth_gbps)

Left out, with the reason: trn2u.48xlarge (four of them, joined by NeuronLink, make a Trn2 UltraServer; Neuron
trn2-arch) is sold as UltraServer Capacity Blocks only, and neither the VPC CNI's limits nor the EKS AMI's
instance-info.jsonl (amazon-eks-ami commit 81fec2e8) list it, so its pods and subnet addresses cannot be counted;
placing a job's ranks in one UltraServer needs the Neuron device plugin's ultraserver-server-id labels and an init
script (aws-neuron-sdk deploy/eks/ultraserver.rst), and the Neuron UltraServer Operator supports Trn3 UltraServers
only (deploy/eks/ultraserver-operator.rst: "What instance types are supported? Trn3pds UltraServer instance types").
trn2.3xlarge (one Trainium2 device, 12 vCPU, 128 GiB, one 50 Gbps network card with one EFA interface, 1 x 470 GB
NVMe: DescribeInstanceTypes in moto's copy above; 30 pods in the EKS AMI's instance-info.jsonl) is offered in none of
the three regions the platform supports [OFFERINGS] and is not sold in Capacity Blocks there [CAPACITY-BLOCKS], and
no on-demand price is recorded for it [PRICE]: there is nowhere to validate or price a group of it. Trn3: no AWS
documentation names a launchable instance type (the names appear only in the Neuron driver's source).

AZ offerings change as AWS adds capacity. The table is the offline truth used for validation and
previews; at deploy time the network component confirms the offering with
``ec2:DescribeInstanceTypeOfferings`` (location type ``availability-zone-id``), which is authoritative.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from trainium_eks.hardware import InstanceType, StepRate

PRICE_SOURCE = (
    "EC2 on-demand Linux list prices of us-east-1 (karpenter-provider-aws pricing table, 2026-07-20), used for every region"
)

HOURS_PER_MONTH = 730  # AWS's convention for monthly estimates

#: The account's FSx for Lustre storage (all file systems of a region) without a quota increase [FSX-QUOTA].
FSX_LUSTRE_STORAGE_QUOTA_GIB: Mapping[str, int] = MappingProxyType(
    {"us-east-1": 100_800, "us-east-2": 100_800, "us-west-2": 100_800}
)


def _frozen(mapping: dict) -> Mapping:
    return MappingProxyType(mapping)


# All AZ IDs of the regions the platform supports (used to validate that an AZ ID belongs to the region
# and, offline, to answer ``ec2:DescribeAvailabilityZones``). Source: the AZ-ID pages of each region.
REGIONS: Mapping[str, tuple[str, ...]] = _frozen(
    {
        "us-east-1": ("use1-az1", "use1-az2", "use1-az3", "use1-az4", "use1-az5", "use1-az6"),
        "us-east-2": ("use2-az1", "use2-az2", "use2-az3"),
        "us-west-2": ("usw2-az1", "usw2-az2", "usw2-az3", "usw2-az4"),
    }
)

# Trn1 and Trn1n share their offerings [AZ].
TRN1_AZ_IDS: Mapping[str, tuple[str, ...]] = _frozen(
    {"us-east-1": ("use1-az6",), "us-west-2": ("usw2-az4",), "us-east-2": ("use2-az3",)}
)

# [FLOOR] The EFA line rate of each type is its network_bandwidth_gbps: 800 Gbps for trn1.32xlarge and 1,600 for
# trn1n.32xlarge (aws-neuron-sdk about-neuron/arch/neuron-hardware/trn1-arch.rst, "EFA bandwidth (Gbps)"), 3,200
# (16 x 200) for trn2.48xlarge (trn2-arch.rst "EFAv3 bandwidth (Gbps)"; neuron-runtime/about/collectives.rst). AWS
# publishes no expected all-reduce bus bandwidth per instance type, so acceptance_bus_bandwidth_fraction, the fraction
# of that line rate which the two-node all-reduce bus bandwidth (nccom-test's busbw, the peak over its message sizes;
# collective-bandwidth's on the native backend) must reach, is chosen to sit
# - above what a single EFA interface could carry even at an all-reduce's full bus-bandwidth factor 2(r-1)/r
#   (about 2 x one interface's share: 24.6 % of trn1.32xlarge's line rate, 12.3 % of trn1n's, 12.4 % of trn2's),
#   so a node whose traffic falls back to one interface, or off EFA to TCP, fails; and
# - below the only published figure, the nccom-test guide's two-instance, 64-rank example (47.09 GiB/s at 1 GiB,
#   which the guide says is not current performance data): 50.6 % of 800 Gbps, or 25.3 % of 1,600 Gbps were it a
#   trn1n. trn2 has no published figure; it takes trn1n's floor.
# Tighten a floor once a healthy cluster of the type has been measured.
INSTANCE_TYPES: Mapping[str, InstanceType] = _frozen(
    {
        it.name: it
        for it in (
            InstanceType(
                name="trn1.2xlarge",
                family="trainium",
                vcpus=8,
                memory_gib=32,
                generation="trn1",
                neuron_devices=1,
                physical_neuron_cores=2,
                accelerator_memory_gib=32,
                network_cards=1,
                max_efa_interfaces=0,
                network_bandwidth_gbps=12.5,  # "up to"
                max_pods=58,
                cni_interfaces=4,
                ipv4_per_interface=15,
                instance_store_disks=1,
                instance_store_disk_gb=474,
                on_demand_usd_per_hour=_frozen({"us-east-1": 1.34375}),
                az_ids=TRN1_AZ_IDS,
                offered_az_ids=_frozen(
                    {"us-east-1": ("use1-az5", "use1-az6"), "us-east-2": ("use2-az3",), "us-west-2": ("usw2-az1", "usw2-az4")}
                ),
            ),
            InstanceType(
                name="trn1.32xlarge",
                family="trainium",
                vcpus=128,
                memory_gib=512,
                generation="trn1",
                neuron_devices=16,
                physical_neuron_cores=32,
                accelerator_memory_gib=512,
                network_cards=8,
                max_efa_interfaces=8,
                efa_only_interfaces=True,
                network_bandwidth_gbps=800.0,
                max_pods=247,
                cni_interfaces=5,
                ipv4_per_interface=50,
                instance_store_disks=4,
                instance_store_disk_gb=1900,
                on_demand_usd_per_hour=_frozen({"us-east-1": 21.50}),
                az_ids=TRN1_AZ_IDS,
                offered_az_ids=_frozen(
                    {
                        "us-east-1": ("use1-az4", "use1-az5", "use1-az6"),
                        "us-east-2": ("use2-az3",),
                        "us-west-2": ("usw2-az1", "usw2-az4"),
                    }
                ),
                capacity_block_regions=("us-east-1",),
                acceptance_bus_bandwidth_fraction=0.30,
                step_rates=(StepRate("bert", "large", 6449.36 / 64, source="[STEP-RATE] dp_bert_hf_pretrain README"),),
            ),
            InstanceType(
                name="trn1n.32xlarge",
                family="trainium",
                vcpus=128,
                memory_gib=512,
                generation="trn1",
                neuron_devices=16,
                physical_neuron_cores=32,
                accelerator_memory_gib=512,
                network_cards=16,
                max_efa_interfaces=16,
                efa_only_interfaces=True,
                network_bandwidth_gbps=1600.0,
                max_pods=247,
                cni_interfaces=5,
                ipv4_per_interface=50,
                instance_store_disks=4,
                instance_store_disk_gb=1900,
                on_demand_usd_per_hour=_frozen({"us-east-1": 24.78}),
                az_ids=TRN1_AZ_IDS,
                offered_az_ids=TRN1_AZ_IDS,  # [OFFERINGS] lists exactly these
                acceptance_bus_bandwidth_fraction=0.20,
            ),
            InstanceType(
                name="trn2.48xlarge",
                family="trainium",
                vcpus=192,
                memory_gib=2048,
                generation="trn2",
                neuron_devices=16,
                physical_neuron_cores=128,  # 64 logical cores at the default LNC=2
                accelerator_memory_gib=1536,
                network_cards=16,
                max_efa_interfaces=16,
                efa_only_interfaces=True,
                network_bandwidth_gbps=3200.0,
                max_pods=100,
                cni_interfaces=2,
                ipv4_per_interface=50,
                instance_store_disks=4,
                instance_store_disk_gb=1900,
                offered_az_ids=_frozen({"us-east-2": ("use2-az1", "use2-az2", "use2-az3")}),
                capacity_block_regions=("us-east-2",),
                acceptance_bus_bandwidth_fraction=0.20,
                # the Neuron tutorial's Qwen3-8B, whose 64 ranks are one trn2.48xlarge's NeuronCores at LNC 2
                recipes=_frozen({"torchtitan": "qwen3-8b"}),
            ),
            # General-purpose types for the system node group (CoreDNS, controllers, etcd, TensorBoard).
            InstanceType(
                name="m6i.large",
                family="general",
                vcpus=2,
                memory_gib=8,
                network_bandwidth_gbps=12.5,
                max_pods=29,
                cni_interfaces=3,
                ipv4_per_interface=10,
                on_demand_usd_per_hour=_frozen({"us-east-1": 0.096}),
            ),
            InstanceType(
                name="m6i.xlarge",
                family="general",
                vcpus=4,
                memory_gib=16,
                network_bandwidth_gbps=12.5,
                max_pods=58,
                cni_interfaces=4,
                ipv4_per_interface=15,
                on_demand_usd_per_hour=_frozen({"us-east-1": 0.192}),
            ),
            InstanceType(
                name="m6i.2xlarge",
                family="general",
                vcpus=8,
                memory_gib=32,
                network_bandwidth_gbps=12.5,
                max_pods=58,
                cni_interfaces=4,
                ipv4_per_interface=15,
                on_demand_usd_per_hour=_frozen({"us-east-1": 0.384}),
            ),
        )
    }
)

TRAINIUM_TYPES: tuple[str, ...] = tuple(n for n, it in INSTANCE_TYPES.items() if it.is_trainium)
GENERAL_TYPES: tuple[str, ...] = tuple(n for n, it in INSTANCE_TYPES.items() if not it.is_trainium)


def az_ids_offering(instance_type: str, region: str) -> tuple[str, ...]:
    return INSTANCE_TYPES[instance_type].az_ids.get(region, ())
