"""A team's namespace on the trainium-eks platform: queue, service account, RBAC and the shared file system."""

import pulumi
import pulumi_kubernetes as k8s
from platform_reference import PlatformReference

config = pulumi.Config()
team = config.require("team")
share = float(config.get("neuronShare") or "0.25")
if not 0 < share <= 1:
    raise pulumi.RunError(f"team-namespace:neuronShare: {share} is outside (0, 1]; use a fraction such as 0.25")

platform = PlatformReference("platform", config.require("platformStack"))
provider = k8s.Provider("platform", kubeconfig=platform.kubeconfig, enable_server_side_apply=True)
opts = pulumi.ResourceOptions(provider=provider)
labels = {"app.kubernetes.io/part-of": "trainium-eks", "trainium-eks/team": team}

namespace = k8s.core.v1.Namespace("team", metadata={"name": team, "labels": labels}, opts=opts)


def team_capability(contract) -> dict:
    devices = sum(g.max_size * g.neuron_devices_per_node for g in contract.node_groups)
    cores = sum(g.max_size * g.neuron_cores_per_node for g in contract.node_groups)
    return {"aws.amazon.com/neuron": int(devices * share), "aws.amazon.com/neuroncore": int(cores * share)}


queue = k8s.apiextensions.CustomResource(
    "team-queue",
    api_version="scheduling.volcano.sh/v1beta1",
    kind="Queue",
    metadata={"name": team, "labels": labels},
    spec={"weight": 1, "reclaimable": True, "capability": platform.contract.apply(team_capability)},
    opts=opts,
)
account = k8s.core.v1.ServiceAccount(
    "trainer", metadata={"name": f"{team}-trainer", "namespace": namespace.metadata.name, "labels": labels}, opts=opts
)
role = k8s.rbac.v1.Role(
    "trainer",
    metadata={"name": f"{team}-trainer", "namespace": namespace.metadata.name, "labels": labels},
    rules=[
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list"]},
    ],
    opts=opts,
)
k8s.rbac.v1.RoleBinding(
    "trainer",
    metadata={"name": f"{team}-trainer", "namespace": namespace.metadata.name, "labels": labels},
    role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.metadata.name},
    subjects=[{"kind": "ServiceAccount", "name": account.metadata.name, "namespace": namespace.metadata.name}],
    opts=opts,
)

# The platform's FSx file system, mounted in this namespace through a static volume of its own (claims are
# namespaced, so the platform's claim cannot be shared across namespaces).
volume = k8s.core.v1.PersistentVolume(
    "shared",
    metadata={"name": f"{team}-shared", "labels": labels},
    spec={
        "capacity": {"storage": "1200Gi"},
        "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "mountOptions": ["flock"],
        "csi": {
            "driver": "fsx.csi.aws.com",
            "volumeHandle": platform.get("fsx_file_system_id"),
            "volumeAttributes": {"dnsname": platform.get("fsx_dns_name"), "mountname": platform.get("fsx_mount_name")},
        },
    },
    opts=opts,
)
claim = k8s.core.v1.PersistentVolumeClaim(
    "shared",
    metadata={"name": "shared", "namespace": namespace.metadata.name, "labels": labels},
    spec={
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "",
        "volumeName": volume.metadata.name,
        "resources": {"requests": {"storage": "1200Gi"}},
    },
    opts=opts,
)

pulumi.export("namespace", namespace.metadata.name)
pulumi.export("queue", queue.metadata["name"])
pulumi.export("serviceAccount", account.metadata.name)
pulumi.export("claimName", claim.metadata.name)
pulumi.export("platformContractVersion", platform.get("version"))
