"""The Trainium groups of a resource graph, of either kind: their instance types, sizes, subnets, AZs, interfaces,
placement, security groups, reservations and taints.

A managed group is an EKS node group and its launch template; an elastic group is a Karpenter NodePool and the
EC2NodeClass it names. The policy rules and the cost estimate read both through ``TrainiumGroup``, so one rule
covers both kinds (the same single AZ, EFA layout, placement group, AMI and taint, whichever provisions the nodes)
and one estimate prices both.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from plan_graph.graph import Graph, Node, dig, is_unknown, known, number
from trainium_eks import catalog, hardware, layout, tokens, versions
from trainium_eks.quantities import quantity

NODE_GROUP = tokens.EKS_NODE_GROUP
LAUNCH_TEMPLATE = tokens.EC2_LAUNCH_TEMPLATE
NODE_POOL = tokens.KARPENTER_NODE_POOL
NODE_CLASS = tokens.KARPENTER_NODE_CLASS
SUBNET = tokens.EC2_SUBNET
SECURITY_GROUP = tokens.EC2_SECURITY_GROUP
PLACEMENT_GROUP = tokens.EC2_PLACEMENT_GROUP
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"


def _whole(value) -> int | None:
    known_number = number(value)
    return None if known_number is None or not math.isfinite(known_number) else int(known_number)


NEURON_AMI_ALIAS_FAMILY = "al2023"
RELEASE_VERSION = re.compile(r"\A\d+\.\d+\.\d+-(\d{8})\Z", re.ASCII)  # EKS: k8s_major.k8s_minor.k8s_patch-release_date
PINNED_ALIAS = re.compile(rf"\A{NEURON_AMI_ALIAS_FAMILY}@v(\d{{8}})\Z", re.ASCII)


@dataclass(frozen=True)
class TrainiumGroup:
    node: Node  # the NodeGroup or the NodePool: what a violation about the group names
    spec: hardware.InstanceType
    template: Node | None  # the launch template or the EC2NodeClass: what a violation about the nodes' setup names

    @property
    def elastic(self) -> bool:
        return self.node.type == NODE_POOL

    # Where each kind keeps what the rules read: the node template's own inputs, and the input its links come from.
    @property
    def _template_props(self) -> dict:
        if self.template is None:
            return {}
        spec = self.template.props.get("spec")
        return (spec if isinstance(spec, dict) else {}) if self.elastic else self.template.props

    def _template_links(self, prop: str, type_: str) -> list[Node]:
        if self.template is None:
            return []
        return self.template.linked("spec" if self.elastic else prop, type_)

    def ami_aliases(self) -> list | None:
        """An elastic pool's amiSelectorTerms aliases; None while a preview does not know them."""
        terms = dig(self.template.props, "spec", "amiSelectorTerms") if self.template is not None else None
        if not known(terms):
            return None
        return [t.get("alias") for t in terms if isinstance(t, dict)] if isinstance(terms, list) else []

    def pinned_release(self) -> tuple[str | None, str] | None:
        """The amazon-eks-ami release date the group pins (None: it pins none) and how the group spells its image;
        None while a preview does not know. A managed group pins it as ``releaseVersion`` (``<kubelet>-<date>``), a
        pool as an ``al2023@v<date>`` alias."""
        if self.elastic:
            aliases = self.ami_aliases()
            if aliases is None or self.template is None:
                return None  # unknown, or no EC2NodeClass (trainium-efa-interface-per-network-card names that)
            match = PINNED_ALIAS.match(aliases[0]) if len(aliases) == 1 and isinstance(aliases[0], str) else None
            return (match.group(1) if match else None), f"alias {', '.join(map(str, aliases)) or '(none)'}"
        release = self.node.props.get("releaseVersion")
        if is_unknown(release):
            return None
        match = RELEASE_VERSION.match(release) if isinstance(release, str) else None
        return (match.group(1) if match else None), f"releaseVersion {release or 'unset (the day latest)'}"

    def labels(self) -> dict:
        """The labels the group gives its nodes (a node group's ``labels``, a pool's template labels); none while a
        preview does not know them (``labels_known``)."""
        labels = self._labels_input()
        return labels if isinstance(labels, dict) else {}

    def labels_known(self) -> bool:
        """Whether a preview knows the map of the nodes' labels (a value in it may still be unknown)."""
        return not is_unknown(self._labels_input())

    def _labels_input(self):
        where = ("spec", "template", "metadata", "labels") if self.elastic else ("labels",)
        return dig(self.node.props, *where)

    @property
    def name(self) -> str | None:
        """The platform's name of the group (its node-group label), None when unlabelled or unknown."""
        name = self.labels().get(layout.NODE_GROUP_LABEL)
        return name if isinstance(name, str) and not is_unknown(name) else None

    def training_stack(self) -> versions.TrainingStack | None:
        """The training stack the nodes are labelled with (``layout.TRAINING_STACK_LABEL``); None: none, or unknown."""
        return versions.TRAINING_STACKS.get(self.training_stack_label())

    def training_stack_label(self):
        value = self.labels().get(layout.TRAINING_STACK_LABEL)
        return value if isinstance(value, str) and not is_unknown(value) else None

    @property
    def region(self) -> str | None:
        """The region of the group's AWS resources (a NodePool is a Kubernetes object: its subnets' region)."""
        return self.node.region or next((s.region for s in self.subnets() if s.region), None)

    @property
    def max_size(self) -> int | None:
        """The most nodes the group can run: the node group's maxSize, or the pool's CPU limit in nodes."""
        if not self.elastic:
            return _whole(dig(self.node.props, "scalingConfig", "maxSize"))
        cpu = quantity(dig(self.node.props, "spec", "limits", "cpu"))  # "1280000m" is 1280 CPUs
        return None if cpu is None else max(0, math.floor(cpu / self.spec.vcpus))

    @property
    def desired_size(self) -> int | None:
        """Nodes that run whether or not anything trains: a managed group's desired size; none of an elastic pool."""
        if self.elastic:
            return 0
        return _whole(dig(self.node.props, "scalingConfig", "desiredSize"))

    def subnet_count(self) -> int | None:
        """How many subnets the group may launch into (None: unknown, or selected by something other than an ID)."""
        if self.elastic:
            terms = self._template_props.get("subnetSelectorTerms")
            if not isinstance(terms, list) or not all(isinstance(t, dict) and "id" in t and "tags" not in t for t in terms):
                return None
            return len(terms)
        subnet_ids = self.node.props.get("subnetIds")
        return len(subnet_ids) if isinstance(subnet_ids, list) else None

    def selects_subnets_by_tag(self) -> bool:
        terms = self._template_props.get("subnetSelectorTerms")
        return self.elastic and isinstance(terms, list) and any(isinstance(t, dict) and "tags" in t for t in terms)

    def subnets(self) -> list[Node]:
        return self._template_links("subnetIds", SUBNET) if self.elastic else self.node.linked("subnetIds", SUBNET)

    def az_ids(self) -> set[str]:
        """The AZ IDs the graph can tell the group's nodes land in (preview included)."""
        azs = {az for az in (subnet_az_id(s) for s in self.subnets()) if az}
        if self.elastic:
            azs |= set(requirement_values(self.node, ZONE_ID_LABEL) or ())
        return azs

    def taints(self) -> list[dict]:
        taints = dig(self.node.props, "spec", "template", "spec", "taints") if self.elastic else self.node.props.get("taints")
        return [t for t in taints if isinstance(t, dict) and known(t)] if isinstance(taints, list) else []

    def interfaces(self) -> list | None:
        """The nodes' network interfaces as listed, or None while unknown."""
        interfaces = self._template_props.get("networkInterfaces", [])
        return interfaces if isinstance(interfaces, list) else None

    def security_groups(self) -> list[Node]:
        return self._template_links("networkInterfaces", SECURITY_GROUP)

    def placement_group_name(self):
        if self.elastic:
            return dig(self._template_props, "placementGroupSelector", "name") or dig(
                self._template_props, "placementGroupSelector", "id"
            )
        return dig(self._template_props, "placement", "groupName")

    def placement_groups(self) -> list[Node]:
        return self._template_links("placement", PLACEMENT_GROUP)

    def reservation_target(self):
        if self.elastic:
            return self._template_props.get("capacityReservationSelectorTerms")
        return dig(self._template_props, "capacityReservationSpecification", "capacityReservationTarget")

    def in_capacity_block(self) -> bool:
        """Whether the group's node template records a Capacity Block's price (``layout``): its nodes run in one."""
        return self.reservation_fact(layout.CAPACITY_BLOCK_HOURLY_USD_TAG) is not None

    def reservation_fact(self, key: str):
        """What the node template records of its reservation (``layout``: AZ ID, instances, Capacity Block price)."""
        where = ("metadata", "annotations", key) if self.elastic else ("tags", key)
        return dig(self.template.props, *where) if self.template is not None else None


def subnet_az_id(subnet: Node) -> str | None:
    value = subnet.props.get("availabilityZoneId")
    return value if isinstance(value, str) and not is_unknown(value) else None


def requirement_values(node_pool: Node, key: str) -> list | None:
    """The values a NodePool's ``In`` requirement on ``key`` allows (None: no such requirement, or unknown)."""
    requirements = dig(node_pool.props, "spec", "template", "spec", "requirements")
    for requirement in requirements if isinstance(requirements, list) else []:
        if isinstance(requirement, dict) and requirement.get("key") == key and requirement.get("operator") == "In":
            values = requirement.get("values")
            return [v for v in values if isinstance(v, str)] if isinstance(values, list) and known(values) else None
    return None


def instance_type_of(node_group: Node, launch_template: Node | None) -> str | None:
    types = node_group.props.get("instanceTypes")
    if isinstance(types, list) and types and isinstance(types[0], str) and not is_unknown(types[0]):
        return types[0]
    if launch_template is not None:
        value = launch_template.props.get("instanceType")
        if isinstance(value, str) and not is_unknown(value):
            return value
    return None


def node_class_of(graph: Graph, node_pool: Node) -> Node | None:
    """The EC2NodeClass a NodePool's ``nodeClassRef`` names."""
    name = dig(node_pool.props, "spec", "template", "spec", "nodeClassRef", "name")
    return next((c for c in graph.of_type(NODE_CLASS) if dig(c.props, "metadata", "name") == name), None)


def _trainium_spec(instance_types) -> hardware.InstanceType | None:
    for instance_type in instance_types or ():
        spec = catalog.INSTANCE_TYPES.get(instance_type) if isinstance(instance_type, str) else None
        if spec is not None and spec.is_trainium:
            return spec
    return None


def trainium_groups(graph: Graph) -> list[TrainiumGroup]:
    groups = []
    for node in graph.of_type(NODE_GROUP):
        templates = node.linked("launchTemplate", LAUNCH_TEMPLATE)
        template = templates[0] if templates else None
        spec = _trainium_spec([instance_type_of(node, template)])
        if spec is not None:
            groups.append(TrainiumGroup(node, spec, template))
    for pool in graph.of_type(NODE_POOL):
        spec = _trainium_spec(requirement_values(pool, INSTANCE_TYPE_LABEL))
        if spec is not None:
            groups.append(TrainiumGroup(pool, spec, node_class_of(graph, pool)))
    return groups


def tolerates(tolerations, taint: dict) -> bool:
    """Kubernetes toleration matching, for a taint in the EKS API spelling (NO_SCHEDULE) or Kubernetes' own."""
    effect = taint.get("effect")
    effect = (
        {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}.get(effect, effect)
        if isinstance(effect, str)
        else effect
    )
    for toleration in tolerations if isinstance(tolerations, list) else []:
        if not isinstance(toleration, dict) or toleration.get("effect") not in (None, "", effect):
            continue
        operator = toleration.get("operator", "Equal")
        if operator == "Exists" and toleration.get("key") in (None, "", taint.get("key")):
            return True
        if operator == "Equal" and toleration.get("key") == taint.get("key") and toleration.get("value") == taint.get("value"):
            return True
    return False
