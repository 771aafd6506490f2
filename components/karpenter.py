"""Karpenter: the controller that brings elastic Trainium nodes when a job's pods wait, and takes them away when idle.

What AWS's Karpenter 1.14 guide sets up (getting-started-with-karpenter: cloudformation.yaml and the Helm steps),
built here as resources that tests and policies can read:
- the controller's role on IRSA (``kube-system/karpenter``), with the reference template's policies, scoped to this
  cluster by tag and region (``components/karpenter_iam.py``);
- its own node role (worker, registry pull and SSM policies, as every node of the platform: the VPC CNI's permissions
  stay with the vpc-cni add-on's role) and that role's EKS access entry of type ``EC2_LINUX``, which lets the nodes
  join (EKS API, CreateAccessEntry); Karpenter makes the instance profile from the EC2NodeClass's ``role``;
- the interruption queue (SQS, 5-minute retention, SSE, TLS only) and the EventBridge rules that feed it, so a
  scheduled change, a capacity reservation's end or a state change drains a node before EC2 takes it;
- the CRDs from the karpenter-crd chart, then the controller chart: two replicas on the system nodes, a
  PodDisruptionBudget of one, the cluster's name and endpoint and the queue, and node repair when the stack repairs
  nodes (the ``nodeRepair`` feature gate, which acts on the node monitoring agent's conditions).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.cluster import ClusterHandle
from components.irsa import irsa_role
from components.karpenter_iam import INTERRUPTION_EVENTS, controller_policies, interruption_queue_policy
from components.kube import helm_release, system_node_selector
from components.node_role import node_role as node_role_with_policies
from trainium_eks import versions

NAMESPACE = "kube-system"  # the guide's default, where Karpenter benefits from the system FlowSchemas
SERVICE_ACCOUNT = "karpenter"
CONTROLLER_REPLICAS = 2  # the chart's default: one per system node (its anti-affinity), spread over zones
# The guide's Helm step sets 1 CPU and 1 GiB as both request and limit (step08-apply-helm-chart.sh).
CONTROLLER_RESOURCES = {"cpu": "1", "memory": "1Gi"}
INTERRUPTION_RETENTION_SECONDS = 300  # MessageRetentionPeriod of the template's KarpenterInterruptionQueue


@dataclass(frozen=True)
class KarpenterArgs:
    cluster: ClusterHandle  # the controller runs on its system nodes, never on the nodes it manages
    node_repair: bool  # the stack repairs failed Trainium nodes


def controller_values(args: KarpenterArgs, role_arn: pulumi.Input[str], queue_name: pulumi.Input[str]) -> dict:
    """The controller chart's values (charts/karpenter/values.yaml at v1.14.1)."""
    return {
        "settings": {
            "clusterName": args.cluster.config_name,
            "clusterEndpoint": args.cluster.endpoint,
            "interruptionQueue": queue_name,
            # reservedCapacity (the chart's default, true) lets pools launch into ODCRs and Capacity Blocks.
            "featureGates": {"nodeRepair": args.node_repair, "reservedCapacity": True},
        },
        "replicas": CONTROLLER_REPLICAS,
        "podDisruptionBudget": {"name": "karpenter", "maxUnavailable": 1},
        "serviceAccount": {"name": SERVICE_ACCOUNT, "annotations": {"eks.amazonaws.com/role-arn": role_arn}},
        "nodeSelector": {"kubernetes.io/os": "linux", **system_node_selector()},
        "controller": {"resources": {"requests": dict(CONTROLLER_RESOURCES), "limits": dict(CONTROLLER_RESOURCES)}},
    }


class Karpenter(pulumi.ComponentResource):
    """Karpenter's AWS side and its Helm releases; elastic node pools wait for ``controller``."""

    node_role_name: pulumi.Output[str]
    controller: pulumi.Resource

    def __init__(self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:compute:Karpenter", name, None, opts)
        tags = dict(args.cluster.tags)
        child = pulumi.ResourceOptions(parent=self)

        node_role, node_policies = node_role_with_policies(
            f"{name}-node",
            description=f"Instance role of the Karpenter nodes of {args.cluster.config_name}",
            tags=tags,
            parent=self,
        )
        access = aws.eks.AccessEntry(
            f"{name}-node",
            cluster_name=args.cluster.config_name,
            principal_arn=node_role.arn,
            type="EC2_LINUX",
            tags=tags,
            opts=child,
        )

        queue = aws.sqs.Queue(
            f"{name}-interruption",
            name=f"{args.cluster.config_name}-karpenter",
            message_retention_seconds=INTERRUPTION_RETENTION_SECONDS,
            sqs_managed_sse_enabled=True,
            tags=tags,
            opts=child,
        )
        aws.sqs.QueuePolicy(f"{name}-interruption", queue_url=queue.url, policy=interruption_queue_policy(queue.arn), opts=child)
        for rule_name, source, detail_type in INTERRUPTION_EVENTS:
            rule = aws.cloudwatch.EventRule(
                f"{name}-{rule_name}",
                description=f"{detail_type} events for Karpenter of {args.cluster.config_name}",
                event_pattern=pulumi.Output.json_dumps({"source": [source], "detail-type": [detail_type]}),
                tags=tags,
                opts=child,
            )
            aws.cloudwatch.EventTarget(f"{name}-{rule_name}", rule=rule.name, arn=queue.arn, opts=child)

        role = irsa_role(
            f"{name}-controller",
            description=f"Karpenter controller of {args.cluster.config_name}",
            oidc_provider_arn=args.cluster.oidc_provider_arn,
            oidc_issuer=args.cluster.oidc_issuer,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            tags=tags,
            parent=self,
        )
        documents = controller_policies(
            region=args.cluster.region, cluster_name=args.cluster.config_name, node_role_arn=node_role.arn, queue_arn=queue.arn
        )
        grants = []
        for policy_name, document in documents.items():
            policy = aws.iam.Policy(
                f"{name}-{policy_name}",
                name=f"KarpenterController{policy_name}-{args.cluster.config_name}",
                description=f"Karpenter {policy_name} of {args.cluster.config_name} (the 1.14 reference template's)",
                policy=document,
                tags=tags,
                opts=child,
            )
            grants.append(
                aws.iam.RolePolicyAttachment(f"{name}-{policy_name}", role=role.name, policy_arn=policy.arn, opts=child)
            )

        # CRDs from their own chart, so that an upgrade of the pinned version upgrades them too (upgrade guide).
        crds = helm_release(name, "karpenter-crd", versions.KARPENTER_CRD_CHART, namespace=NAMESPACE, values={}, parent=self)
        self.controller = helm_release(
            name,
            "karpenter",
            versions.KARPENTER_CHART,
            namespace=NAMESPACE,
            values=controller_values(args, role.arn, queue.name),
            parent=self,
            skip_crds=True,
            depends_on=[crds, args.cluster.system_nodes, access, *node_policies, *grants],
        )
        self.node_role_name = node_role.name
        self.register_outputs({"nodeRoleName": self.node_role_name, "interruptionQueue": queue.name})
