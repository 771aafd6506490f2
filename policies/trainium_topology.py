"""Pack trainium-topology: what distributed training on Trainium needs, for managed groups and elastic pools alike."""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, Severity

from policies.adapters import resource_policy, stack_policy
from policies.pack import Pack
from policies.rules import images, node_storage, node_versions, repair, scheduling, system_pods, teams, topology, trainium_nodes

TRAINIUM_TOPOLOGY = Pack(
    name="trainium-topology",
    description="What distributed training on Trainium needs: one AZ, EFA on every network card, cluster placement, "
    "the Neuron AMI at a release each group pins, with a driver the runtime of its training stack runs on, a training "
    "stack of its generation on every group, node groups at a stated Kubernetes version, images pulled onto the "
    "instance store, the Neuron taint, elastic pools that keep busy nodes, device plugins, FSx next to the nodes, "
    "queues within capacity, etcd with the v2 API, failed nodes repaired, and system pods that fit the system nodes.",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=(
        stack_policy(
            "trainium-node-group-single-az",
            "Trainium node groups stay in exactly one AZ.",
            Severity.HIGH,
            topology.node_group_single_az,
        ),
        stack_policy(
            "trainium-efa-interface-per-network-card",
            "Trainium launch templates attach one EFA per network card in the catalog's EC2-recommended layout.",
            Severity.HIGH,
            topology.efa_interface_per_network_card,
        ),
        stack_policy(
            "trainium-cluster-placement-group",
            "Multi-node EFA Trainium groups launch in a cluster placement group.",
            Severity.HIGH,
            topology.cluster_placement_group,
        ),
        stack_policy(
            "trainium-neuron-ami",
            "Trainium nodes run the EKS-optimised Neuron AMI (an elastic pool: the AL2023 alias Karpenter resolves to it).",
            Severity.HIGH,
            trainium_nodes.neuron_ami,
        ),
        stack_policy(
            "trainium-node-image-pinned",
            "Every Trainium group pins an EKS node image release of its own, never the day's latest.",
            Severity.HIGH,
            trainium_nodes.node_image_pinned,
        ),
        stack_policy(
            "node-group-version-explicit",
            "Managed node groups state their Kubernetes version, no newer than the control plane's, and pin a release "
            "built for it.",
            Severity.HIGH,
            node_versions.node_group_version_explicit,
        ),
        stack_policy(
            "trainium-neuron-driver-compatible",
            "Each Trainium group boots a node image whose Neuron driver the runtime of its own training stack initialises on.",
            Severity.CRITICAL,
            trainium_nodes.neuron_driver_compatible,
        ),
        stack_policy(
            "trainium-training-stack-fits-generation",
            "Each Trainium group's nodes are labelled with a training stack that trains their Trainium generation.",
            Severity.HIGH,
            trainium_nodes.training_stack_fits_generation,
        ),
        stack_policy(
            "trainium-instance-store-raid0",
            "Trainium nodes with NVMe instance store keep containerd and the kubelet on it as one RAID0 array.",
            Severity.MEDIUM,
            node_storage.instance_store_raid0,
        ),
        stack_policy(
            "trainium-neuron-taint",
            "Trainium nodes carry the Neuron taint, so only Neuron workloads land on them.",
            Severity.HIGH,
            trainium_nodes.neuron_taint,
        ),
        stack_policy(
            "trainium-pool-keeps-busy-nodes",
            "Elastic Trainium pools remove only empty nodes and never expire or force-drain a node mid-job.",
            Severity.HIGH,
            trainium_nodes.pool_keeps_busy_nodes,
        ),
        stack_policy(
            "efa-security-group-self-traffic",
            "EFA interfaces carry a security group open to itself both ways.",
            Severity.HIGH,
            topology.efa_security_group_self_traffic,
        ),
        stack_policy(
            "trainium-az-offers-instance-type",
            "The Trainium AZ offers the node group's instance type.",
            Severity.HIGH,
            topology.az_offers_instance_type,
        ),
        stack_policy(
            "fsx-lustre-in-trainium-az",
            "FSx for Lustre sits in the Trainium nodes' AZ.",
            Severity.MEDIUM,
            topology.fsx_in_trainium_az,
        ),
        stack_policy(
            "fsx-lustre-ports-reachable",
            "FSx for Lustre is reachable on TCP 988 and 1018-1023.",
            Severity.HIGH,
            topology.fsx_lustre_ports,
        ),
        stack_policy(
            "neuron-and-efa-device-plugins",
            "Neuron and EFA device plugins exist and tolerate the Trainium taint.",
            Severity.HIGH,
            topology.device_plugins_present,
        ),
        stack_policy(
            "eks-images-from-stack-region",
            "EKS-published images (the EFA device plugin's) are pulled from the stack's own region.",
            Severity.MEDIUM,
            images.eks_images_from_stack_region,
        ),
        stack_policy(
            "volcano-queue-within-capacity",
            "A Volcano queue exists and asks for no more than is provisioned.",
            Severity.MEDIUM,
            scheduling.volcano_queue_within_capacity,
        ),
        stack_policy(
            "team-quotas-within-capacity",
            "Every team namespace has a Neuron quota, and the teams' quotas together fit the provisioned capacity.",
            Severity.HIGH,
            teams.team_quotas_within_capacity,
        ),
        stack_policy(
            "team-quotas-hold-a-node",
            "Each team's quota and queue hold one whole node of every Trainium group on every Neuron and EFA resource.",
            Severity.HIGH,
            teams.team_quotas_hold_a_node,
        ),
        resource_policy(
            "etcd-pinned-with-v2-api",
            "etcd for rendezvous is a pinned 3.5 release with the v2 API on.",
            Severity.MEDIUM,
            scheduling.etcd_pinned_with_v2_api,
            scheduling.WORKLOAD_TYPES,
        ),
        stack_policy(
            "capacity-reservation-in-trainium-az",
            "Capacity reservations are in the Trainium AZ.",
            Severity.HIGH,
            topology.capacity_reservation_in_trainium_az,
        ),
        stack_policy(
            "trainium-node-auto-repair",
            "Trainium node groups repair failed nodes where required, with the node monitoring agent to see Neuron faults.",
            Severity.HIGH,
            repair.trainium_node_auto_repair,
            config={"requireNodeRepair": {"type": "boolean", "default": False}},
        ),
        stack_policy(
            "system-pods-fit-system-nodes",
            "The system pods' requests (replicas, one-per-node anti-affinity, DaemonSets) fit the system node group at "
            "its minimum size.",
            Severity.HIGH,
            system_pods.system_pods_fit,
        ),
    ),
)
