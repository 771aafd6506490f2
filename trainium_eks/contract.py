"""The platform's output contract: the stack outputs other teams and the job launcher rely on.

Declared once, as the frozen model ``PlatformContract``: each output's key (the field's alias), type and the
contract version that introduced it (``since``). ``KEYS`` and the checks derive from it; the platform's
outputs, the README's table and the consumers are tested against it.

Semantic versioning: a new key is a minor bump; renaming, removing or changing the meaning of a key is a major
bump. A consumer accepts any platform whose major version equals the one it was written for and whose minor
version is at least the one that introduced the keys it reads. Keys of a newer minor version are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from trainium_eks import catalog, names, versions
from trainium_eks.contract_entries import (
    MANAGED_SCALING,
    STACK_BEFORE_1_6,
    ApiAccess,
    DnsLabel,
    NodeGroup,
    NodeGroupScaling,
    NodeGroupSoftware,
    ObjectName,
    Queue,
    Taint,
    Team,
)

CONTRACT_VERSION = "1.8.0"
FIRST = "1.0.0"


def since(version: str, *, optional: bool = False, **field: Any) -> Any:
    """A contract field introduced in ``version``; an ``optional`` one is published only by the stacks it applies to."""
    return Field(json_schema_extra={"since": version, "optional": optional}, **field)


def job_node_ceiling(*, elastic: bool, desired_size: int, max_size: int) -> int:
    """The most nodes of a group one job can have: those a managed group runs (desiredSize; the launcher refuses
    more), or an elastic group's maxSize, which Karpenter brings. The first-step estimate counts the same."""
    return max_size if elastic else desired_size


class ContractError(Exception):
    """Stack outputs that do not satisfy the contract; the message is one line naming the key and the fix."""


def _readable_kubeconfig(value: Any) -> Any:
    """A kubeconfig is a JSON object; a value that is not one (``[secret]`` when secrets are hidden) means there is
    none to use, and one that starts as an object but does not parse is refused."""
    if not (isinstance(value, str) and value.startswith("{")):
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        raise ValueError("not a JSON kubeconfig") from None
    if not isinstance(parsed, dict):
        raise ValueError("not a JSON kubeconfig object")
    return value


Text = StrictStr
ENDPOINT = re.compile(r"[A-Za-z0-9.-]+:[0-9]{1,5}")


def _endpoint(value: str) -> str:
    if not ENDPOINT.fullmatch(value):
        raise ValueError(f"{value!r} is not host:port with a numeric port, as torchrun's --rdzv_endpoint takes it")
    return value


Endpoint = Annotated[StrictStr, AfterValidator(_endpoint)]


class PlatformContract(BaseModel):
    """The outputs, checked and typed. ``kubeconfig`` is None when the outputs hold no readable secret."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    contract_version: Text = since(FIRST, alias="contractVersion")
    environment: Text = since(FIRST)
    region: Text = since(FIRST)
    cluster_name: Text = since(FIRST, alias="clusterName")
    cluster_endpoint: Text = since(FIRST, alias="clusterEndpoint")
    kubeconfig: Annotated[str | None, BeforeValidator(_readable_kubeconfig)] = since(FIRST)
    oidc_provider_arn: Text = since(FIRST, alias="oidcProviderArn")
    cluster_security_group_id: Text = since(FIRST, alias="clusterSecurityGroupId")
    vpc_id: Text = since(FIRST, alias="vpcId")
    private_subnet_ids: tuple[Text, ...] = since(FIRST, alias="privateSubnetIds")
    trainium_subnet_id: Text = since(FIRST, alias="trainiumSubnetId")
    trainium_availability_zone: Text = since(FIRST, alias="trainiumAvailabilityZone")
    trainium_az_id: Text = since(FIRST, alias="trainiumAzId")
    node_groups: tuple[NodeGroup, ...] = since(FIRST, alias="trainiumNodeGroups", min_length=1)
    node_taints: tuple[Taint, ...] = since(FIRST, alias="nodeTaints")
    volcano_queues: tuple[Queue, ...] = since(FIRST, alias="volcanoQueues", min_length=1)
    etcd_endpoint: Endpoint = since(FIRST, alias="etcdEndpoint")
    # the rendezvous' members, which `jobs.rehearsal` starts as many of
    etcd_members: PositiveInt | None = since("1.8.0", default=None, alias="etcdMembers")
    job_namespace: DnsLabel = since(FIRST, alias="jobNamespace")
    fsx_claim_name: ObjectName = since(FIRST, alias="fsxClaimName")
    fsx_file_system_id: Text = since(FIRST, alias="fsxFileSystemId")
    fsx_dns_name: Text | None = since("1.1.0", default=None, alias="fsxDnsName")
    fsx_mount_name: Text | None = since("1.1.0", default=None, alias="fsxMountName")
    fsx_mount_path: Text = since(FIRST, alias="fsxMountPath")
    # The file system's write throughput in MB/s (``fsx_throughput.write_mb_s``): how fast a drained job's checkpoint is
    # written, from which the launcher sets its pods' termination grace period.
    fsx_throughput_mbps: PositiveFloat | None = since("1.6.0", default=None, alias="fsxThroughputMBps")
    datasets_path: Text = since(FIRST, alias="datasetsPath")
    checkpoints_path: Text = since(FIRST, alias="checkpointsPath")
    neuron_compile_cache_path: Text = since(FIRST, alias="neuronCompileCachePath")
    tensorboard_log_path: Text = since(FIRST, alias="tensorboardLogPath")
    ecr_repository_url: Text = since(FIRST, alias="ecrRepositoryUrl")
    tensorboard_service: Text = since(FIRST, alias="tensorboardService")  # empty when TensorBoard is off
    # The private IPv4 addresses one node of each Trainium node group takes from the Trainium subnet through its
    # interfaces (the VPC CNI's pod and warm IPs come on top); a key of its own, so that 1.1.0 readers, whose
    # node-group entries refuse unknown keys, still read a 1.2.0 platform.
    trainium_private_ips_per_node: dict[StrictStr, PositiveInt] | None = since(
        "1.2.0", default=None, alias="trainiumPrivateIpsPerNode"
    )

    # How each node group scales, a top-level key for the same reason as trainiumPrivateIpsPerNode.
    trainium_node_group_scaling: dict[StrictStr, NodeGroupScaling] | None = since(
        "1.3.0", default=None, alias="trainiumNodeGroupScaling"
    )

    # What each node group runs (generation, training image, node image release and driver), a top-level key for the
    # same reason as trainiumNodeGroupScaling.
    trainium_node_group_software: dict[StrictStr, NodeGroupSoftware] | None = since(
        "1.6.0", default=None, alias="trainiumNodeGroupSoftware"
    )

    # Published by the stacks whose endpoint is private only.
    api_access: ApiAccess | None = since("1.4.0", optional=True, default=None, alias="apiAccess")

    # The teams that train in workspaces of their own (an empty list when the stack declares none).
    teams: tuple[Team, ...] = since("1.5.0", default=())

    def team(self, name: str) -> Team:
        found = {team.name: team for team in self.teams}.get(name)
        if found is None:
            declared = ", ".join(team.name for team in self.teams) or "none"
            raise ContractError(
                f"teams: the {self.environment} platform declares no team '{name}' (teams: {declared}); "
                "add it to the platform stack's teams"
            )
        return found

    def for_team(self, name: str) -> PlatformContract:
        """The platform as team ``name`` sees it: its namespace, its queue alone and its claim, at the same paths (a
        team's volume is laid out as the platform's). Everything that builds jobs from a contract builds the team's."""
        team = self.team(name)
        queue = Queue(name=team.queue, weight=team.weight, capability=team.quota)
        return self.model_copy(
            update={"job_namespace": team.namespace, "volcano_queues": (queue,), "fsx_claim_name": team.claim_name}
        )

    @field_validator("trainium_node_group_software")
    @classmethod
    def _every_group_has_software(cls, value: dict | None, info: ValidationInfo) -> dict | None:
        """An entry per group, of the group's generation; null only where the contract predates the key (the image of
        every group was then PyTorch/XLA's, which a trn2 group cannot run)."""
        version = info.data.get("contract_version", "")
        if value is None:
            if _version(version) >= _version(KEYS["trainiumNodeGroupSoftware"]):
                raise ValueError(f"null, but contract {version} publishes what each node group runs")
            return value
        for group in info.data.get("node_groups", ()):
            if group.name not in value:
                raise ValueError(f"no entry for node group {group.name}")
            spec = catalog.INSTANCE_TYPES.get(group.instance_type)
            if spec is not None and value[group.name].generation != spec.generation:
                raise ValueError(
                    f"{group.name}.generation {value[group.name].generation!r}, but the group's {group.instance_type} "
                    f"is {spec.generation}"
                )
        return value

    @field_validator("teams")
    @classmethod
    def _members_in_the_region_partition(cls, value: tuple, info: ValidationInfo) -> tuple:
        """A member's principal is of the cluster's partition (``names.partition``: no other partition's reaches it)."""
        region = info.data.get("region")
        for team in value if isinstance(region, str) else ():
            for arn in team.principal_arns:
                if names.arn_partition(arn) != names.partition(region):
                    raise ValueError(
                        f"{arn!r} of team {team.name} is in partition {names.arn_partition(arn)}, the {region} cluster "
                        f"in {names.partition(region)}"
                    )
        return value

    def software(self, group: NodeGroup) -> NodeGroupSoftware:
        """What ``group`` runs; on a platform older than 1.6.0, the one image every group ran (``STACK_BEFORE_1_6``)."""
        if self.trainium_node_group_software is not None:
            return self.trainium_node_group_software[group.name]
        stack = versions.TRAINING_STACKS[STACK_BEFORE_1_6]
        spec = catalog.INSTANCE_TYPES.get(group.instance_type)
        return NodeGroupSoftware(
            generation=spec.generation if spec else "",
            trainingStack=stack.name,
            trainingImage=f"{self.ecr_repository_url}:{stack.image_tag}",
            backend=stack.backend.name,
            neuronRuntime=stack.runtime.library,
        )

    def scaling(self, group: NodeGroup) -> NodeGroupScaling:
        return (self.trainium_node_group_scaling or {}).get(group.name, MANAGED_SCALING)

    def elastic(self, group: NodeGroup) -> bool:
        return self.scaling(group).provisioning == "karpenter"

    def node_ceiling(self, group: NodeGroup) -> int:
        """The most nodes of ``group`` a job can have (``job_node_ceiling``)."""
        return job_node_ceiling(elastic=self.elastic(group), desired_size=group.desired_size, max_size=group.max_size)

    @property
    def version(self) -> str:
        return self.contract_version

    @property
    def queues(self) -> tuple[str, ...]:
        return tuple(q.name for q in self.volcano_queues)

    def tolerations(self) -> list[dict]:
        """Kubernetes tolerations for the platform's node taints (what pods on Trainium nodes need)."""
        return [{"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} for t in self.node_taints]

    @classmethod
    def from_outputs(cls, outputs: Any, *, requires: str = CONTRACT_VERSION) -> PlatformContract:
        """Check ``outputs`` (``pulumi stack output --json --show-secrets``) against contract ``requires``."""
        if not isinstance(outputs, Mapping):
            raise ContractError(f"outputs: expected a JSON object of stack outputs, got {type(outputs).__name__}")
        if "contractVersion" not in outputs:
            raise ContractError("contractVersion: missing; these are not the outputs of a trainium-eks stack")
        have, want = _version(outputs["contractVersion"]), _version(requires)
        if have[0] != want[0] or have < want:
            raise ContractError(
                f"contractVersion: the stack publishes {outputs['contractVersion']}, this consumer needs "
                f"{requires} (same major, minor at least); upgrade the platform stack or the consumer"
            )
        # Every key of the version the platform publishes, as far as this reader knows them: a reader that needs less
        # still relies on what the platform says it publishes (PlatformContract.software).
        missing = [
            key
            for key, introduced in KEYS.items()
            if _version(introduced) <= have and key not in outputs and key not in OPTIONAL_KEYS
        ]
        if missing:
            raise ContractError(
                f"{missing[0]}: missing from contract {outputs['contractVersion']} outputs; "
                "the stack was changed without a contract version bump"
            )
        try:
            return cls.model_validate(outputs)
        except ValidationError as error:
            detail = error.errors(include_url=False)[0]
            where = ".".join(str(part) for part in detail["loc"])
            # A check of this module words its own message; pydantic's own start with a capital to lower.
            ours = detail["type"] == "value_error"
            problem = str(detail["ctx"]["error"]) if ours else detail["msg"][0].lower() + detail["msg"][1:]
            raise ContractError(
                f"{where}: {problem}; the outputs do not match contract {outputs['contractVersion']} "
                "(read them again with `pulumi stack output --json --show-secrets`)"
            ) from None


def _version(text: Any) -> tuple[int, int]:
    try:
        major, minor, *_ = str(text).split(".")
        return int(major), int(minor)
    except ValueError:
        raise ContractError(f"contractVersion: '{text}' is not a version; is this a trainium-eks stack?") from None


# Key -> the contract version that introduced it.
KEYS: Mapping[str, str] = {
    field.alias or name: field.json_schema_extra["since"] for name, field in PlatformContract.model_fields.items()
}
# The keys a stack publishes only where they apply.
OPTIONAL_KEYS: frozenset[str] = frozenset(
    field.alias or name for name, field in PlatformContract.model_fields.items() if field.json_schema_extra["optional"]
)
