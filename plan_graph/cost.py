"""Cost estimate of a stack from its resource graph: one implementation for `preflight` and the cost-guard pack.

Hourly on-demand list prices from the hardware catalog, for what dominates a training platform's bill:
Trainium and system nodes, their EBS root volumes, the EKS control plane, NAT gateways (hours and public IPv4; data
processing is usage-based and left out), interface VPC endpoints (per AZ-hour) and FSx for Lustre storage. Data
transfer, CloudWatch logs, backups, ECR storage and KMS requests are usage-based and not estimated.

Two monthly figures of what the stack runs: **busy**, every elastic (Karpenter) pool at maxSize, and **idle**, no job
waiting, when an elastic pool runs no node. A managed node group runs its desired size either way. An On-Demand
Capacity Reservation is billed at the on-demand rate for its instances whether they run or not, for as long as it
exists (EC2 User Guide, "Billing for Capacity Reservations"), so it is in both. A Capacity Block is not a running cost
of the stack: it is bought outside it for a window and paid up front at the price it was bought for (EC2 User Guide,
"Capacity Blocks pricing and billing"), which the stack config states because AWS sets it by supply and demand; it is
reported apart (``prepaid``), in neither figure, as the hourly rate of one block's window. Every block tagged for a
group is a purchase of its own with its own upfront fee (EC2 DescribeCapacityBlockOfferings ``upfrontFee``), unknown
to the stack, so the line says so rather than guess how many there will be. A type the catalog knows no on-demand
price for (trn2.48xlarge, sold in Capacity Blocks only) outside a reservation is a line that says so, counted as 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from plan_graph.graph import Graph, Node, dig, number, vpc_endpoint_service
from plan_graph.trainium_groups import TrainiumGroup, trainium_groups
from trainium_eks import catalog, hardware, layout, service_prices, tokens, versions
from trainium_eks.quantities import quantity

NODE_GROUP = tokens.EKS_NODE_GROUP
LAUNCH_TEMPLATE = tokens.EC2_LAUNCH_TEMPLATE
EKS_COMPONENT = tokens.EKS_COMPONENT_CLUSTER
EKS_CLUSTER = tokens.EKS_CLUSTER
NAT_GATEWAY = tokens.EC2_NAT_GATEWAY
FSX = tokens.FSX_LUSTRE_FILE_SYSTEM
VPC_ENDPOINT = tokens.EC2_VPC_ENDPOINT
EKS_DEFAULT_DISK_GIB = 20  # EKS's root volume when neither the node group nor its launch template sets one


@dataclass(frozen=True)
class CostLine:
    urn: str
    description: str
    hourly_usd: float  # busy
    idle_hourly_usd: float | None = None  # None: the same when idle
    priced: bool = True  # False: no price known, counted as 0 (the description says why)

    @property
    def idle(self) -> float:
        return self.hourly_usd if self.idle_hourly_usd is None else self.idle_hourly_usd

    def to_json(self) -> dict:
        return {
            "urn": self.urn,
            "description": self.description,
            "hourlyUsd": round(self.hourly_usd, 4),
            "idleHourlyUsd": round(self.idle, 4),
            "priced": self.priced,
        }


@dataclass(frozen=True)
class PrepaidBlock:
    """A Capacity Block a Trainium group runs in: bought outside the stack and paid up front for its window, so in
    neither monthly figure; its rate per hour of the window, as the stack config states it."""

    urn: str
    reservation: str | None
    instances: int
    instance_type: str
    instance_hourly_usd: float
    # The group's layout.CAPACITY_BLOCK_GROUP_TAG value when it also selects blocks by tag (None: by ID alone).
    tag_value: str | None = None

    @property
    def hourly_usd(self) -> float:
        return self.instances * self.instance_hourly_usd

    @property
    def description(self) -> str:
        block = f"Capacity Block {self.reservation}" if self.reservation else "Capacity Block"
        further = (
            f"; each further block tagged {layout.CAPACITY_BLOCK_GROUP_TAG}={self.tag_value} is bought and paid for on "
            "its own, at its own price"
            if self.tag_value
            else ""
        )
        return (
            f"{self.instances} x {self.instance_type} in {block} at {self.instance_hourly_usd:g} USD/h each, paid up "
            f"front for the block's window, bought outside the stack{further}"
        )

    def to_json(self) -> dict:
        return {
            "urn": self.urn,
            "description": self.description,
            "reservation": self.reservation,
            "instances": self.instances,
            "instanceType": self.instance_type,
            "instanceHourlyUsd": self.instance_hourly_usd,
            "hourlyUsd": round(self.hourly_usd, 4),
        }


@dataclass(frozen=True)
class CostEstimate:
    lines: tuple[CostLine, ...]  # what the stack runs: the monthly figures
    prepaid: tuple[PrepaidBlock, ...] = ()  # Capacity Blocks: paid up front, outside the monthly figures

    @property
    def hourly_usd(self) -> float:
        return round(sum(line.hourly_usd for line in self.lines), 4)

    @property
    def monthly_usd(self) -> float:
        return round(self.hourly_usd * catalog.HOURS_PER_MONTH, 2)

    @property
    def idle_hourly_usd(self) -> float:
        return round(sum(line.idle for line in self.lines), 4)

    @property
    def idle_monthly_usd(self) -> float:
        return round(self.idle_hourly_usd * catalog.HOURS_PER_MONTH, 2)

    def to_json(self) -> dict:
        return {
            "hourlyUsd": self.hourly_usd,
            "monthlyUsd": self.monthly_usd,
            "idleHourlyUsd": self.idle_hourly_usd,
            "idleMonthlyUsd": self.idle_monthly_usd,
            "priceSource": catalog.PRICE_SOURCE,
            "lines": [line.to_json() for line in self.lines],
            "prepaid": [block.to_json() for block in self.prepaid],
        }


def _volume_line(urn: str, busy: int, idle: int, disk: float) -> CostLine:
    per_node = disk * service_prices.EBS_GP3_USD_PER_GB_MONTH / catalog.HOURS_PER_MONTH
    return CostLine(urn, f"{busy} x {int(disk)} GiB gp3 root volume", busy * per_node, idle * per_node)


def _on_demand(urn: str, spec: hardware.InstanceType, region: str, busy: int, idle: int, what: str) -> CostLine:
    """``busy`` instances of ``spec`` (``idle`` when no job waits) at its on-demand price, described as ``what``; when
    the catalog knows no such price, a line that says so, counted as 0."""
    price = spec.price(region)
    if price is None:
        unknown = (
            f"{what}: not counted, no on-demand price known for {spec.name} (run it in a Capacity Block: capacityReservation)"
        )
        return CostLine(urn, unknown, 0.0, 0.0, priced=False)
    return CostLine(urn, what, busy * price, idle * price)


def _system_node_group(node: Node, region: str) -> list[CostLine]:
    templates = node.linked("launchTemplate", LAUNCH_TEMPLATE)
    types = node.props.get("instanceTypes") or []
    spec = catalog.INSTANCE_TYPES.get(types[0] if isinstance(types, list) and types and isinstance(types[0], str) else "")
    desired = number(dig(node.props, "scalingConfig", "desiredSize"))
    if spec is None or desired is None:
        return []
    disk = number(dig(templates[0].props, "blockDeviceMappings", 0, "ebs", "volumeSize")) if templates else None
    count = int(desired)
    return [
        _on_demand(node.urn, spec, region, count, count, f"{count} x {spec.name} on demand"),
        _volume_line(node.urn, count, count, disk or number(node.props.get("diskSize")) or EKS_DEFAULT_DISK_GIB),
    ]


def _root_volume_gib(group: TrainiumGroup) -> float:
    if group.template is None:
        return EKS_DEFAULT_DISK_GIB
    if group.elastic:
        # an EC2NodeClass volume size is a Kubernetes quantity of bytes ("200Gi", "1Ti")
        size = quantity(dig(group.template.props, "spec", "blockDeviceMappings", 0, "ebs", "volumeSize"))
        return float(size / 2**30) if size is not None and size > 0 else EKS_DEFAULT_DISK_GIB
    return number(dig(group.template.props, "blockDeviceMappings", 0, "ebs", "volumeSize")) or EKS_DEFAULT_DISK_GIB


def _selector_terms(group: TrainiumGroup) -> list[dict]:
    target = group.reservation_target()
    return [term for term in target if isinstance(term, dict)] if isinstance(target, list) else []


def _reservation_id(group: TrainiumGroup) -> str | None:
    """The reservation a group targets: a launch template's capacityReservationId, or a node class's one id term."""
    target = group.reservation_target()
    if isinstance(target, dict):
        found = target.get("capacityReservationId")
    else:
        terms = [term["id"] for term in _selector_terms(group) if "id" in term]
        found = terms[0] if len(terms) == 1 else None
    return found if isinstance(found, str) else None


def _block_tag_value(group: TrainiumGroup) -> str | None:
    """The group's Capacity Block tag value, when its node class selects blocks by the platform's tag."""
    values = [dig(term, "tags", layout.CAPACITY_BLOCK_GROUP_TAG) for term in _selector_terms(group)]
    found = [value for value in values if isinstance(value, str)]
    return found[0] if found else None


def _reservation(group: TrainiumGroup, region: str, billed: set[str]) -> CostLine | PrepaidBlock | None:
    """A reserved group's instances, paid for whether they run or not, once per reservation however many groups name
    it: an ODCR as a running cost, a Capacity Block as a prepaid one (None: the group targets no reservation)."""
    if not group.reservation_target():
        return None
    instances = number(group.reservation_fact(layout.CAPACITY_RESERVATION_INSTANCES_TAG))
    block_rate = number(group.reservation_fact(layout.CAPACITY_BLOCK_HOURLY_USD_TAG))
    if instances is None:
        return None
    count, name, reservation = int(instances), group.spec.name, _reservation_id(group)
    if reservation is not None and reservation in billed:
        return CostLine(group.node.urn, f"{count} x {name} in reservation {reservation}, paid for with the group before", 0.0)
    if reservation is not None:
        billed.add(reservation)
    if block_rate is not None and not 0 < block_rate <= layout.MAX_BLOCK_USD_PER_INSTANCE_HOUR:
        raw = group.reservation_fact(layout.CAPACITY_BLOCK_HOURLY_USD_TAG)
        return CostLine(
            group.node.urn,
            f"{count} x {name} in Capacity Block {reservation}: its {layout.CAPACITY_BLOCK_HOURLY_USD_TAG} {raw!r} is no "
            f"price (above 0, at most {layout.MAX_BLOCK_USD_PER_INSTANCE_HOUR} USD per instance-hour), not counted",
            0.0,
            priced=False,
        )
    if block_rate is not None:
        return PrepaidBlock(group.node.urn, reservation, count, name, block_rate, _block_tag_value(group))
    what = f"{count} x {name} On-Demand Capacity Reservation, used or not"
    return _on_demand(group.node.urn, group.spec, region, count, count, what)


def _trainium_group(group: TrainiumGroup, region: str, billed: set[str]) -> list[CostLine | PrepaidBlock]:
    busy, idle = (group.max_size, 0) if group.elastic else (group.desired_size, group.desired_size)
    if busy is None or idle is None:
        return []
    volumes = _volume_line(group.node.urn, busy, idle, _root_volume_gib(group))
    reserved = _reservation(group, region, billed)
    if reserved is not None:
        return [reserved, volumes]
    name = group.spec.name
    described = f"up to {busy} x {name} on demand while jobs run, none idle" if group.elastic else f"{busy} x {name} on demand"
    return [_on_demand(group.node.urn, group.spec, region, busy, idle, described), volumes]


def _control_plane(node: Node) -> list[CostLine]:
    version = node.props.get("version")
    extended = version in versions.EXTENDED_SUPPORT_KUBERNETES_VERSIONS
    rate = service_prices.EKS_EXTENDED_SUPPORT_USD_PER_HOUR if extended else service_prices.EKS_CONTROL_PLANE_USD_PER_HOUR
    support = "extended" if extended else "standard"
    return [CostLine(node.urn, f"EKS control plane (Kubernetes {version}, {support} support)", rate)]


def _file_system(node: Node) -> list[CostLine]:
    deployment = node.props.get("deploymentType")
    capacity = number(node.props.get("storageCapacity"))
    throughput = int(number(node.props.get("perUnitStorageThroughput")) or 0)
    price = service_prices.FSX_LUSTRE_USD_PER_GB_MONTH.get((deployment, throughput)) if isinstance(deployment, str) else None
    if capacity is None or price is None:
        return []
    tier = f", {throughput} MB/s/TiB" if throughput else ""
    return [
        CostLine(node.urn, f"FSx for Lustre {deployment}{tier}, {int(capacity)} GiB", capacity * price / catalog.HOURS_PER_MONTH)
    ]


def _interface_endpoint(node: Node) -> list[CostLine]:
    subnets = node.props.get("subnetIds")
    zones = len(subnets) if isinstance(subnets, list) else 1  # one subnet per AZ; unknown while previewed: at least one
    service = vpc_endpoint_service(node) or "(unknown service)"
    rate = zones * service_prices.VPC_INTERFACE_ENDPOINT_USD_PER_AZ_HOUR
    return [CostLine(node.urn, f"interface VPC endpoint {service} in {zones} AZ", rate)]


def estimate(graph: Graph, region: str) -> CostEstimate:
    lines: list[CostLine] = []
    prepaid: list[PrepaidBlock] = []
    groups = trainium_groups(graph)
    trainium = {id(g.node) for g in groups}
    billed: set[str] = set()  # reservations already priced: a second group naming one adds no charge
    for group in groups:
        for item in _trainium_group(group, group.region or region, billed):
            (prepaid if isinstance(item, PrepaidBlock) else lines).append(item)
    for node in graph:
        if node.type == NODE_GROUP and id(node) not in trainium:
            lines += _system_node_group(node, node.region or region)
        elif node.type == EKS_COMPONENT or (node.type == EKS_CLUSTER and not (node.parent and node.parent.type == EKS_COMPONENT)):
            lines += _control_plane(node)
        elif node.type == NAT_GATEWAY:
            lines.append(
                CostLine(
                    node.urn,
                    "NAT gateway and its public IPv4 address",
                    service_prices.NAT_GATEWAY_USD_PER_HOUR + service_prices.PUBLIC_IPV4_USD_PER_HOUR,
                )
            )
        elif node.type == FSX:
            lines += _file_system(node)
        elif node.type == VPC_ENDPOINT and node.props.get("vpcEndpointType") == "Interface":
            lines += _interface_endpoint(node)
    return CostEstimate(
        tuple(sorted(lines, key=lambda line: (-line.hourly_usd, line.urn, line.description))),
        tuple(sorted(prepaid, key=lambda block: (-block.hourly_usd, block.urn))),
    )
