"""Team nlp's own program on the trainium-eks platform: what is the team's inside the workspace the platform granted.

The platform stack owns the namespace, queue, quota, access, etcd admission and volume (its `teams` key); this
program reads them through the stack reference and adds the team's service account, the Role it runs jobs with, and
the job defaults the team's scripts read.
"""

import json

import pulumi
import pulumi_kubernetes as k8s

from trainium_eks.team import PlatformReference

config = pulumi.Config()
team = config.require("team")
platform = PlatformReference("platform", config.require("platformStack"))
workspace = platform.workspace(team)
opts = workspace.resource_options
labels = {"app.kubernetes.io/managed-by": "pulumi", "trainium-eks/team": team}


def metadata(name: str) -> dict:
    return {"name": name, "namespace": workspace.namespace, "labels": labels}


# A service account for the team's automation (a scheduled job, a CI job that submits training); people use their own
# IAM role, which the platform maps to the team's group.
account = k8s.core.v1.ServiceAccount("trainer", metadata=metadata("trainer"), opts=opts)
role = k8s.rbac.v1.Role(
    "trainer",
    metadata=metadata("trainer"),
    rules=[
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
    ],
    opts=opts,
)
k8s.rbac.v1.RoleBinding(
    "trainer",
    metadata=metadata("trainer"),
    role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.metadata.name},
    subjects=[{"kind": "ServiceAccount", "name": account.metadata.name, "namespace": workspace.namespace}],
    opts=opts,
)


def job_defaults(view) -> dict:
    return {
        "namespace": view.job_namespace,
        "queue": view.queues[0],
        "claimName": view.fsx_claim_name,
        "etcdEndpoint": view.etcd_endpoint,
        "checkpointsPath": view.checkpoints_path,
        "datasetsPath": view.datasets_path,
        # each node group's training image, the one its generation trains with (JSON: a ConfigMap holds strings)
        "trainingImages": json.dumps({group.name: view.software(group).training_image for group in view.node_groups}),
    }


defaults = k8s.core.v1.ConfigMap(
    "job-defaults", metadata=metadata("job-defaults"), data=workspace.view.apply(job_defaults), opts=opts
)

pulumi.export("namespace", workspace.namespace)
pulumi.export("queue", workspace.queue)
pulumi.export("claimName", workspace.claim_name)
pulumi.export("serviceAccount", account.metadata.name)
pulumi.export("platformContractVersion", platform.get("version"))
