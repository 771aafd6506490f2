"""Names that tie the parts of the platform together: node labels and taints, the shared volume's layout.

A job, a device plugin and a policy that disagree on one of these strings break silently, so every
component and test takes them from here.
"""

from __future__ import annotations

# Private subnets take the first half of the VPC CIDR in four equal blocks (up to four AZs): each is a /(VPC + 3).
PRIVATE_SUBNET_SPLIT_BITS = 3

# The platform component __main__.py creates: its name is part of every URN, the bootstrap step's included.
PLATFORM_NAME = "trainium"

# Node labels set by the node groups and used as nodeSelectors by the add-ons.
NODE_ROLE_LABEL = "trainium-eks/node-role"
SYSTEM_NODE_ROLE = "system"
TRAINIUM_NODE_ROLE = "trainium"
NODE_GROUP_LABEL = "trainium-eks/node-group"
# A Trainium node's training stack (trainium_eks/versions.py TRAINING_STACKS): what the driver policy checks its node
# image against, and what a job's image must match.
TRAINING_STACK_LABEL = "trainium-eks/training-stack"
EFA_PRESENT_LABEL = "vpc.amazonaws.com/efa.present"

# Trainium nodes carry this taint so that only pods asking for Neuron devices land on them.
NEURON_TAINT_KEY = "aws.amazon.com/neuron"
NEURON_TAINT_VALUE = "true"
NEURON_TAINT_EFFECT_EKS = "NO_SCHEDULE"  # the EKS API spelling
NEURON_TAINT_EFFECT_K8S = "NoSchedule"  # the Kubernetes spelling, for tolerations

# Launch templates (as tags) and EC2NodeClasses (as annotations) that target a capacity reservation carry its AZ ID,
# its instance count and, for a Capacity Block, its price per instance-hour, so policies and the cost estimate can
# read them from the resource graph.
CAPACITY_RESERVATION_AZ_TAG = "trainium-eks/capacity-reservation-az-id"
CAPACITY_RESERVATION_INSTANCES_TAG = "trainium-eks/capacity-reservation-instances"
CAPACITY_BLOCK_HOURLY_USD_TAG = "trainium-eks/capacity-block-usd-per-hour"
# No source bounds a Capacity Block's price per instance-hour; this bound, about 40 times the highest on-demand rate the
# catalog records (trn1n.32xlarge, 24.78 USD/h), catches the block's upfront total typed as its hourly rate and keeps
# the cost estimate's sums finite (1e308 would print "inf USD").
MAX_BLOCK_USD_PER_INSTANCE_HOUR = 1000
# A Capacity Block carrying this tag, valued capacity_block_tag_value(cluster, group), is selected by that group's
# EC2NodeClass (README "Capacity Blocks"): a block bought later joins the group by a tag, with no stack edit.
CAPACITY_BLOCK_GROUP_TAG = "trainium-eks/capacity-block-group"


def capacity_block_tag_value(cluster_name: str, group: str) -> str:
    """The CAPACITY_BLOCK_GROUP_TAG value that makes a block serve node group `group` of cluster `cluster_name`."""
    return f"{cluster_name}/{group}"


# Extended resources advertised by the device plugins.
NEURON_DEVICE_RESOURCE = "aws.amazon.com/neuron"
NEURON_CORE_RESOURCE = "aws.amazon.com/neuroncore"
EFA_RESOURCE = "vpc.amazonaws.com/efa"


# Volcano's scheduler (the pods of its Jobs name it), and the pod annotation naming the queue of the PodGroup that
# Volcano's podgroup controller creates for a pod on that scheduler outside a Volcano Job (Volcano
# pkg/controllers/podgroup/pg_controller_handler.go, buildPodGroupFromPod).
VOLCANO_SCHEDULER = "volcano"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def neuron_toleration() -> dict:
    """The toleration matching the Trainium taint (Kubernetes wire form)."""
    return {"key": NEURON_TAINT_KEY, "operator": "Exists", "effect": NEURON_TAINT_EFFECT_K8S}


# Shared FSx for Lustre volume, mounted at the same path in every pod that uses it.
FSX_MOUNT_PATH = "/data"
DATASETS_DIR = f"{FSX_MOUNT_PATH}/datasets"
CHECKPOINTS_DIR = f"{FSX_MOUNT_PATH}/checkpoints"
NEURON_COMPILE_CACHE_DIR = f"{FSX_MOUNT_PATH}/neuron-compile-cache"
TENSORBOARD_LOG_DIR = f"{FSX_MOUNT_PATH}/tensorboard"
# Where the data repository association exposes the S3 bucket inside the file system.
DATA_REPOSITORY_DIR = "/datasets-repo"

# A team's workspace: its namespace and Volcano queue are named after it (both prefixed, so that no team name can take
# a platform or system namespace, or a platform queue), and its volume is its own directory of the file system.
TEAM_LABEL = "trainium-eks/team"
# A team namespace's annotation ``<this><group>``: the team's whole nodes of that Trainium group, floor(neuronShare x
# maxSize), as a whole number. The platform writes it (components/teams.py), the admission policies bound the team's
# pods on the group by it (components/team_admission.py) and team-quotas-within-capacity adds it up.
TEAM_GROUP_NODES_ANNOTATION = "trainium-eks/nodes."
TEAM_PREFIX = "team-"
TEAMS_DIR = "/teams"


def team_namespace(team: str) -> str:
    return f"{TEAM_PREFIX}{team}"


def team_directory(team: str) -> str:
    """The team's directory on the file system (what its volume mounts as its root)."""
    return f"{TEAMS_DIR}/{team}"


def team_group(team: str) -> str:
    """The Kubernetes group a team's access entries carry, bound to the team's Role in its namespace."""
    return f"trainium-eks:{TEAM_PREFIX}{team}"


ETCD_CLIENT_PORT = 2379
TENSORBOARD_PORT = 6006
