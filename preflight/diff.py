"""Change impact: what one version of a stack changes against another, and which changes replace a resource.

Two plans are compared by URN: resources only in the new plan are added, only in the old one removed, and
in both with different inputs changed, with the input paths that differ. A change replaces the resource when
one of those paths is a property the provider cannot update in place (``REPLACE_ON_CHANGE``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

# Properties whose change forces a replacement, for the resource types the platform creates. Sources: the
# Terraform AWS provider's resource docs ("Forces new resource", which pulumi-aws inherits), pulumi-eks's
# component inputs, and the Kubernetes API's immutable fields. Anything else changes in place; a launch
# template, for example, takes every change as a new version, and a node group scales in place.
REPLACE_ON_CHANGE: Mapping[str, tuple[str, ...]] = {
    "aws:ec2/vpc:Vpc": ("cidrBlock", "instanceTenancy"),
    "aws:ec2/subnet:Subnet": ("vpcId", "cidrBlock", "availabilityZone", "availabilityZoneId"),
    "aws:ec2/securityGroup:SecurityGroup": ("name", "namePrefix", "vpcId", "description"),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": ("securityGroupId",),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": ("securityGroupId",),
    "aws:ec2/routeTable:RouteTable": ("vpcId",),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("subnetId", "gatewayId"),
    "aws:ec2/eip:Eip": ("domain",),
    "aws:ec2/natGateway:NatGateway": ("allocationId", "subnetId", "connectivityType", "privateIp"),
    "aws:ec2/placementGroup:PlacementGroup": ("name", "namePrefix", "strategy", "partitionCount", "spreadLevel"),
    "aws:ec2/launchTemplate:LaunchTemplate": ("name", "namePrefix"),
    "aws:eks/nodeGroup:NodeGroup": (
        "amiType",
        "capacityType",
        "clusterName",
        "diskSize",
        "instanceTypes",
        "nodeGroupName",
        "nodeGroupNamePrefix",
        "nodeRoleArn",
        "remoteAccess",
        "subnetIds",
        "launchTemplate.id",
        "launchTemplate.name",
    ),
    "aws:eks/addon:Addon": ("addonName", "clusterName"),
    "aws:kms/key:Key": ("customerMasterKeySpec", "keyUsage", "multiRegion"),
    "aws:kms/alias:Alias": ("name", "namePrefix"),
    "aws:iam/role:Role": ("name", "namePrefix", "path"),
    "aws:iam/rolePolicy:RolePolicy": ("name", "namePrefix", "role"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("role", "policyArn"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": (
        "subnetIds",
        "securityGroupIds",
        "deploymentType",
        "kmsKeyId",
        "storageType",
        "fileSystemTypeVersion",
        "importPath",
        "exportPath",
        "importedFileChunkSize",
        "backupId",
        "driveCacheType",
        "efaEnabled",
    ),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": (
        "fileSystemId",
        "fileSystemPath",
        "dataRepositoryPath",
        "batchImportMetaDataOnCreate",
    ),
    "aws:ecr/repository:Repository": ("name", "encryptionConfigurations"),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": ("repository",),
    "eks:index:Cluster": ("name", "vpcId"),
    "aws:eks/cluster:Cluster": ("name",),
    "kubernetes:apps/v1:StatefulSet": (
        "spec.selector",
        "spec.serviceName",
        "spec.volumeClaimTemplates",
        "spec.podManagementPolicy",
    ),
    "kubernetes:apps/v1:Deployment": ("spec.selector",),
    "kubernetes:core/v1:Service": ("spec.clusterIP",),
    "kubernetes:core/v1:PersistentVolume": ("spec.csi", "spec.accessModes", "spec.storageClassName", "spec.volumeMode"),
    "kubernetes:core/v1:PersistentVolumeClaim": (
        "spec.accessModes",
        "spec.storageClassName",
        "spec.volumeName",
        "spec.selector",
        "spec.volumeMode",
    ),
    "kubernetes:storage.k8s.io/v1:StorageClass": ("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"),
    "kubernetes:helm.sh/v3:Release": ("name",),
}
# Kubernetes objects are identified by name and namespace: changing either makes a new object.
KUBERNETES_IDENTITY = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class Change:
    urn: str
    paths: tuple[str, ...]
    replace: bool

    def to_json(self) -> dict:
        return {"urn": self.urn, "paths": list(self.paths), "replace": self.replace}


@dataclass
class Impact:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"added": self.added, "removed": self.removed, "changed": [c.to_json() for c in self.changed]}


def changed_paths(old: Any, new: Any, prefix: str = "") -> Iterator[str]:
    """Dotted paths (``a.b[2].c``) where two input values differ; a list whose length changes is one path."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            yield from changed_paths(old.get(key), new.get(key), f"{prefix}.{key}" if prefix else key)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from changed_paths(a, b, f"{prefix}[{index}]")
    elif old != new:
        yield prefix


def replaces(resource_type: str, path: str) -> bool:
    properties = REPLACE_ON_CHANGE.get(resource_type, ())
    if resource_type.startswith("kubernetes:"):
        properties = (*properties, *KUBERNETES_IDENTITY)
    return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in properties)


def compare(old_plan: dict, new_plan: dict) -> Impact:
    old = {r["urn"]: r for r in old_plan["resources"]}
    new = {r["urn"]: r for r in new_plan["resources"]}
    impact = Impact(added=sorted(set(new) - set(old)), removed=sorted(set(old) - set(new)))
    for urn in sorted(set(old) & set(new)):
        if new[urn]["type"].startswith("pulumi:providers:"):
            continue  # provider inputs (a kubeconfig, a region) change with the resources they configure
        paths = tuple(changed_paths(old[urn]["inputs"], new[urn]["inputs"]))
        if paths:
            impact.changed.append(Change(urn, paths, any(replaces(new[urn]["type"], p) for p in paths)))
    return impact


class RefError(Exception):
    """A git ref that cannot be read; the message is one line."""


def plan_at_ref(repo: Path, ref: str, stack: str) -> dict:
    """Evaluate ``stack`` with the program and stack file as they are at git ``ref``, in a separate process."""
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", ref], capture_output=True)
    if archive.returncode != 0:
        raise RefError(f"--against {ref}: not a stack file, nor a git ref of {repo} ({archive.stderr.decode().strip()})")
    with tempfile.TemporaryDirectory(prefix="preflight-diff-") as tree:
        with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
            tar.extractall(tree, filter="data")
        result = subprocess.run(
            [sys.executable, "-m", "preflight", "plan", stack, "--json"], cwd=tree, capture_output=True, text=True
        )
    if result.returncode != 0:
        last_line = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise RefError(f"--against {ref}: evaluating {stack} there failed: {last_line}")
    return json.loads(result.stdout)
