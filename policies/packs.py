"""The three policy packs, assembled from the pure rules in ``policies/rules``.

Each rule becomes a pulumi_policy policy through the adapters in ``policies/adapters.py``.

Only ``serve()``, called from each pack's ``__main__.py``, constructs a ``PolicyPack`` (which starts the
analyzer's gRPC server and never returns).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    Severity,
)

from policies.adapters import resource_policy, stack_policy
from policies.rules import cost, deploy_path, images, nodes, repair, security, topology, workloads
from trainium_eks import tokens

POLICIES_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Pack:
    name: str
    description: str
    enforcement_level: EnforcementLevel
    policies: tuple

    @property
    def directory(self) -> Path:
        return POLICIES_DIR / self.name

    @property
    def version(self) -> str:
        return str(yaml.safe_load((self.directory / "PulumiPolicy.yaml").read_text())["version"])


EKS_TYPES = (security.EKS_COMPONENT, security.EKS_CLUSTER)
LOG_TYPES_SCHEMA = {"type": "array", "items": {"type": "string", "enum": security.CONTROL_PLANE_LOG_TYPES}}

TRAINIUM_TOPOLOGY = Pack(
    name="trainium-topology",
    description="What distributed training on Trainium needs: one AZ, EFA on every network card, cluster placement, "
    "the Neuron AMI, device plugins, FSx next to the nodes, queues within capacity, etcd with the v2 API, "
    "and failed nodes repaired.",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=(
        stack_policy(
            "trainium-node-group-single-az",
            "Trainium node groups stay in exactly one AZ.",
            Severity.HIGH,
            topology.node_group_single_az,
        ),
        stack_policy(
            "trainium-efa-interface-per-network-card",
            "Trainium launch templates attach one EFA per network card in the catalog's EC2-recommended layout.",
            Severity.HIGH,
            topology.efa_interface_per_network_card,
        ),
        stack_policy(
            "trainium-cluster-placement-group",
            "Multi-node EFA Trainium groups launch in a cluster placement group.",
            Severity.HIGH,
            topology.cluster_placement_group,
        ),
        resource_policy(
            "trainium-neuron-ami",
            "Trainium nodes run the EKS-optimised Neuron AMI.",
            Severity.HIGH,
            topology.neuron_ami,
            (tokens.EKS_NODE_GROUP,),
        ),
        stack_policy(
            "efa-security-group-self-traffic",
            "EFA interfaces carry a security group open to itself both ways.",
            Severity.HIGH,
            topology.efa_security_group_self_traffic,
        ),
        stack_policy(
            "trainium-az-offers-instance-type",
            "The Trainium AZ offers the node group's instance type.",
            Severity.HIGH,
            topology.az_offers_instance_type,
        ),
        stack_policy(
            "fsx-lustre-in-trainium-az",
            "FSx for Lustre sits in the Trainium nodes' AZ.",
            Severity.MEDIUM,
            topology.fsx_in_trainium_az,
        ),
        stack_policy(
            "fsx-lustre-ports-reachable",
            "FSx for Lustre is reachable on TCP 988 and 1018-1023.",
            Severity.HIGH,
            topology.fsx_lustre_ports,
        ),
        stack_policy(
            "neuron-and-efa-device-plugins",
            "Neuron and EFA device plugins exist and tolerate the Trainium taint.",
            Severity.HIGH,
            topology.device_plugins_present,
        ),
        stack_policy(
            "eks-images-from-stack-region",
            "EKS-published images (the EFA device plugin's) are pulled from the stack's own region.",
            Severity.MEDIUM,
            images.eks_images_from_stack_region,
        ),
        stack_policy(
            "volcano-queue-within-capacity",
            "A Volcano queue exists and asks for no more than is provisioned.",
            Severity.MEDIUM,
            topology.volcano_queue_within_capacity,
        ),
        resource_policy(
            "etcd-pinned-with-v2-api",
            "etcd for rendezvous is a pinned 3.5 release with the v2 API on.",
            Severity.MEDIUM,
            topology.etcd_pinned_with_v2_api,
            topology.WORKLOAD_TYPES,
        ),
        stack_policy(
            "capacity-reservation-in-trainium-az",
            "Capacity reservations are in the Trainium AZ.",
            Severity.HIGH,
            topology.capacity_reservation_in_trainium_az,
        ),
        stack_policy(
            "trainium-node-auto-repair",
            "Trainium node groups repair failed nodes where required, with the node monitoring agent to see Neuron faults.",
            Severity.HIGH,
            repair.trainium_node_auto_repair,
            config={"requireNodeRepair": {"type": "boolean", "default": False}},
        ),
    ),
)

SECURITY_BASELINE = Pack(
    name="security-baseline",
    description="Instance metadata, encryption at rest, control-plane access and logging, network exposure, IAM, "
    "pinned images and charts, and protection of stateful resources.",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=(
        resource_policy(
            "ec2-launch-template-imdsv2-required",
            "Launch templates require IMDSv2 and keep its answers on the node (hop limit 1).",
            Severity.HIGH,
            security.imdsv2_required,
            (security.LAUNCH_TEMPLATE,),
            config={"maxHopLimit": {"type": "integer", "minimum": 1, "maximum": 64, "default": 1}},
        ),
        resource_policy(
            "ec2-launch-template-encrypted-block-devices",
            "Launch templates encrypt every EBS volume.",
            Severity.HIGH,
            security.encrypted_block_devices,
            (security.LAUNCH_TEMPLATE,),
        ),
        resource_policy(
            "kms-encryption-at-rest",
            "EKS Secrets, persistent FSx and ECR are encrypted with KMS.",
            Severity.HIGH,
            security.kms_encryption_at_rest,
            (*EKS_TYPES, security.FSX, security.ECR),
        ),
        resource_policy(
            "eks-control-plane-logging",
            "EKS sends the control-plane logs to CloudWatch.",
            Severity.MEDIUM,
            security.control_plane_logging,
            (security.EKS_COMPONENT,),
            config={"requiredLogTypes": {**LOG_TYPES_SCHEMA, "default": security.CONTROL_PLANE_LOG_TYPES}},
        ),
        resource_policy(
            "eks-authentication-mode-api",
            "EKS authenticates through access entries (API mode).",
            Severity.HIGH,
            security.authentication_mode_api,
            EKS_TYPES,
        ),
        resource_policy(
            "eks-endpoint-public-access",
            "The EKS API endpoint is private unless allowed and CIDR-restricted.",
            Severity.CRITICAL,
            security.endpoint_public_access,
            EKS_TYPES,
            config={"allowPublicEndpoint": {"type": "boolean", "default": False}},
        ),
        stack_policy(
            "private-endpoint-in-vpc-runner",
            "A cluster with a private-only endpoint has a CodeBuild runner in its VPC that it admits on 443.",
            Severity.HIGH,
            deploy_path.private_endpoint_has_in_vpc_runner,
            config={"requireInVpcRunner": {"type": "boolean", "default": True}},
        ),
        resource_policy(
            "security-group-no-world-ingress",
            "No security group ingress from 0.0.0.0/0 or ::/0.",
            Severity.CRITICAL,
            security.no_world_ingress,
            (security.SECURITY_GROUP, security.SECURITY_GROUP_RULE, security.VPC_INGRESS_RULE),
        ),
        resource_policy(
            "iam-no-wildcard-admin",
            "No IAM policy allows every action on every resource.",
            Severity.CRITICAL,
            security.iam_no_wildcard_admin,
            (*security.IAM_POLICY_TYPES, security.IAM_ROLE),
        ),
        stack_policy(
            "irsa-no-full-access-policies",
            "Service-account roles carry no *FullAccess managed policy.",
            Severity.HIGH,
            security.irsa_no_full_access,
        ),
        resource_policy(
            "ecr-immutable-scan-on-push",
            "ECR repositories have immutable tags and scan on push.",
            Severity.HIGH,
            security.ecr_immutable_scan_on_push,
            (security.ECR,),
        ),
        resource_policy(
            "container-images-pinned",
            "Workloads run images with an exact tag or digest, never latest.",
            Severity.HIGH,
            security.images_pinned,
            (*security.POD_TEMPLATE_TYPES, security.POD, security.CRON_JOB),
        ),
        resource_policy(
            "helm-release-pinned",
            "Helm releases pin an exact chart version from an allowed repository.",
            Severity.HIGH,
            security.helm_release_pinned,
            (security.HELM_RELEASE, security.HELM_CHART),
            config={
                "allowedRepositories": {
                    "type": "array",
                    "items": {"type": "string"},
                    "default": security.DEFAULT_ALLOWED_CHART_REPOSITORIES,
                }
            },
        ),
        resource_policy(
            "no-public-load-balancer",
            "No Service is a public LoadBalancer (TensorBoard stays internal).",
            Severity.HIGH,
            security.no_public_load_balancer,
            (security.SERVICE,),
            config={"allowedServices": {"type": "array", "items": {"type": "string"}, "default": []}},
        ),
        stack_policy(
            "stateful-resources-protected",
            "Clusters, file systems, registries and keys are protected.",
            Severity.HIGH,
            security.stateful_resources_protected,
            config={"requireProtection": {"type": "boolean", "default": False}},
        ),
        stack_policy(
            "node-role-least-privilege",
            "Node roles hold no VPC CNI permissions and pull images with AmazonEC2ContainerRegistryPullOnly.",
            Severity.HIGH,
            nodes.node_role_least_privilege,
        ),
        stack_policy(
            "etcd-quorum-disruption-budget",
            "An etcd of several members has a PodDisruptionBudget that keeps its majority up.",
            Severity.HIGH,
            workloads.etcd_quorum_disruption_budget,
        ),
        stack_policy(
            "etcd-access-restricted",
            "etcd admits only chosen clients, under a NetworkPolicy the VPC CNI enforces.",
            Severity.HIGH,
            workloads.etcd_access_restricted,
        ),
        resource_policy(
            "service-account-token-off",
            "Workloads without a service account of their own mount no service-account token.",
            Severity.MEDIUM,
            workloads.service_account_token_off,
            workloads.WORKLOAD_TYPES,
        ),
        resource_policy(
            "workload-liveness-probes",
            "Every container of the platform's workloads has a liveness probe.",
            Severity.MEDIUM,
            workloads.liveness_probes,
            workloads.WORKLOAD_TYPES,
        ),
        resource_policy(
            "namespace-pod-security",
            "The platform's namespaces enforce a Pod Security Standard (baseline or restricted).",
            Severity.HIGH,
            workloads.namespace_pod_security,
            (tokens.K8S_NAMESPACE,),
        ),
    ),
)

COST_GUARD = Pack(
    name="cost-guard",
    description="Trainium node ceilings, a monthly budget on the estimated cost, and the tags cost reports need.",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=(
        stack_policy(
            "trainium-node-limit",
            "Trainium node groups cannot grow past the stack's node limit.",
            Severity.HIGH,
            cost.trainium_node_limit,
            config={"maxTrainiumNodes": {"type": "integer", "minimum": 0, "default": 16}},
        ),
        stack_policy(
            "monthly-cost-budget",
            "The estimated monthly cost stays within the stack's budget.",
            Severity.HIGH,
            cost.monthly_cost_budget,
            config={"maxMonthlyUsd": {"type": "number", "minimum": 0, "default": 100000}},
        ),
        resource_policy(
            "required-tags",
            "Taggable AWS resources carry environment, owner and cost-center tags.",
            Severity.MEDIUM,
            cost.required_tags,
            tuple(cost.TAGGABLE_TYPES),
            remediation=cost.add_default_tags,
            config={
                "requiredTags": {"type": "array", "items": {"type": "string"}, "default": cost.DEFAULT_REQUIRED_TAGS},
                "defaultTags": {"type": "object", "additionalProperties": {"type": "string"}, "default": {}},
            },
        ),
    ),
)

PACKS = (TRAINIUM_TOPOLOGY, SECURITY_BASELINE, COST_GUARD)


def serve(name: str) -> None:
    """Run pack ``name`` as a CrossGuard analyzer (blocks until the engine stops it)."""
    pack = next(p for p in PACKS if p.name == name)
    PolicyPack(
        name=pack.name, policies=list(pack.policies), enforcement_level=pack.enforcement_level, description=pack.description
    )
