"""Change impact: what one version of a stack changes against another, and which changes replace a resource.

Two plans are compared by URN: resources only in the new plan are added, only in the old one removed, and
in both with different inputs changed, with the input paths that differ. A change replaces the resource when
one of those paths is a property the provider cannot update in place (``REPLACE_ON_CHANGE``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

from trainium_eks import tokens, versions
from trainium_eks.trainium_groups import RELEASE_VERSION

# Properties whose change forces a replacement, for the resource types the platform creates. Sources: the
# Terraform AWS provider's resource docs ("Forces new resource", which pulumi-aws inherits), pulumi-eks's
# component inputs, and the Kubernetes API's immutable fields. Anything else changes in place; a launch
# template, for example, takes every change as a new version, and a node group scales in place.
REPLACE_ON_CHANGE: Mapping[str, tuple[str, ...]] = {
    tokens.EC2_VPC: ("cidrBlock", "instanceTenancy"),
    tokens.EC2_SUBNET: ("vpcId", "cidrBlock", "availabilityZone", "availabilityZoneId"),
    tokens.EC2_SECURITY_GROUP: ("name", "namePrefix", "vpcId", "description"),
    tokens.VPC_SECURITY_GROUP_INGRESS_RULE: ("securityGroupId",),
    tokens.VPC_SECURITY_GROUP_EGRESS_RULE: ("securityGroupId",),
    tokens.EC2_ROUTE_TABLE: ("vpcId",),
    tokens.EC2_ROUTE_TABLE_ASSOCIATION: ("subnetId", "gatewayId"),
    tokens.EC2_EIP: ("domain",),
    tokens.EC2_NAT_GATEWAY: ("allocationId", "subnetId", "connectivityType", "privateIp"),
    tokens.EC2_PLACEMENT_GROUP: ("name", "namePrefix", "strategy", "partitionCount", "spreadLevel"),
    tokens.EC2_LAUNCH_TEMPLATE: ("name", "namePrefix"),
    tokens.EKS_NODE_GROUP: (
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
    tokens.EKS_ADDON: ("addonName", "clusterName"),
    tokens.KMS_KEY: ("customerMasterKeySpec", "keyUsage", "multiRegion"),
    tokens.KMS_ALIAS: ("name", "namePrefix"),
    tokens.IAM_ROLE: ("name", "namePrefix", "path"),
    tokens.IAM_ROLE_POLICY: ("name", "namePrefix", "role"),
    tokens.IAM_ROLE_POLICY_ATTACHMENT: ("role", "policyArn"),
    tokens.FSX_LUSTRE_FILE_SYSTEM: (
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
    tokens.FSX_DATA_REPOSITORY_ASSOCIATION: (
        "fileSystemId",
        "fileSystemPath",
        "dataRepositoryPath",
        "batchImportMetaDataOnCreate",
    ),
    tokens.ECR_REPOSITORY: ("name", "encryptionConfigurations"),
    tokens.ECR_LIFECYCLE_POLICY: ("repository",),
    tokens.EKS_COMPONENT_CLUSTER: ("name", "vpcId"),
    tokens.EKS_CLUSTER: ("name",),
    tokens.K8S_STATEFUL_SET: (
        "spec.selector",
        "spec.serviceName",
        "spec.volumeClaimTemplates",
        "spec.podManagementPolicy",
    ),
    tokens.K8S_DEPLOYMENT: ("spec.selector",),
    tokens.K8S_SERVICE: ("spec.clusterIP",),
    tokens.K8S_PERSISTENT_VOLUME: ("spec.csi", "spec.accessModes", "spec.storageClassName", "spec.volumeMode"),
    tokens.K8S_PERSISTENT_VOLUME_CLAIM: (
        "spec.accessModes",
        "spec.storageClassName",
        "spec.volumeName",
        "spec.selector",
        "spec.volumeMode",
    ),
    tokens.K8S_STORAGE_CLASS: ("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"),
    tokens.HELM_RELEASE: ("name",),
    # The NodePool CRD (v1.14.1) refuses a change of nodeClassRef's group or kind (CEL: "... is immutable").
    tokens.KARPENTER_NODE_POOL: ("spec.template.spec.nodeClassRef.group", "spec.template.spec.nodeClassRef.kind"),
}
# Changes that replace the nodes themselves, though the resource changes in place. A managed node group rolls onto a new
# launch template version or AMI release (one node at a time: updateConfig maxUnavailable 1). Karpenter replaces a
# node whose EC2NodeClass or NodePool template changed ("drift", Karpenter docs, Disruption: a NodePool's limits and
# disruption settings do not drift), and waits while a karpenter.sh/do-not-disrupt pod (a training job) runs on it.
ROLLING = "the node group replaces its nodes, one at a time"
DRIFT = "Karpenter replaces each node (drift) once no training pod runs on it"
NODE_REPLACING: Mapping[str, tuple[tuple[str, ...], str]] = {
    tokens.EC2_LAUNCH_TEMPLATE: (("",), ROLLING),
    tokens.EKS_NODE_GROUP: (("launchTemplate.version", "releaseVersion", "version"), ROLLING),
    tokens.KARPENTER_NODE_CLASS: (("spec",), DRIFT),
    tokens.KARPENTER_NODE_POOL: (("spec.template",), DRIFT),
}
# Kubernetes objects are identified by name and namespace: changing either makes a new object.
KUBERNETES_IDENTITY = ("metadata.name", "metadata.namespace")
# What a stateful resource takes with it when it is replaced (deleted, then created empty) or removed.
LOST: Mapping[str, str] = {
    tokens.FSX_LUSTRE_FILE_SYSTEM: "every file on it (datasets, checkpoints, the compile cache) not exported to S3",
    tokens.ECR_REPOSITORY: "every image in it",
    tokens.KMS_KEY: "whatever only it decrypts, once its deletion window ends",
    tokens.EKS_COMPONENT_CLUSTER: "every Kubernetes object in the cluster, and the jobs running there",
    tokens.EKS_CLUSTER: "every Kubernetes object in the cluster, and the jobs running there",
}


@dataclass(frozen=True)
class Change:
    urn: str
    paths: tuple[str, ...]
    replace: bool
    nodes: str | None = None  # what happens to running nodes, when the change replaces them
    values: tuple[tuple[str, Any, Any], ...] = ()  # (path, old, new) for each changed path
    dependents: tuple[str, ...] = ()  # of a replacement: the resources whose inputs come from it

    def to_json(self) -> dict:
        return {
            "urn": self.urn,
            "paths": list(self.paths),
            "replace": self.replace,
            "nodes": self.nodes,
            "values": [{"path": path, "old": old, "new": new} for path, old, new in self.values],
            "dependents": list(self.dependents),
        }


@dataclass
class Impact:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    losses: list[dict] = field(default_factory=list)  # a replaced or removed stateful resource, and what goes with it
    cost: dict = field(default_factory=dict)  # monthly USD busy and idle, before and after
    drifts: list[dict] = field(default_factory=list)  # Karpenter node classes whose nodes a version change replaces
    refused: list[dict] = field(default_factory=list)  # changes EKS refuses to apply, and what to do instead

    def to_json(self) -> dict:
        return {
            "added": self.added,
            "removed": self.removed,
            "changed": [c.to_json() for c in self.changed],
            "losses": self.losses,
            "cost": self.cost,
            "drifts": self.drifts,
            "refused": self.refused,
        }


def changed_values(old: Any, new: Any, prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(dotted path ``a.b[2].c``, old, new) where two input values differ; a list whose length changes is one path."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            yield from changed_values(old.get(key), new.get(key), f"{prefix}.{key}" if prefix else key)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from changed_values(a, b, f"{prefix}[{index}]")
    elif old != new:
        yield prefix, old, new


def changed_paths(old: Any, new: Any) -> Iterator[str]:
    return (path for path, _, _ in changed_values(old, new))


def replaces(resource_type: str, path: str) -> bool:
    properties = REPLACE_ON_CHANGE.get(resource_type, ())
    if resource_type.startswith("kubernetes:"):
        properties = (*properties, *KUBERNETES_IDENTITY)
    return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in properties)


def replaced_nodes(resource_type: str, paths: tuple[str, ...]) -> str | None:
    prefixes, effect = NODE_REPLACING.get(resource_type, ((), ""))
    hit = any(p == prefix or p.startswith((f"{prefix}.", f"{prefix}[")) or not prefix for p in paths for prefix in prefixes)
    return effect if hit else None


def input_dependents(plan: Mapping[str, dict], urn: str) -> tuple[str, ...]:
    """The resources of ``plan`` with an input that comes from ``urn``: a replacement changes or breaks them."""
    return tuple(
        sorted(other for other, r in plan.items() if any(urn in urns for urns in (r.get("propertyDependencies") or {}).values()))
    )


def cluster_version(resources: Mapping[str, dict]) -> str | None:
    versions = [r["inputs"].get("version") for r in resources.values() if r["type"] in tokens.EKS_CLUSTERS]
    return versions[0] if versions else None


def version_drifts(old: Mapping[str, dict], new: Mapping[str, dict]) -> list[dict]:
    """The EC2NodeClasses whose nodes Karpenter replaces because the control plane's version changed: their inputs
    stay the same, but an ``al2023@<release>`` alias resolves to that release's build for the cluster's version
    (Karpenter docs, FAQ "How do I upgrade an EKS Cluster with Karpenter?": drift keeps the nodes in step with it)."""
    before, after = cluster_version(old), cluster_version(new)
    if before == after:
        return []
    return [
        {"urn": urn, "why": f"its AMI alias resolves to the Kubernetes {after} build (was {before})"}
        for urn, r in sorted(new.items())
        if r["type"] == tokens.KARPENTER_NODE_CLASS
        and any("alias" in term for term in ((r["inputs"].get("spec") or {}).get("amiSelectorTerms") or []))
    ]


def rollbacks(changed: list[Change], new: Mapping[str, dict]) -> list[dict]:
    """Managed node groups moved to an older Kubernetes version or AMI release, which EKS refuses (EKS API
    Reference, UpdateNodegroupVersion: "You cannot roll back a node group to an earlier Kubernetes version or AMI
    version"). A new group (another name in the stack file) is created at any release."""
    refused = []
    for change in changed:
        if new[change.urn]["type"] != tokens.EKS_NODE_GROUP:
            continue
        for path, old_value, new_value in change.values:
            older = _older_version(old_value, new_value) if path == "version" else _older_release(old_value, new_value)
            if path in ("version", "releaseVersion") and older:
                refused.append(
                    {
                        "urn": change.urn,
                        "why": f"{path} {old_value} -> {new_value} rolls the group back, which EKS refuses; keep "
                        f"{old_value}, or give the group a new name so that a new group replaces it",
                    }
                )
    return refused


def _older_version(old: Any, new: Any) -> bool:
    if not all(isinstance(v, str) and re.fullmatch(r"\d+\.\d+", v) for v in (old, new)):
        return False
    return versions.minor_version(new) < versions.minor_version(old)


def _older_release(old: Any, new: Any) -> bool:
    dates = [RELEASE_VERSION.match(v) if isinstance(v, str) else None for v in (old, new)]
    return all(dates) and dates[1].group(1) < dates[0].group(1)


def monthly_cost(plan: dict) -> dict:
    cost = plan.get("cost") or {}
    return {"busyUsd": cost.get("monthlyUsd"), "idleUsd": cost.get("idleMonthlyUsd")}


def compare(old_plan: dict, new_plan: dict) -> Impact:
    old = {r["urn"]: r for r in old_plan["resources"]}
    new = {r["urn"]: r for r in new_plan["resources"]}
    impact = Impact(added=sorted(set(new) - set(old)), removed=sorted(set(old) - set(new)))
    impact.cost = {"before": monthly_cost(old_plan), "after": monthly_cost(new_plan)}
    for urn in sorted(set(old) & set(new)):
        if new[urn]["type"].startswith("pulumi:providers:"):
            continue  # provider inputs (a kubeconfig, a region) change with the resources they configure
        values = tuple(changed_values(old[urn]["inputs"], new[urn]["inputs"]))
        if values:
            kind, paths = new[urn]["type"], tuple(path for path, _, _ in values)
            replace = any(replaces(kind, p) for p in paths)
            dependents = input_dependents(new, urn) if replace else ()
            impact.changed.append(Change(urn, paths, replace, replaced_nodes(kind, paths), values, dependents))
    impact.drifts = version_drifts(old, new)
    impact.refused = rollbacks(impact.changed, new)
    gone = [(c.urn, "replaced") for c in impact.changed if c.replace] + [(urn, "removed") for urn in impact.removed]
    for urn, how in sorted(gone):
        kind = (new.get(urn) or old[urn])["type"]
        if kind in LOST:
            impact.losses.append({"urn": urn, "how": how, "lost": LOST[kind]})
    return impact


class RefError(Exception):
    """A git ref that cannot be read; the message is one line."""


# What git refuses in a ref name (git check-ref-format), so that no such text reaches git. The revision
# suffixes ~N, ^N and @{...} stay allowed: `--against HEAD~1` is the common case.
REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f:?*\[\\]|\.\.")


def check_ref(ref: str) -> str:
    """``ref``, when git could read it as a revision and never as an option."""
    if ref.startswith("-"):
        why = "it starts with '-'"
    elif not ref or REF_FORBIDDEN.search(ref):
        why = "it is empty or has a space, control character, ':', '?', '*', '[', '\\' or '..'"
    else:
        return ref
    raise RefError(f"--against {ref!r}: not a stack file, nor a git ref ({why}); pass a stack file, branch, tag or commit")


def _git(repo: Path, ref: str, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    except OSError as error:
        raise RefError(f"--against {ref}: cannot run git ({error.strerror}); install git or pass a stack file") from None


def _last_line(output: bytes | str, default: str) -> str:
    text = output.decode(errors="replace") if isinstance(output, bytes) else output
    return (text.strip().splitlines() or [default])[-1]


def plan_at_ref(repo: Path, ref: str, stack: str) -> dict:
    """Evaluate ``stack`` with the program and stack file as they are at git ``ref``, in a separate process."""
    resolved = _git(repo, check_ref(ref), "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if resolved.returncode != 0:
        reason = _last_line(resolved.stderr, "no such commit")
        raise RefError(f"--against {ref}: not a stack file, nor a git ref of {repo} ({reason})")
    commit = resolved.stdout.decode().strip()
    archive = _git(repo, ref, "archive", "--format=tar", "--end-of-options", commit)
    if archive.returncode != 0:
        raise RefError(f"--against {ref}: git archive of {commit} failed ({_last_line(archive.stderr, 'no output')})")
    with tempfile.TemporaryDirectory(prefix="preflight-diff-") as tree:
        with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
            tar.extractall(tree, filter="data")
        result = subprocess.run(
            [sys.executable, "-m", "preflight", "plan", "--json", "--", stack], cwd=tree, capture_output=True, text=True
        )
    if result.returncode != 0:
        raise RefError(f"--against {ref}: evaluating {stack} there failed: {_last_line(result.stderr, 'no output')}")
    try:
        return json.loads(result.stdout)
    except ValueError:
        raise RefError(f"--against {ref}: evaluating {stack} there printed no plan; is it a version of this project?") from None
