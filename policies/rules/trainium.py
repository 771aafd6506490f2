"""Shared reading of the graph for Trainium rules: node groups, their instance types, subnets, AZs and taints."""

from __future__ import annotations

from dataclasses import dataclass

from trainium_eks import catalog, tokens
from trainium_eks.graph import Graph, Node, dig, is_unknown, known

NODE_GROUP = tokens.EKS_NODE_GROUP
LAUNCH_TEMPLATE = tokens.EC2_LAUNCH_TEMPLATE
SUBNET = tokens.EC2_SUBNET
SECURITY_GROUP = tokens.EC2_SECURITY_GROUP
PLACEMENT_GROUP = tokens.EC2_PLACEMENT_GROUP


@dataclass(frozen=True)
class TrainiumGroup:
    node: Node
    spec: catalog.InstanceType
    launch_template: Node | None

    @property
    def max_size(self) -> int | None:
        value = dig(self.node.props, "scalingConfig", "maxSize")
        return None if value is None or is_unknown(value) else int(value)

    @property
    def desired_size(self) -> int | None:
        value = dig(self.node.props, "scalingConfig", "desiredSize")
        return None if value is None or is_unknown(value) else int(value)

    def subnets(self) -> list[Node]:
        return self.node.linked("subnetIds", SUBNET)

    def az_ids(self) -> set[str]:
        """The AZ IDs of the node group's subnets that the graph can tell (preview included)."""
        return {az for az in (subnet_az_id(s) for s in self.subnets()) if az}

    def taints(self) -> list[dict]:
        taints = self.node.props.get("taints") or []
        return [t for t in taints if known(t)] if isinstance(taints, list) else []


def subnet_az_id(subnet: Node) -> str | None:
    value = subnet.props.get("availabilityZoneId")
    return value if isinstance(value, str) and not is_unknown(value) else None


def instance_type_of(node_group: Node, launch_template: Node | None) -> str | None:
    types = node_group.props.get("instanceTypes")
    if isinstance(types, list) and types and isinstance(types[0], str) and not is_unknown(types[0]):
        return types[0]
    if launch_template is not None:
        value = launch_template.props.get("instanceType")
        if isinstance(value, str) and not is_unknown(value):
            return value
    return None


def trainium_groups(graph: Graph) -> list[TrainiumGroup]:
    groups = []
    for node in graph.of_type(NODE_GROUP):
        templates = node.linked("launchTemplate", LAUNCH_TEMPLATE)
        template = templates[0] if templates else None
        instance_type = instance_type_of(node, template)
        spec = catalog.INSTANCE_TYPES.get(instance_type or "")
        if spec is not None and spec.is_trainium:
            groups.append(TrainiumGroup(node, spec, template))
    return groups


def tolerates(tolerations, taint: dict) -> bool:
    """Kubernetes toleration matching, for a taint in the EKS API spelling (NO_SCHEDULE) or Kubernetes' own."""
    effect = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}.get(
        taint.get("effect"), taint.get("effect")
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
