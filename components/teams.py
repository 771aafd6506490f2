"""Teams: a workspace per team the stack declares, in which the team trains through the platform's stack reference.

The platform owns what is cluster-scoped or shared, so that no team can take more than it was given:
- the namespace ``team-<name>``, at the job namespace's Pod Security levels, with a NetworkPolicy that admits
  traffic from its own pods only (the rendezvous etcd admits the team's namespace in turn: ``components/rendezvous``);
- the Volcano queue ``team-<name>`` and a ResourceQuota, both at the team's share of each node group in whole nodes
  times one node's Neuron devices, NeuronCores and EFA interfaces (``trainium_eks.shares``), so every node the team is
  entitled to fits both on every resource (the quota holds whichever queue a job names); both add the groups up, so
  the namespace also carries the team's whole nodes of each group (an annotation per group), by which the admission
  policies hold a pod, and a Job, to the nodes of its group the team holds;
- an EKS access entry per member principal, in a Kubernetes group bound to a Role in the namespace alone;
- admission policies that hold in every team namespace what RBAC cannot (``components/team_admission``): bindings
  to the team's group and own service accounts only, Volcano Jobs and PodGroups on the team's queue only, pods with
  Neuron or EFA devices or the Trainium toleration on the Volcano scheduler and on a group the team holds nodes of, and
  each Job within the team's nodes of its group;
- the team's directory of the FSx file system, ``/teams/<name>``, mounted as the root of the team's own volume: the
  FSx CSI driver mounts ``<dnsname>@tcp:/<mountname>`` from the volume's attributes (aws-fsx-csi-driver
  pkg/driver/node.go, NodePublishVolume), and FSx for Lustre mounts a directory given after the mount name as the root
  of the client's view ("Mounting specific filesets", FSx for Lustre User Guide,
  docs.aws.amazon.com/fsx/latest/LustreGuide/mounting-from-fileset.html), so the team's pods see that directory and
  nothing above it. The volume is bound to the team's claim (claimRef), so no other
  namespace can claim it. A Job of the platform creates the directories, which Lustre needs before it mounts one.
The team's own program (``trainium_eks.team``) adds what is the team's: service accounts, secrets, job templates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import ClusterHandle
from components.kube import system_node_selector
from components.scheduling import pod_security_labels
from components.storage import FsxVolume, static_claim
from components.team_admission import TeamAdmission
from trainium_eks import layout, shares, versions
from trainium_eks.config import StorageConfig, TeamConfig
from trainium_eks.pod_security import restricted_container_security_context, root_pod_security_context

PART_OF = {"app.kubernetes.io/part-of": "trainium-eks"}
DIRECTORY_JOB = "team-directories"
# What a team member may do in the team's namespace, and nothing outside it: run and watch Volcano and batch Jobs,
# read their pods, logs and events, start a pod (a data shell), exec into pods (neuron-top) and port-forward
# (TensorBoard), and keep the team's own service accounts, secrets, config maps, services and Roles (RBAC lets nobody
# grant more than they hold). The quota, the claim and the namespace itself stay the platform's: read-only, or out of
# reach.
MANAGE = ["get", "list", "watch", "create", "update", "patch", "delete"]
READ = ["get", "list", "watch"]
MEMBER_RULES = (
    {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": MANAGE},
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": READ},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": MANAGE},
    {"apiGroups": [""], "resources": ["pods", "pods/log", "events", "persistentvolumeclaims", "resourcequotas"], "verbs": READ},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]},  # a data shell that loads datasets
    {"apiGroups": [""], "resources": ["pods/exec", "pods/portforward"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["serviceaccounts", "secrets", "configmaps", "services"], "verbs": MANAGE},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": MANAGE},
)
QUOTA_PREFIX = "requests."  # extended resources are quota'd by their requests only (Kubernetes docs, Resource Quotas)


def team_quota(team: TeamConfig, groups: Sequence[shares.GroupNodes]) -> dict[str, int]:
    """The team's whole nodes of each group, in extended resources: its queue's capability and its namespace's quota."""
    return shares.share_capability(team.neuron_share, groups)


def group_nodes(team: TeamConfig, groups: Sequence[shares.GroupNodes]) -> dict[str, str]:
    """The namespace's annotations of the team's whole nodes of each group, which the admission policies read."""
    key = layout.TEAM_GROUP_NODES_ANNOTATION
    return {key + g.name: str(shares.entitled_nodes(team.neuron_share, g.max_size)) for g in groups}


@dataclass(frozen=True)
class TeamsArgs:
    teams: Sequence[TeamConfig]
    cluster: ClusterHandle
    node_groups: Sequence[shares.GroupNodes]  # the Trainium node groups (shares.fleet)
    storage: StorageConfig
    file_system_id: pulumi.Input[str]
    file_system_dns_name: pulumi.Input[str]
    file_system_mount_name: pulumi.Input[str]
    job_namespace: pulumi.Input[str]
    root_claim_name: pulumi.Input[str]  # the platform's claim on the whole file system, in the job namespace
    volcano: pulumi.Resource  # queues wait for Volcano's CRDs


class Teams(pulumi.ComponentResource):
    """Every team's workspace; ``contract`` lists them as the output contract publishes them."""

    contract: list[dict]

    def __init__(self, name: str, args: TeamsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:teams:Teams", name, None, opts)
        directories = self._directories(name, args) if args.teams else None
        # A member's access waits for the admission policies, so that nothing of a team is created before they hold.
        admission = (
            [TeamAdmission(f"{name}-admission", args.node_groups, [args.volcano], pulumi.ResourceOptions(parent=self))]
            if args.teams
            else []
        )
        self.contract = [self._workspace(f"{name}-{team.name}", team, args, directories, admission) for team in args.teams]
        self.register_outputs({"teams": self.contract})

    def _directories(self, name: str, args: TeamsArgs) -> k8s.batch.v1.Job:
        """A Job that creates each team's directory, run on a system node with the platform's claim on the root."""
        paths = [layout.FSX_MOUNT_PATH + team.directory for team in args.teams]
        return k8s.batch.v1.Job(
            f"{name}-directories",
            metadata={"name": DIRECTORY_JOB, "namespace": args.job_namespace, "labels": PART_OF},
            spec={
                "backoffLimit": 3,
                "activeDeadlineSeconds": 600,
                "template": {
                    "metadata": {"labels": PART_OF},
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "nodeSelector": system_node_selector(),
                        "automountServiceAccountToken": False,
                        # root, as every writer of the shared volume (README, "What the training pods run as")
                        "securityContext": root_pod_security_context(),
                        "containers": [
                            {
                                "name": "mkdir",
                                "image": versions.SHELL_IMAGE,
                                "command": ["mkdir", "-p", *paths],
                                "securityContext": restricted_container_security_context(),
                                "volumeMounts": [{"name": "shared", "mountPath": layout.FSX_MOUNT_PATH}],
                                "resources": {
                                    "requests": {"cpu": "50m", "memory": "64Mi"},
                                    "limits": {"cpu": "100m", "memory": "64Mi"},
                                },
                            }
                        ],
                        "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": args.root_claim_name}}],
                    },
                },
            },
            # A new team changes the command, which a Job cannot take in place; the fixed name is freed first.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )

    def _workspace(self, name: str, team: TeamConfig, args: TeamsArgs, directories: pulumi.Resource, admission: list) -> dict:
        child = pulumi.ResourceOptions(parent=self)
        labels = {**PART_OF, layout.TEAM_LABEL: team.name}
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={
                "name": team.namespace,
                "labels": {**labels, **pod_security_labels(args.cluster.kubernetes_version)},
                "annotations": group_nodes(team, args.node_groups),
            },
            opts=child,
        )
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        quota = team_quota(team, args.node_groups)
        k8s.apiextensions.CustomResource(
            f"{name}-queue",
            api_version="scheduling.volcano.sh/v1beta1",
            kind="Queue",
            metadata={"name": team.queue, "labels": labels},
            spec={"weight": team.weight, "reclaimable": False, "capability": quota},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.volcano]),
        )
        k8s.core.v1.ResourceQuota(
            f"{name}-quota",
            metadata={"name": "neuron", "namespace": team.namespace, "labels": labels},
            spec={"hard": {QUOTA_PREFIX + resource: str(amount) for resource, amount in quota.items()}},
            opts=in_namespace,
        )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-isolation",
            metadata={"name": "own-pods-only", "namespace": team.namespace, "labels": labels},
            spec={
                "podSelector": {},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {}}]}],  # the namespace's own pods: workers, rank 0's store
            },
            opts=in_namespace,
        )
        self._access(name, team, args, labels, in_namespace, admission)
        claim = self._volume(name, team, args, labels, directories, in_namespace)
        return {
            "name": team.name,
            "namespace": team.namespace,
            "queue": team.queue,
            "weight": team.weight,
            "quota": quota,
            "claimName": claim,
            "fileSystemPath": team.directory,
            "principalArns": list(team.principal_arns),
        }

    def _access(
        self, name: str, team: TeamConfig, args: TeamsArgs, labels: dict, opts: pulumi.ResourceOptions, admission: list
    ) -> None:
        group = layout.team_group(team.name)
        role = k8s.rbac.v1.Role(
            f"{name}-members",
            metadata={"name": "team-members", "namespace": team.namespace, "labels": labels},
            rules=[dict(rule) for rule in MEMBER_RULES],
            opts=opts,
        )
        k8s.rbac.v1.RoleBinding(
            f"{name}-members",
            metadata={"name": "team-members", "namespace": team.namespace, "labels": labels},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.metadata.name},
            subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
            opts=opts,
        )
        for index, arn in enumerate(team.principal_arns):
            # No access policy: the group's RoleBinding is all a member holds (EKS User Guide, "Grant IAM users
            # access to Kubernetes with EKS access entries": kubernetesGroups are bound by Kubernetes RBAC).
            aws.eks.AccessEntry(
                f"{name}-member-{index}",
                cluster_name=args.cluster.name,
                principal_arn=arn,
                type="STANDARD",
                kubernetes_groups=[group],
                tags={**args.cluster.tags, layout.TEAM_LABEL: team.name},
                opts=pulumi.ResourceOptions(parent=self, depends_on=admission),
            )

    def _volume(
        self,
        name: str,
        team: TeamConfig,
        args: TeamsArgs,
        labels: dict,
        directories: pulumi.Resource,
        opts: pulumi.ResourceOptions,
    ) -> str:
        claim_name = args.storage.claim_name
        static_claim(
            f"{name}-fsx",
            FsxVolume(
                volume_name=f"{team.namespace}-{claim_name}",
                namespace=team.namespace,
                claim_name=claim_name,
                capacity_gib=args.storage.capacity_gib,
                # A handle of its own: this volume must never share the platform volume's mount of the root.
                handle=pulumi.Output.concat(args.file_system_id, "::", team.namespace),
                dns_name=args.file_system_dns_name,
                mount_name=pulumi.Output.concat(args.file_system_mount_name, team.directory),
                labels=labels,
                reserved=True,  # this team's claim, no other
            ),
            volume_opts=pulumi.ResourceOptions(parent=self, depends_on=[directories]),
            claim_opts=opts,
        )
        return claim_name
