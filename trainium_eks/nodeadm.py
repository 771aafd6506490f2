"""nodeadm's NodeConfig, the bootstrap settings a node of the EKS-optimised AL2023 AMIs reads from its user data
(awslabs/amazon-eks-ami, nodeadm "NodeConfig" API): written here for the launch templates and EC2NodeClasses, and read
back by the policies.

User data is MIME multi-part, one NodeConfig per part of type ``application/node.eks.aws``, as EKS requires of an
AL2023 managed node group's launch template (EKS User Guide, "Customize managed nodes with launch templates") and as
Karpenter merges it (Karpenter docs, EC2NodeClasses ``spec.userData``): each merges its own NodeConfig (the cluster's
details) with these.
"""

from __future__ import annotations

import base64
import binascii
from email import message_from_string
from email.message import Message
from email.mime.multipart import MIMEMultipart

import yaml

API_VERSION = "node.eks.aws/v1alpha1"
MEDIA_TYPE = "application/node.eks.aws"
# localStorage.strategy RAID0 makes one array of the instance's NVMe instance store and mounts containerd's, the
# kubelet's and the pod logs' directories on it (amazon-eks-ami setup-local-disks); Karpenter's instanceStorePolicy
# spells the same strategy.
RAID0 = "RAID0"
LOCAL_STORAGE_ON_INSTANCE_STORE = ("RAID0", "RAID10")  # the strategies that put containerd and the kubelet there
# The feature gate that pulls and unpacks image layers in parallel through the SOCI snapshotter.
FAST_IMAGE_PULL = "FastImagePull"
# A fixed boundary: the user data is an input of the launch template, and a random one would change every run.
BOUNDARY = "TRAINIUM-EKS-NODECONFIG"


def node_config(*, local_storage_raid0: bool, fast_image_pull: bool) -> dict | None:
    """The NodeConfig with the settings asked for; None when there is nothing to set."""
    spec: dict = {}
    if local_storage_raid0:
        spec["instance"] = {"localStorage": {"strategy": RAID0}}
    if fast_image_pull:
        spec["featureGates"] = {FAST_IMAGE_PULL: True}
    return {"apiVersion": API_VERSION, "kind": "NodeConfig", "spec": spec} if spec else None


def user_data(config: dict) -> str:
    """``config`` as MIME multi-part user data."""
    part = Message()
    part["Content-Type"] = MEDIA_TYPE
    part.set_payload(yaml.safe_dump(config, sort_keys=False))
    return MIMEMultipart("mixed", boundary=BOUNDARY, _subparts=[part]).as_string()


def node_configs(text: str, *, base64_encoded: bool = False) -> list[dict]:
    """The NodeConfig documents in user data (a launch template's is base64-encoded); [] for anything else."""
    if base64_encoded:
        try:
            text = base64.b64decode(text, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return []
    parts = message_from_string(text).walk()
    documents = []
    for part in parts:
        if part.get_content_type() != MEDIA_TYPE:
            continue
        try:
            documents += [d for d in yaml.safe_load_all(part.get_payload()) if isinstance(d, dict)]
        except yaml.YAMLError:
            continue
    return [d for d in documents if d.get("kind") == "NodeConfig"]


def local_storage_strategy(configs: list[dict]) -> str | None:
    """The localStorage strategy the last NodeConfig that sets one asks for (nodeadm merges them in order)."""
    strategies = [
        ((d.get("spec") or {}).get("instance") or {}).get("localStorage", {}).get("strategy")
        for d in configs
        if isinstance(d.get("spec"), dict)
    ]
    strategies = [s for s in strategies if s]
    return strategies[-1] if strategies else None
