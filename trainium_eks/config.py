"""Stack configuration, parsed once at the edge into frozen dataclasses.

Input is the flat config map the Pulumi CLI hands a program (``"<namespace>:<key>" -> string``; structured
values JSON-encoded). Typed keys, their types and defaults are declared once, in ``Pulumi.yaml``; this module
reads those declarations, applies the defaults exactly as the CLI does, rejects unknown keys, checks types,
and then checks ranges and cross-field rules. Every error is one line: the full key, the problem, the fix.
"""

from __future__ import annotations

import difflib
import functools
import ipaddress
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml
from pulumi.errors import RunError

from . import catalog, versions

PROJECT_FILE = Path(__file__).resolve().parent.parent / "Pulumi.yaml"

# Keys whose values are lists of objects; Pulumi.yaml cannot type them, so they are declared here.
STRUCTURED_KEYS = ("trainiumNodeGroups", "volcanoQueues")
REQUIRED_STRUCTURED_KEYS = ("trainiumNodeGroups",)

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
ECR_NAME = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8,17}$")
VPC_ID = re.compile(r"^vpc-[0-9a-f]{8,17}$")
SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}$")

FSX_THROUGHPUT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
FSX_DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
# etcd needs a majority of its members: 3 survive the loss of one, 5 of two; an even count adds no tolerance.
ETCD_MEMBER_COUNTS = (1, 3, 5)
DEFAULT_ROOT_VOLUME_GIB = 500  # the tutorial's NodeVolumeSize: room for images and the local compile cache


class ConfigError(RunError):
    """A stack configuration problem. ``RunError`` makes the Pulumi CLI print it without a traceback."""

    def __init__(self, key: str, problem: str, fix: str):
        self.key, self.problem, self.fix = key, problem, fix
        super().__init__(f"{key}: {problem}; {fix}")


# --------------------------------------------------------------------------------------------------
# Dataclasses: what the components receive.


@dataclass(frozen=True)
class Scaling:
    min_size: int
    desired_size: int
    max_size: int


@dataclass(frozen=True)
class CapacityReservation:
    kind: str  # "odcr" or "capacity-block"
    reservation_id: str
    az_id: str


@dataclass(frozen=True)
class TrainiumNodeGroupConfig:
    name: str
    instance_type: str
    scaling: Scaling
    efa: bool
    root_volume_gib: int
    labels: Mapping[str, str]
    capacity_reservation: CapacityReservation | None

    @property
    def spec(self) -> catalog.InstanceType:
        return catalog.INSTANCE_TYPES[self.instance_type]

    @property
    def efa_interfaces(self) -> int:
        """EFA interfaces per node: one per network card when EFA is on."""
        return self.spec.max_efa_interfaces if self.efa else 0

    @property
    def uses_placement_group(self) -> bool:
        # A cluster placement group only pays off for EFA traffic between nodes.
        return self.efa_interfaces > 0


@dataclass(frozen=True)
class ExistingVpc:
    vpc_id: str
    private_subnet_ids: tuple[str, ...]
    trainium_subnet_id: str


@dataclass(frozen=True)
class NetworkConfig:
    vpc_cidr: str
    az_count: int
    nat_gateways: str
    trainium_az_id: str
    existing: ExistingVpc | None


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    kubernetes_version: str
    endpoint_public_access: bool
    public_access_cidrs: tuple[str, ...]
    admin_principal_arns: tuple[str, ...]
    system_instance_type: str
    system_scaling: Scaling


@dataclass(frozen=True)
class DevicePluginConfig:
    neuron_scheduler_extension: bool
    neuron_monitor: bool


@dataclass(frozen=True)
class QueueConfig:
    name: str
    weight: int
    neuron_share: float


@dataclass(frozen=True)
class SchedulingConfig:
    job_namespace: str
    queues: tuple[QueueConfig, ...]
    etcd_members: int
    etcd_storage_gib: int


@dataclass(frozen=True)
class StorageConfig:
    deployment_type: str
    capacity_gib: int
    throughput_per_tib: int
    data_repository_path: str
    claim_name: str

    @property
    def persistent(self) -> bool:
        return self.deployment_type.startswith("PERSISTENT")


@dataclass(frozen=True)
class RegistryConfig:
    repository_name: str
    keep_images: int
    untagged_expiry_days: int


@dataclass(frozen=True)
class PlatformConfig:
    project: str
    stack: str
    region: str
    environment: str
    tags: Mapping[str, str]
    network: NetworkConfig
    cluster: ClusterConfig
    trainium_node_groups: tuple[TrainiumNodeGroupConfig, ...]
    device_plugins: DevicePluginConfig
    scheduling: SchedulingConfig
    storage: StorageConfig
    registry: RegistryConfig
    tensorboard: bool
    protect_stateful: bool


# --------------------------------------------------------------------------------------------------
# Pulumi.yaml declarations and the CLI's handling of them.


@dataclass(frozen=True)
class Declaration:
    key: str
    type: str  # string | integer | boolean | array
    item_type: str | None
    default: Any
    has_default: bool
    description: str


@functools.cache
def project_declarations(project_file: Path = PROJECT_FILE) -> tuple[str, Mapping[str, Declaration]]:
    """The project name and its typed config declarations, as written in Pulumi.yaml."""
    document = yaml.safe_load(project_file.read_text())
    declarations = {}
    for key, spec in (document.get("config") or {}).items():
        declarations[key] = Declaration(
            key=key,
            type=spec["type"],
            item_type=(spec.get("items") or {}).get("type"),
            default=spec.get("default"),
            has_default="default" in spec,
            description=spec.get("description", ""),
        )
    return document["name"], MappingProxyType(declarations)


def _suggest(word: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(sorted(candidates))}"


def _decode(full_key: str, decl_type: str, item_type: str | None, raw: Any) -> Any:
    """Decode a CLI config string (or an already-decoded value) into the declared type."""
    if decl_type == "string":
        if isinstance(raw, str):
            return raw
        raise ConfigError(full_key, f"expected a string, got {json.dumps(raw)}", "quote the value in the stack file")
    if decl_type == "integer":
        if isinstance(raw, bool) or not isinstance(raw, (int, str)) or not re.fullmatch(r"-?\d+", str(raw).strip()):
            raise ConfigError(full_key, f"expected an integer, got {json.dumps(raw)}", "write a whole number")
        return int(raw)
    if decl_type == "boolean":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        raise ConfigError(full_key, f"expected a boolean, got {json.dumps(raw)}", "write true or false")
    # array (of strings here)
    value = _json(full_key, raw)
    if not isinstance(value, list):
        raise ConfigError(full_key, f"expected a list, got {json.dumps(value)}", "write a YAML list")
    return [_decode(f"{full_key}[{i}]", item_type or "string", None, item) for i, item in enumerate(value)]


def _json(full_key: str, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigError(full_key, "not valid structured data", "write it as a YAML list or mapping") from None


# --------------------------------------------------------------------------------------------------
# A reader for structured (object) values: typed getters that remember which keys were read.


class _Obj:
    def __init__(self, path: str, value: Any):
        if not isinstance(value, dict):
            raise ConfigError(path, f"expected a mapping, got {json.dumps(value)}", "write key: value pairs")
        self.path, self.value, self.read = path, value, set()

    def _get(self, key: str, default: Any, required: bool) -> Any:
        self.read.add(key)
        if key not in self.value:
            if required:
                raise ConfigError(f"{self.path}.{key}", "missing", f"add {key} to {self.path}")
            return default
        return self.value[key]

    def str(self, key: str, *, default: str | None = None, required: bool = False) -> str | None:
        value = self._get(key, default, required)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{self.path}.{key}", f"expected a string, got {json.dumps(value)}", "quote the value")
        return value

    def int(self, key: str, *, default: int | None = None, required: bool = False) -> int:
        value = self._get(key, default, required)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{self.path}.{key}", f"expected an integer, got {json.dumps(value)}", "write a whole number")
        return value

    def number(self, key: str, *, default: float) -> float:
        value = self._get(key, default, False)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{self.path}.{key}", f"expected a number, got {json.dumps(value)}", "write a number such as 0.5")
        return float(value)

    def bool(self, key: str, *, default: bool | None) -> bool | None:
        value = self._get(key, default, False)
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{self.path}.{key}", f"expected a boolean, got {json.dumps(value)}", "write true or false")
        return value

    def obj(self, key: str) -> _Obj | None:
        value = self._get(key, None, False)
        return None if value is None else _Obj(f"{self.path}.{key}", value)

    def str_map(self, key: str) -> dict[str, str]:
        value = self._get(key, {}, False)
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ConfigError(f"{self.path}.{key}", "expected a mapping of strings", 'quote every value, e.g. team: "nlp"')
        return dict(value)

    def done(self) -> None:
        unknown = sorted(set(self.value) - self.read)
        if unknown:
            raise ConfigError(f"{self.path}.{unknown[0]}", "unknown key", _suggest(unknown[0], sorted(self.read)))


def _list_of_objects(full_key: str, raw: Any) -> list[_Obj]:
    value = _json(full_key, raw)
    if not isinstance(value, list):
        raise ConfigError(full_key, f"expected a list, got {json.dumps(value)}", "write a YAML list of mappings")
    return [_Obj(f"{full_key}[{i}]", item) for i, item in enumerate(value)]


def _check(condition: bool, key: str, problem: str, fix: str) -> None:
    if not condition:
        raise ConfigError(key, problem, fix)


def _scaling(key: Callable[[str], str], min_size: int, desired: int, max_size: int) -> Scaling:
    _check(min_size >= 0, key("minSize"), f"{min_size} is negative", "use 0 or more")
    _check(max_size >= 1, key("maxSize"), f"{max_size} is below 1", "allow at least one node")
    _check(min_size <= max_size, key("minSize"), f"{min_size} is above maxSize {max_size}", "make minSize <= maxSize")
    _check(
        min_size <= desired <= max_size,
        key("desiredSize"),
        f"{desired} is outside minSize..maxSize ({min_size}..{max_size})",
        "set desiredSize between minSize and maxSize",
    )
    return Scaling(min_size, desired, max_size)


# --------------------------------------------------------------------------------------------------
# The parser.


def parse(raw_config: Mapping[str, Any], *, stack: str, project_file: Path = PROJECT_FILE) -> PlatformConfig:
    """Parse the CLI's flat config map for ``stack`` into a validated ``PlatformConfig``."""
    project, declarations = project_declarations(project_file)
    prefix = f"{project}:"
    ours = {k[len(prefix) :]: v for k, v in raw_config.items() if k.startswith(prefix)}
    known = [*declarations, *STRUCTURED_KEYS]
    for key in sorted(ours):
        if key not in known:
            raise ConfigError(prefix + key, "unknown key", _suggest(key, known))

    values: dict[str, Any] = {}
    for key, decl in declarations.items():
        if key in ours:
            values[key] = _decode(prefix + key, decl.type, decl.item_type, ours[key])
        elif decl.has_default:
            values[key] = decl.default
        else:
            raise ConfigError(prefix + key, "missing", f"run `pulumi config set {key} <value>` ({decl.description})")
    for key in REQUIRED_STRUCTURED_KEYS:
        if key not in ours:
            raise ConfigError(prefix + key, "missing", "add at least one Trainium node group (see Pulumi.yaml)")

    region = raw_config.get("aws:region")
    _check(isinstance(region, str) and bool(region), "aws:region", "missing", "run `pulumi config set aws:region us-west-2`")
    _check(
        region in catalog.REGIONS,
        "aws:region",
        f"{region} has no Trainium offerings in the hardware catalog",
        f"use one of {', '.join(catalog.REGIONS)} or add the region to trainium_eks/catalog.py",
    )

    def key(name: str) -> str:
        return prefix + name

    network = _network(values, region, key)
    node_groups = _trainium_node_groups(ours[REQUIRED_STRUCTURED_KEYS[0]], network.trainium_az_id, region, key)
    environment = values["environment"]
    _check(
        bool(DNS_LABEL.match(environment)) and len(environment) <= 16,
        key("environment"),
        f"'{environment}' is not a short DNS label",
        "use lowercase letters, digits and '-', e.g. dev",
    )
    for tag_key in ("owner", "costCenter"):
        _check(bool(values[tag_key].strip()), key(tag_key), "empty", f"set {tag_key} to the team's value")

    return PlatformConfig(
        project=project,
        stack=stack,
        region=region,
        environment=environment,
        tags=MappingProxyType(
            {
                "environment": environment,
                "owner": values["owner"],
                "cost-center": values["costCenter"],
                "managed-by": "pulumi",
                "pulumi-project": project,
                "pulumi-stack": stack,
            }
        ),
        network=network,
        cluster=_cluster(values, f"{project}-{stack}", key),
        trainium_node_groups=node_groups,
        device_plugins=DevicePluginConfig(values["neuronSchedulerExtension"], values["neuronMonitor"]),
        scheduling=_scheduling(values, ours.get("volcanoQueues"), key),
        storage=_storage(values, key),
        registry=_registry(values, stack, key),
        tensorboard=values["tensorboard"],
        protect_stateful=values["protectStatefulResources"],
    )


def _network(values: dict, region: str, key: Callable[[str], str]) -> NetworkConfig:
    az_id = values["trainiumAzId"]
    _check(
        az_id in catalog.REGIONS[region],
        key("trainiumAzId"),
        f"{az_id} is not an AZ ID of {region}",
        f"use one of {', '.join(catalog.REGIONS[region])} (AZ IDs, not names like {region}a)",
    )
    try:
        cidr = ipaddress.IPv4Network(values["vpcCidr"])
    except ValueError:
        raise ConfigError(
            key("vpcCidr"), f"'{values['vpcCidr']}' is not an IPv4 network", "use a CIDR such as 10.0.0.0/16"
        ) from None
    _check(
        16 <= cidr.prefixlen <= 20, key("vpcCidr"), f"/{cidr.prefixlen} is outside /16../20", "pick a prefix between /16 and /20"
    )
    az_count = values["availabilityZoneCount"]
    max_azs = min(4, len(catalog.REGIONS[region]))
    _check(
        2 <= az_count <= max_azs,
        key("availabilityZoneCount"),
        f"{az_count} is outside 2..{max_azs}",
        f"use 2 to {max_azs} (EKS needs two AZs)",
    )
    _check(
        values["natGateways"] in ("single", "perAz"),
        key("natGateways"),
        f"'{values['natGateways']}' is not a NAT layout",
        "use single or perAz",
    )

    existing = None
    if values["existingVpcId"]:
        vpc_id, subnets, trn_subnet = (
            values["existingVpcId"],
            values["existingPrivateSubnetIds"],
            values["existingTrainiumSubnetId"],
        )
        _check(bool(VPC_ID.match(vpc_id)), key("existingVpcId"), f"'{vpc_id}' is not a VPC ID", "use the vpc-... ID")
        _check(
            len(subnets) >= 2,
            key("existingPrivateSubnetIds"),
            "needs private subnets in at least two AZs",
            "list two or more subnet-... IDs",
        )
        for i, subnet in enumerate(subnets):
            _check(
                bool(SUBNET_ID.match(subnet)),
                f"{key('existingPrivateSubnetIds')}[{i}]",
                f"'{subnet}' is not a subnet ID",
                "use subnet-... IDs",
            )
        _check(
            trn_subnet in subnets,
            key("existingTrainiumSubnetId"),
            f"'{trn_subnet}' is not one of existingPrivateSubnetIds",
            "name the private subnet that lies in trainiumAzId",
        )
        existing = ExistingVpc(vpc_id, tuple(subnets), trn_subnet)
    else:
        for orphan in ("existingPrivateSubnetIds", "existingTrainiumSubnetId"):
            _check(not values[orphan], key(orphan), "set without existingVpcId", "set existingVpcId too, or remove it")
    return NetworkConfig(str(cidr), az_count, values["natGateways"], az_id, existing)


def _trainium_node_groups(raw: Any, az_id: str, region: str, key: Callable[[str], str]) -> tuple[TrainiumNodeGroupConfig, ...]:
    full_key = key("trainiumNodeGroups")
    items = _list_of_objects(full_key, raw)
    _check(bool(items), full_key, "empty", "add at least one Trainium node group")
    groups, names = [], set()
    for item in items:

        def at(name: str, item=item) -> str:
            return f"{item.path}.{name}"

        name = item.str("name", required=True)
        _check(
            bool(DNS_LABEL.match(name)) and len(name) <= 32,
            at("name"),
            f"'{name}' is not a DNS label of up to 32 characters",
            "use lowercase letters, digits and '-'",
        )
        _check(name not in names, at("name"), f"'{name}' is used twice", "give each node group its own name")
        names.add(name)
        instance_type = item.str("instanceType", required=True)
        _check(
            instance_type in catalog.TRAINIUM_TYPES,
            at("instanceType"),
            f"'{instance_type}' is not a Trainium type in the catalog",
            f"use one of {', '.join(catalog.TRAINIUM_TYPES)}",
        )
        spec = catalog.INSTANCE_TYPES[instance_type]
        offered = catalog.az_ids_offering(instance_type, region)
        _check(
            spec.offered_in(region, az_id),
            at("instanceType"),
            f"{instance_type} is not offered in {az_id} ({region})",
            f"set trainiumAzId to one of {', '.join(offered)}" if offered else "pick a region that offers it",
        )
        scaling = _scaling(
            at, item.int("minSize", required=True), item.int("desiredSize", required=True), item.int("maxSize", required=True)
        )
        efa = item.bool("efa", default=spec.supports_efa)
        _check(
            not efa or spec.supports_efa,
            at("efa"),
            f"{instance_type} has no EFA support",
            "remove efa (or set it to false), or use an EFA-capable type such as trn1.32xlarge",
        )
        _check(
            efa or not spec.supports_efa,
            at("efa"),
            f"{instance_type} is EFA-capable and must run with EFA",
            "remove efa: false; multi-node training over Neuron collectives needs EFA",
        )
        root = item.int("rootVolumeGiB", default=DEFAULT_ROOT_VOLUME_GIB)
        _check(100 <= root <= 16384, at("rootVolumeGiB"), f"{root} is outside 100..16384", "use at least 100 GiB")
        labels = item.str_map("labels")
        for label in labels:
            _check(
                not label.startswith("trainium-eks/"),
                f"{at('labels')}.{label}",
                "uses the platform's reserved prefix",
                "pick a label outside trainium-eks/",
            )
        reservation = _capacity_reservation(item.obj("capacityReservation"), az_id)
        item.done()
        groups.append(TrainiumNodeGroupConfig(name, instance_type, scaling, efa, root, MappingProxyType(labels), reservation))
    return tuple(groups)


def _capacity_reservation(item: _Obj | None, az_id: str) -> CapacityReservation | None:
    if item is None:
        return None
    kind = item.str("type", required=True)
    _check(
        kind in ("odcr", "capacity-block"),
        f"{item.path}.type",
        f"'{kind}' is not a reservation type",
        "use odcr or capacity-block",
    )
    reservation_id = item.str("id", required=True)
    _check(
        bool(RESERVATION_ID.match(reservation_id)),
        f"{item.path}.id",
        f"'{reservation_id}' is not a capacity reservation ID",
        "use the cr-... ID",
    )
    reservation_az = item.str("azId", required=True)
    _check(
        reservation_az == az_id,
        f"{item.path}.azId",
        f"{reservation_az} differs from trainiumAzId {az_id}",
        "use a reservation in the Trainium AZ, or move trainiumAzId to the reservation's AZ",
    )
    item.done()
    return CapacityReservation(kind, reservation_id, reservation_az)


def _cluster(values: dict, name: str, key: Callable[[str], str]) -> ClusterConfig:
    version = values["kubernetesVersion"]
    _check(
        version in versions.SUPPORTED_KUBERNETES_VERSIONS,
        key("kubernetesVersion"),
        f"'{version}' is not supported",
        f"use one of {', '.join(versions.SUPPORTED_KUBERNETES_VERSIONS)}",
    )
    cidrs = values["publicAccessCidrs"]
    for i, cidr in enumerate(cidrs):
        try:
            ipaddress.ip_network(cidr)
        except ValueError:
            raise ConfigError(
                f"{key('publicAccessCidrs')}[{i}]", f"'{cidr}' is not a CIDR", "use a CIDR such as 203.0.113.0/24"
            ) from None
    if values["endpointPublicAccess"]:
        _check(
            bool(cidrs),
            key("publicAccessCidrs"),
            "empty while endpointPublicAccess is true",
            "list the CIDRs allowed to reach the API (an empty list would mean 0.0.0.0/0)",
        )
    else:
        _check(
            not cidrs,
            key("publicAccessCidrs"),
            "set while endpointPublicAccess is false",
            "remove it or enable the public endpoint",
        )
    for i, arn in enumerate(values["clusterAdminPrincipalArns"]):
        _check(
            bool(PRINCIPAL_ARN.match(arn)),
            f"{key('clusterAdminPrincipalArns')}[{i}]",
            f"'{arn}' is not an IAM role or user ARN",
            "use arn:aws:iam::<account>:role/<name>",
        )
    system_type = values["systemNodeInstanceType"]
    _check(
        system_type in catalog.GENERAL_TYPES,
        key("systemNodeInstanceType"),
        f"'{system_type}' is not a system type in the catalog",
        f"use one of {', '.join(catalog.GENERAL_TYPES)}",
    )

    def system_key(name: str) -> str:
        return key("systemNode" + name[0].upper() + name[1:])

    scaling = _scaling(system_key, values["systemNodeMinSize"], values["systemNodeDesiredSize"], values["systemNodeMaxSize"])
    return ClusterConfig(
        name,
        version,
        values["endpointPublicAccess"],
        tuple(cidrs),
        tuple(values["clusterAdminPrincipalArns"]),
        system_type,
        scaling,
    )


def _scheduling(values: dict, raw_queues: Any, key: Callable[[str], str]) -> SchedulingConfig:
    namespace = values["jobNamespace"]
    _check(
        bool(DNS_LABEL.match(namespace)) and not namespace.startswith("kube-"),
        key("jobNamespace"),
        f"'{namespace}' is not a usable namespace",
        "use a DNS label outside kube-*, e.g. training",
    )
    queues, names = [], set()
    items = _list_of_objects(key("volcanoQueues"), raw_queues) if raw_queues is not None else []
    for item in items:
        name = item.str("name", required=True)
        _check(
            bool(DNS_LABEL.match(name)),
            f"{item.path}.name",
            f"'{name}' is not a DNS label",
            "use lowercase letters, digits and '-'",
        )
        _check(
            name not in names and name != "default",
            f"{item.path}.name",
            f"'{name}' is taken",
            "use a unique name other than Volcano's built-in 'default'",
        )
        names.add(name)
        weight = item.int("weight", default=1)
        _check(1 <= weight <= 65535, f"{item.path}.weight", f"{weight} is outside 1..65535", "use a positive weight")
        share = item.number("neuronShare", default=1.0)
        _check(0 < share <= 1, f"{item.path}.neuronShare", f"{share} is outside (0, 1]", "use a fraction such as 0.5")
        item.done()
        queues.append(QueueConfig(name, weight, share))
    if raw_queues is not None:
        _check(bool(queues), key("volcanoQueues"), "empty", "list at least one queue or remove the key")
    else:
        queues.append(QueueConfig("trainium", 1, 1.0))
    members = values["etcdMembers"]
    _check(
        members in ETCD_MEMBER_COUNTS,
        key("etcdMembers"),
        f"{members} is not 1, 3 or 5",
        "use an odd count: 1 (no fault tolerance), 3 or 5 (a majority must stay up)",
    )
    _check(
        members <= values["systemNodeMinSize"],
        key("etcdMembers"),
        f"{members} members but systemNodeMinSize is {values['systemNodeMinSize']}",
        "raise systemNodeMinSize to the member count (each member needs a node of its own) or lower etcdMembers",
    )
    etcd_gib = values["etcdStorageGiB"]
    _check(1 <= etcd_gib <= 100, key("etcdStorageGiB"), f"{etcd_gib} is outside 1..100", "8 GiB is plenty for rendezvous")
    return SchedulingConfig(namespace, tuple(queues), members, etcd_gib)


def _storage(values: dict, key: Callable[[str], str]) -> StorageConfig:
    deployment = values["fsxDeploymentType"]
    _check(
        deployment in FSX_DEPLOYMENT_TYPES,
        key("fsxDeploymentType"),
        f"'{deployment}' is not an FSx for Lustre deployment type",
        f"use one of {', '.join(FSX_DEPLOYMENT_TYPES)}",
    )
    capacity = values["fsxStorageCapacityGiB"]
    step = 3600 if deployment == "SCRATCH_1" else 2400
    _check(
        capacity in (1200, 2400) or (capacity > 0 and capacity % step == 0),
        key("fsxStorageCapacityGiB"),
        f"{capacity} is not a valid {deployment} size",
        f"use 1200, 2400 or a multiple of {step}",
    )
    throughput = values["fsxThroughputPerTiB"]
    allowed = FSX_THROUGHPUT.get(deployment, (0,))
    _check(
        throughput in allowed,
        key("fsxThroughputPerTiB"),
        f"{throughput} is not valid for {deployment}",
        f"use one of {', '.join(map(str, allowed))}",
    )
    path = values["fsxDataRepositoryPath"]
    if path:
        _check(
            path.startswith("s3://") and len(path) > 5,
            key("fsxDataRepositoryPath"),
            f"'{path}' is not an S3 URL",
            "use s3://bucket/prefix",
        )
        _check(
            deployment == "PERSISTENT_2",
            key("fsxDataRepositoryPath"),
            f"needs PERSISTENT_2, not {deployment}",
            "set fsxDeploymentType to PERSISTENT_2 or remove the data repository",
        )
    claim = values["fsxClaimName"]
    _check(
        bool(DNS_LABEL.match(claim)),
        key("fsxClaimName"),
        f"'{claim}' is not a DNS label",
        "use lowercase letters, digits and '-'",
    )
    return StorageConfig(deployment, capacity, throughput, path, claim)


def _registry(values: dict, stack: str, key: Callable[[str], str]) -> RegistryConfig:
    name = values["ecrRepositoryName"] or f"trainium-eks/{stack.lower()}/training"
    _check(
        2 <= len(name) <= 256 and bool(ECR_NAME.match(name)),
        key("ecrRepositoryName"),
        f"'{name}' is not a valid ECR name",
        "use lowercase letters, digits, and . _ - / between them",
    )
    keep = values["ecrKeepImages"]
    _check(1 <= keep <= 1000, key("ecrKeepImages"), f"{keep} is outside 1..1000", "keep at least one image")
    expiry = values["ecrUntaggedExpiryDays"]
    _check(1 <= expiry <= 365, key("ecrUntaggedExpiryDays"), f"{expiry} is outside 1..365", "use a number of days")
    return RegistryConfig(name, keep, expiry)


def from_pulumi() -> PlatformConfig:
    """Parse the running program's config: the map the CLI passed plus anything set in-process (tests)."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    return parse(merged, stack=pulumi.get_stack())
