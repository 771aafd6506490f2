"""Change impact: what one version of a stack changes against another, and which changes replace a resource.

Two plans are compared by URN: resources only in the new plan are added, only in the old one removed, and
in both with different inputs changed, with the input paths that differ (``input_paths``). As the engine does, the new
inputs first take the old values at the paths a resource ignores (``ignoreChanges``). A change replaces the resource
when one of those paths is a property the provider cannot update in place (``REPLACE_ON_CHANGE``), or one it cannot
update to that value (``REPLACE_ON_VALUE``). Changes are listed in the order `pulumi up` applies them, with the node
groups whose nodes they replace (``node_replacements``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from preflight import node_replacements, version_moves
from preflight.input_paths import changed_values, with_ignored_changes
from trainium_eks import tokens

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
# Changes that replace the resource for some values only: (old, new, the resource's new inputs) -> replaced. The
# Terraform AWS provider forces a new Lustre file system when storage_capacity decreases or the file system is
# SCRATCH_1 (resourceLustreFileSystemSchemaCustomizeDiff): FSx grows a file system, never shrinks it, and cannot grow
# SCRATCH_1 (FSx API Reference, UpdateFileSystem, StorageCapacity).
REPLACE_ON_VALUE: Mapping[tuple[str, str], Callable[[Any, Any, Mapping[str, Any]], bool]] = {
    (tokens.FSX_LUSTRE_FILE_SYSTEM, "storageCapacity"): lambda old, new, inputs: (
        (isinstance(old, float | int) and isinstance(new, float | int) and new < old)
        or inputs.get("deploymentType") == "SCRATCH_1"
    ),
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
    after: tuple[str, ...] = ()  # the changed resources `pulumi up` finishes before it starts this one

    def to_json(self) -> dict:
        return {
            "urn": self.urn,
            "paths": list(self.paths),
            "replace": self.replace,
            "nodes": self.nodes,
            "values": [{"path": path, "old": old, "new": new} for path, old, new in self.values],
            "dependents": list(self.dependents),
            "after": list(self.after),
        }


@dataclass
class Impact:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    losses: list[dict] = field(default_factory=list)  # a replaced or removed stateful resource, and what goes with it
    cost: dict = field(default_factory=dict)  # monthly USD busy and idle, before and after
    drifts: list[dict] = field(default_factory=list)  # Karpenter node classes whose nodes a version change replaces
    node_images: list[dict] = field(default_factory=list)  # Trainium groups a node image move rolls (version_moves)
    refused: list[dict] = field(default_factory=list)  # changes EKS refuses to apply (version_moves.refused)
    imports: list[dict] = field(default_factory=list)  # added resources AWS already holds (existing_in_aws)
    nodes_replaced: list[dict] = field(default_factory=list)  # node groups whose nodes go (node_replacements)

    def to_json(self) -> dict:
        return {
            "added": self.added,
            "removed": self.removed,
            "changed": [c.to_json() for c in self.changed],
            "losses": self.losses,
            "cost": self.cost,
            "drifts": self.drifts,
            "nodeImages": self.node_images,
            "refused": self.refused,
            "imports": self.imports,
            "nodesReplaced": self.nodes_replaced,
        }


def replaces(resource_type: str, path: str) -> bool:
    properties = REPLACE_ON_CHANGE.get(resource_type, ())
    if resource_type.startswith("kubernetes:"):
        properties = (*properties, *KUBERNETES_IDENTITY)
    return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in properties)


def replaced_by_value(resource_type: str, path: str, old: Any, new: Any, inputs: Mapping[str, Any]) -> bool:
    rule = REPLACE_ON_VALUE.get((resource_type, path))
    return rule is not None and rule(old, new, inputs)


def replaced_nodes(resource_type: str, paths: tuple[str, ...]) -> str | None:
    prefixes, effect = NODE_REPLACING.get(resource_type, ((), ""))
    hit = any(p == prefix or p.startswith((f"{prefix}.", f"{prefix}[")) or not prefix for p in paths for prefix in prefixes)
    return effect if hit else None


def input_dependents(plan: Mapping[str, dict], urn: str) -> tuple[str, ...]:
    """The resources of ``plan`` with an input that comes from ``urn``: a replacement changes or breaks them."""
    return tuple(
        sorted(other for other, r in plan.items() if any(urn in urns for urns in (r.get("propertyDependencies") or {}).values()))
    )


class Waits:
    """Which resources `pulumi up` finishes before it starts one: its dependencies (data and ``dependsOn``) and its
    provider, each with what it waits for; a dependency on a component waits for everything inside it (as in
    ``plan_graph.deployment``), except for a resource inside that component."""

    def __init__(self, plan: Mapping[str, dict]):
        self.plan = plan
        self.children: dict[str, list[str]] = defaultdict(list)
        for urn, record in plan.items():
            if record.get("parent"):
                self.children[record["parent"]].append(urn)
        self._waits: dict[str, frozenset[str]] = {}

    def on(self, urn: str) -> frozenset[str]:
        if urn not in self._waits:
            self._waits[urn] = frozenset()  # a cycle (no deployable plan has one) ends here
            record, ancestors = self.plan[urn], self._ancestors(urn)
            found: set[str] = set()
            for dependency in [*record.get("dependencies", []), record.get("provider")]:
                if dependency not in self.plan:
                    continue
                inside = [] if self.plan[dependency].get("custom", True) or dependency in ancestors else self._inside(dependency)
                for waited in (dependency, *inside):
                    found |= {waited, *self.on(waited)}
            self._waits[urn] = frozenset(found)
        return self._waits[urn]

    def _ancestors(self, urn: str) -> set[str]:
        found, parent = set(), self.plan[urn].get("parent")
        while parent in self.plan:
            found.add(parent)
            parent = self.plan[parent].get("parent")
        return found

    def _inside(self, component: str) -> list[str]:
        return [urn for child in self.children[component] for urn in (child, *self._inside(child))]


def monthly_cost(plan: dict) -> dict:
    """The monthly running cost, busy and idle, and the hourly rate of the Capacity Blocks prepaid outside the stack."""
    cost = plan.get("cost") or {}
    prepaid = cost.get("prepaid")
    return {
        "busyUsd": cost.get("monthlyUsd"),
        "idleUsd": cost.get("idleMonthlyUsd"),
        "prepaidHourlyUsd": None if prepaid is None else round(sum(block["hourlyUsd"] for block in prepaid), 4),
    }


def existing_in_aws(added: Iterable[str], old: Mapping[str, dict], new: Mapping[str, dict]) -> list[dict]:
    """Added resources AWS already holds for the stack the baseline runs: EKS creates a cluster's control-plane log
    group itself when it first writes to it (EKS User Guide, "Send control plane logs to CloudWatch Logs"), so a
    stack whose cluster predates the platform's own group has one, and `pulumi up` fails to create it
    (ResourceAlreadyExistsException) until it is imported."""
    if not any(r["type"] in tokens.EKS_CLUSTERS for r in old.values()):
        return []
    found = []
    for urn in added:
        name = new[urn]["inputs"].get("name")
        if new[urn]["type"] == tokens.CLOUDWATCH_LOG_GROUP and isinstance(name, str) and CONTROL_PLANE_LOGS.match(name):
            found.append({"urn": urn, "id": name, "why": "EKS created it for the running cluster (README, Clean-up)"})
    return found


CONTROL_PLANE_LOGS = re.compile(r"\A/aws/eks/[^/]+/cluster\Z")


def compare(old_plan: dict, new_plan: dict) -> Impact:
    old = {r["urn"]: r for r in old_plan["resources"]}
    new = {r["urn"]: r for r in new_plan["resources"]}
    impact = Impact(added=sorted(set(new) - set(old)), removed=sorted(set(old) - set(new)))
    impact.cost = {"before": monthly_cost(old_plan), "after": monthly_cost(new_plan)}
    changed = {}
    for urn in sorted(set(old) & set(new)):
        if new[urn]["type"].startswith("pulumi:providers:"):
            continue  # provider inputs (a kubeconfig, a region) change with the resources they configure
        inputs = with_ignored_changes(old[urn]["inputs"], new[urn]["inputs"], new[urn].get("ignoreChanges") or ())
        values = tuple(changed_values(old[urn]["inputs"], inputs))
        if values:
            changed[urn] = (new[urn]["type"], inputs, values)
    waits = Waits(new)
    for urn, (kind, inputs, values) in changed.items():
        paths = tuple(path for path, _, _ in values)
        replace = any(replaces(kind, path) or replaced_by_value(kind, path, a, b, inputs) for path, a, b in values)
        dependents = input_dependents(new, urn) if replace else ()
        after = tuple(sorted(waits.on(urn) & changed.keys()))
        impact.changed.append(Change(urn, paths, replace, replaced_nodes(kind, paths), values, dependents, after))
    # A resource starts after everything it waits for, so each one waits for fewer changed resources than any that
    # waits for it: this order is one `pulumi up` can take.
    impact.changed.sort(key=lambda c: (len(c.after), c.urn))
    impact.drifts = version_moves.version_drifts(old, new)
    impact.node_images = version_moves.node_image_moves(old, new, impact.changed)
    impact.refused = version_moves.refused(impact.changed, new)
    impact.imports = existing_in_aws(impact.added, old, new)
    on_nodes = {d["urn"]: DRIFT for d in impact.drifts}
    on_nodes |= {c.urn: node_replacements.REPLACED if c.replace else c.nodes for c in impact.changed if c.replace or c.nodes}
    impact.nodes_replaced = node_replacements.replaced_groups(new, on_nodes)
    gone = [(c.urn, "replaced") for c in impact.changed if c.replace] + [(urn, "removed") for urn in impact.removed]
    for urn, how in sorted(gone):
        kind = (new.get(urn) or old[urn])["type"]
        if kind in LOST:
            impact.losses.append({"urn": urn, "how": how, "lost": LOST[kind]})
    return impact
