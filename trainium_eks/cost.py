"""Cost estimate of a stack from its resource graph: one implementation for `preflight` and the cost-guard pack.

Hourly on-demand list prices from the hardware catalog, for what dominates a training platform's bill:
Trainium and system nodes (desired count x instance price), their EBS root volumes, the EKS control plane,
NAT gateways (hours and public IPv4; data processing is usage-based and left out) and FSx for Lustre storage.
Data transfer, CloudWatch logs, backups, ECR storage and KMS requests are usage-based and not estimated.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainium_eks import catalog, tokens, versions
from trainium_eks.graph import Graph, Node, dig, is_unknown

NODE_GROUP = tokens.EKS_NODE_GROUP
LAUNCH_TEMPLATE = tokens.EC2_LAUNCH_TEMPLATE
EKS_COMPONENT = tokens.EKS_COMPONENT_CLUSTER
EKS_CLUSTER = tokens.EKS_CLUSTER
NAT_GATEWAY = tokens.EC2_NAT_GATEWAY
FSX = tokens.FSX_LUSTRE_FILE_SYSTEM
EKS_DEFAULT_DISK_GIB = 20  # EKS's root volume when neither the node group nor its launch template sets one


@dataclass(frozen=True)
class CostLine:
    urn: str
    description: str
    hourly_usd: float


@dataclass(frozen=True)
class CostEstimate:
    lines: tuple[CostLine, ...]

    @property
    def hourly_usd(self) -> float:
        return round(sum(line.hourly_usd for line in self.lines), 4)

    @property
    def monthly_usd(self) -> float:
        return round(self.hourly_usd * catalog.HOURS_PER_MONTH, 2)

    def to_json(self) -> dict:
        return {
            "hourlyUsd": self.hourly_usd,
            "monthlyUsd": self.monthly_usd,
            "priceSource": catalog.PRICE_SOURCE,
            "lines": [{"urn": c.urn, "description": c.description, "hourlyUsd": round(c.hourly_usd, 4)} for c in self.lines],
        }


def _number(value) -> float | None:
    return None if value is None or is_unknown(value) else float(value)


def _node_group(node: Node, region: str) -> list[CostLine]:
    templates = node.linked("launchTemplate", LAUNCH_TEMPLATE)
    types = node.props.get("instanceTypes") or []
    instance_type = types[0] if isinstance(types, list) and types and not is_unknown(types[0]) else None
    if instance_type is None and templates:
        instance_type = templates[0].props.get("instanceType")
    spec = catalog.INSTANCE_TYPES.get(instance_type or "")
    desired = _number(dig(node.props, "scalingConfig", "desiredSize"))
    if spec is None or desired is None:
        return []
    disk = _number(dig(templates[0].props, "blockDeviceMappings", 0, "ebs", "volumeSize")) if templates else None
    disk = disk or _number(node.props.get("diskSize")) or EKS_DEFAULT_DISK_GIB
    count = int(desired)
    return [
        CostLine(node.urn, f"{count} x {spec.name} on demand", count * spec.price(region)),
        CostLine(
            node.urn,
            f"{count} x {int(disk)} GiB gp3 root volume",
            count * disk * catalog.EBS_GP3_USD_PER_GB_MONTH / catalog.HOURS_PER_MONTH,
        ),
    ]


def _control_plane(node: Node) -> list[CostLine]:
    version = node.props.get("version")
    extended = version in versions.EXTENDED_SUPPORT_KUBERNETES_VERSIONS
    rate = catalog.EKS_EXTENDED_SUPPORT_USD_PER_HOUR if extended else catalog.EKS_CONTROL_PLANE_USD_PER_HOUR
    support = "extended" if extended else "standard"
    return [CostLine(node.urn, f"EKS control plane (Kubernetes {version}, {support} support)", rate)]


def _file_system(node: Node) -> list[CostLine]:
    deployment = node.props.get("deploymentType")
    capacity = _number(node.props.get("storageCapacity"))
    throughput = int(_number(node.props.get("perUnitStorageThroughput")) or 0)
    price = catalog.FSX_LUSTRE_USD_PER_GB_MONTH.get((deployment, throughput))
    if capacity is None or price is None:
        return []
    tier = f", {throughput} MB/s/TiB" if throughput else ""
    return [
        CostLine(node.urn, f"FSx for Lustre {deployment}{tier}, {int(capacity)} GiB", capacity * price / catalog.HOURS_PER_MONTH)
    ]


def estimate(graph: Graph, region: str) -> CostEstimate:
    lines: list[CostLine] = []
    for node in graph:
        if node.type == NODE_GROUP:
            lines += _node_group(node, node.region or region)
        elif node.type == EKS_COMPONENT or (node.type == EKS_CLUSTER and not (node.parent and node.parent.type == EKS_COMPONENT)):
            lines += _control_plane(node)
        elif node.type == NAT_GATEWAY:
            lines.append(
                CostLine(
                    node.urn,
                    "NAT gateway and its public IPv4 address",
                    catalog.NAT_GATEWAY_USD_PER_HOUR + catalog.PUBLIC_IPV4_USD_PER_HOUR,
                )
            )
        elif node.type == FSX:
            lines += _file_system(node)
    return CostEstimate(tuple(sorted(lines, key=lambda line: (-line.hourly_usd, line.urn, line.description))))
