"""The entries of the platform's output contract (``trainium_eks.contract``): a node group, how it scales and what it
runs, a team's workspace, the API access host, a taint and a queue, each a frozen model that ignores keys a newer
minor version adds; and the naming rules their strings follow.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, StrictStr

from trainium_eks import names


def _named(pattern: re.Pattern, what: str) -> Any:
    """A string following one of AWS's or Kubernetes' naming rules (``trainium_eks.names``: whole string, ASCII): a
    name from the outputs becomes a namespace, a label value or an object name in the jobs built from them."""

    def check(value: str) -> str:
        if not pattern.match(value):
            raise ValueError(f"{value!r} is not {what}")
        return value

    return Annotated[StrictStr, AfterValidator(check)]


DnsLabel = _named(names.DNS_LABEL, "a DNS label of up to 63 lowercase letters, digits and '-' (a namespace name)")
ObjectName = _named(names.DNS_SUBDOMAIN, "a Kubernetes object name (lowercase letters, digits, '-' and '.')")
LabelValue = _named(names.LABEL_NAME, "a Kubernetes label value (up to 63 of A-Z a-z 0-9 -_.)")
PrincipalArn = _named(names.PRINCIPAL_ARN, "an IAM role or user ARN")
ImageReference = _named(names.IMAGE_REFERENCE, "an image reference <registry>/<repository>:<tag>")


class Entry(BaseModel):
    # A newer minor version may add keys inside entries too, as at the top level: a reader accepts and ignores them.
    model_config = ConfigDict(frozen=True, extra="ignore")


class CapacityBlockTag(Entry):
    """An EC2 tag (``aws ec2 create-tags --tags Key=<key>,Value=<value>``) that puts a Capacity Block in a group."""

    key: StrictStr
    value: StrictStr


class NodeGroup(Entry):
    name: LabelValue
    instance_type: StrictStr = Field(alias="instanceType")
    min_size: NonNegativeInt = Field(alias="minSize")
    desired_size: NonNegativeInt = Field(alias="desiredSize")
    max_size: PositiveInt = Field(alias="maxSize")
    neuron_devices_per_node: PositiveInt = Field(alias="neuronDevicesPerNode")
    neuron_cores_per_node: PositiveInt = Field(alias="neuronCoresPerNode")
    efa_interfaces_per_node: NonNegativeInt = Field(alias="efaInterfacesPerNode")
    vcpus_per_node: PositiveInt = Field(alias="vcpusPerNode")
    memory_gib_per_node: PositiveInt = Field(alias="memoryGiBPerNode")
    node_selector: dict[StrictStr, StrictStr] = Field(alias="nodeSelector")
    # The tag that makes a Capacity Block serve this (elastic) group; None: the group selects no block by tag, or the
    # platform is older than this field.
    capacity_block_tag: CapacityBlockTag | None = Field(None, alias="capacityBlockTag")
    # The Capacity Block the stack names by id (capacityReservation.id), used beside the tagged ones; None: none named,
    # or the platform is older than this field.
    capacity_block_id: StrictStr | None = Field(None, alias="capacityBlockId")


class NodeGroupScaling(Entry):
    """How a node group's nodes come and go: ``managed`` runs desiredSize nodes until the stack changes; ``karpenter``
    runs none until a job's pods wait, up to maxSize, and removes a node idle for ``idleMinutes``."""

    provisioning: Literal["managed", "karpenter"]
    idle_minutes: PositiveInt | None = Field(None, alias="idleMinutes")


MANAGED_SCALING = NodeGroupScaling(provisioning="managed")  # what a platform older than 1.3.0 runs


class NodeGroupSoftware(Entry):
    """What a node group runs: its Trainium generation; the training stack its jobs run, with the image ``make image``
    pushes for it (``<ecrRepositoryUrl>:<tag>``), its PyTorch backend (``xla`` or ``neuron``, a string: a later minor
    version may add one) and the Neuron runtime library in it; and the node image release its nodes boot, with that
    release's Neuron driver. A platform older than 1.6.0 published neither release nor driver (None here)."""

    generation: StrictStr
    training_stack: StrictStr = Field(alias="trainingStack")
    training_image: ImageReference = Field(alias="trainingImage")
    backend: StrictStr
    neuron_runtime: StrictStr = Field(alias="neuronRuntime")
    node_image_release: StrictStr | None = Field(None, alias="nodeImageRelease")
    neuron_driver: StrictStr | None = Field(None, alias="neuronDriver")


# A platform older than 1.6.0 built one training image, PyTorch/XLA's, and ran it on every node group.
STACK_BEFORE_1_6 = "pytorch-xla-2.30"


class ApiAccess(Entry):
    """How a workstation reaches a private-only API endpoint: a port-forwarding session (``document``) through the
    Systems Manager managed host ``hostInstanceId``, which the policy ``usersPolicyArn`` lets a person open."""

    host_instance_id: StrictStr = Field(alias="hostInstanceId")
    users_policy_arn: StrictStr = Field(alias="usersPolicyArn")
    document: StrictStr


class Team(Entry):
    """A team's workspace: its namespace and queue, its quota (the queue's capability too), and its volume, a claim in
    its namespace on its own directory ``fileSystemPath`` of the file system, mounted where the platform's is."""

    name: DnsLabel
    namespace: DnsLabel
    queue: ObjectName
    weight: PositiveInt
    quota: dict[StrictStr, NonNegativeInt]
    claim_name: ObjectName = Field(alias="claimName")
    file_system_path: StrictStr = Field(alias="fileSystemPath")
    principal_arns: tuple[PrincipalArn, ...] = Field(alias="principalArns")


class Taint(Entry):
    key: StrictStr
    value: StrictStr
    effect: StrictStr


class Queue(Entry):
    name: ObjectName
    weight: float
    capability: dict[StrictStr, float]
