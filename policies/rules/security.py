"""Security baseline rules: instance metadata, encryption, control plane, network exposure, IAM, images, charts."""

from __future__ import annotations

import re
from collections.abc import Iterator

from plan_graph.graph import Graph, Node, dig, is_unknown, known
from policies.rules import Violation, describe, listed, shown
from policies.rules.network import internet_covered, internet_exposures, parse_cidrs, sources_of, traffic_of
from trainium_eks import tokens

LAUNCH_TEMPLATE = tokens.EC2_LAUNCH_TEMPLATE
NODE_CLASS = tokens.KARPENTER_NODE_CLASS  # the launch template Karpenter renders for an elastic pool
NODE_TEMPLATE_TYPES = (LAUNCH_TEMPLATE, NODE_CLASS)
# What an EC2NodeClass without metadataOptions gets (CRD v1.14.1 default); an unset launch template leaves EC2's.
NODE_CLASS_METADATA_DEFAULT = {"httpTokens": "required", "httpPutResponseHopLimit": 1}
EKS_COMPONENT = tokens.EKS_COMPONENT_CLUSTER
EKS_CLUSTER = tokens.EKS_CLUSTER
FSX = tokens.FSX_LUSTRE_FILE_SYSTEM
ECR = tokens.ECR_REPOSITORY
KMS_KEY = tokens.KMS_KEY
SECURITY_GROUP = tokens.EC2_SECURITY_GROUP
SECURITY_GROUP_RULE = tokens.EC2_SECURITY_GROUP_RULE
VPC_INGRESS_RULE = tokens.VPC_SECURITY_GROUP_INGRESS_RULE
HELM_RELEASE = tokens.HELM_RELEASE
HELM_CHART = tokens.HELM_CHART
SERVICE = tokens.K8S_SERVICE
POD_TEMPLATE_TYPES = (
    tokens.K8S_DEPLOYMENT,
    tokens.K8S_STATEFUL_SET,
    tokens.K8S_DAEMON_SET,
    tokens.K8S_JOB,
)
POD = tokens.K8S_POD
CRON_JOB = tokens.K8S_CRON_JOB
STATEFUL_TYPES = (FSX, ECR, KMS_KEY, EKS_COMPONENT, EKS_CLUSTER)
CONTROL_PLANE_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
EXACT_VERSION = re.compile(r"\Av?\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?\Z", re.ASCII)
INTERNAL_LB_ANNOTATIONS = {
    "service.beta.kubernetes.io/aws-load-balancer-internal": ("true",),
    "service.beta.kubernetes.io/aws-load-balancer-scheme": ("internal",),
}
DEFAULT_ALLOWED_CHART_REPOSITORIES = [
    "oci://public.ecr.aws/neuron",
    "oci://public.ecr.aws/karpenter",
    "https://aws.github.io/eks-charts",
    "https://volcano-sh.github.io/helm-charts",
    "https://kubernetes-sigs.github.io/aws-fsx-csi-driver",
]


def _true(value) -> bool:
    # pulumi-aws sends some booleans of launch templates as the strings "true"/"false" (pulumi-aws#2257).
    return value is True or value == "true"


def _node_settings(node: Node) -> tuple[dict, dict]:
    """A launch template's inputs, or an EC2NodeClass's spec, and the metadata options an unset field takes."""
    if node.type == NODE_CLASS:
        spec = node.props.get("spec")
        return (spec if isinstance(spec, dict) else {}), NODE_CLASS_METADATA_DEFAULT
    return node.props, {}


def imdsv2_required(node: Node, config: dict) -> Iterator[Violation]:
    props, defaults = _node_settings(node)
    tokens = dig(props, "metadataOptions", "httpTokens", default=defaults.get("httpTokens"))
    if not is_unknown(tokens) and tokens != "required":
        yield Violation(
            node.urn, f"{describe(node)} allows IMDSv1 (httpTokens={tokens!r}); set metadataOptions.httpTokens to 'required'"
        )
    hops = dig(props, "metadataOptions", "httpPutResponseHopLimit", default=defaults.get("httpPutResponseHopLimit"))
    allowed = config.get("maxHopLimit", 1)
    if hops is not None and not is_unknown(hops) and (not isinstance(hops, (int, float)) or hops > allowed):  # unset: 1
        yield Violation(
            node.urn,
            f"{describe(node)} lets IMDS answers travel {shown(hops)!r} hops, so pods can take the node role's credentials; "
            f"set metadataOptions.httpPutResponseHopLimit to {shown(allowed)} (or raise maxHopLimit for a pod that needs it)",
        )


def encrypted_block_devices(node: Node, config: dict) -> Iterator[Violation]:
    for mapping in listed(_node_settings(node)[0].get("blockDeviceMappings")):
        if not isinstance(mapping, dict):
            yield Violation(node.urn, f"{describe(node)} has a block device mapping {mapping!r} that is not an object")
            continue
        encrypted = dig(mapping, "ebs", "encrypted")
        if not is_unknown(encrypted) and mapping.get("ebs") is not None and not _true(encrypted):
            yield Violation(node.urn, f"{describe(node)} maps {mapping.get('deviceName')} unencrypted; set ebs.encrypted")


def kms_encryption_at_rest(node: Node, config: dict) -> Iterator[Violation]:
    if node.type == EKS_COMPONENT and not node.props.get("encryptionConfigKeyArn"):
        yield Violation(node.urn, f"{describe(node)} does not envelope-encrypt Secrets; set encryptionConfigKeyArn to a KMS key")
    elif node.type == EKS_CLUSTER and not dig(node.props, "encryptionConfig", "provider", "keyArn"):
        yield Violation(node.urn, f"{describe(node)} does not envelope-encrypt Secrets; add an encryptionConfig with a KMS key")
    elif node.type == FSX:
        deployment = node.props.get("deploymentType")
        # Scratch file systems are always encrypted with FSx-managed keys and take no customer key.
        if isinstance(deployment, str) and deployment.startswith("PERSISTENT") and not node.props.get("kmsKeyId"):
            yield Violation(node.urn, f"{describe(node)} ({deployment}) has no KMS key; set kmsKeyId")
    elif node.type == ECR:
        kinds = [c.get("encryptionType") for c in listed(node.props.get("encryptionConfigurations")) if isinstance(c, dict)]
        if "KMS" not in kinds:
            yield Violation(
                node.urn,
                f"{describe(node)} is encrypted with AES256 only; set encryptionConfigurations to [{{encryptionType: KMS}}]",
            )


def control_plane_logging(node: Node, config: dict) -> Iterator[Violation]:
    required = config.get("requiredLogTypes") or CONTROL_PLANE_LOG_TYPES
    enabled = node.props.get("enabledClusterLogTypes")
    if not known(enabled):
        return
    missing = [t for t in required if t not in listed(enabled)]
    if missing:
        yield Violation(node.urn, f"{describe(node)} does not log {', '.join(missing)}; add them to enabledClusterLogTypes")


def authentication_mode_api(node: Node, config: dict) -> Iterator[Violation]:
    mode = (
        node.props.get("authenticationMode")
        if node.type == EKS_COMPONENT
        else dig(node.props, "accessConfig", "authenticationMode")
    )
    if not is_unknown(mode) and mode != "API":
        yield Violation(
            node.urn,
            f"{describe(node)} uses authentication mode {mode or 'CONFIG_MAP (the default)'}; set "
            "it to API and grant access with access entries",
        )


def endpoint_public_access(node: Node, config: dict) -> Iterator[Violation]:
    props = node.props if node.type == EKS_COMPONENT else node.props.get("vpcConfig")
    if is_unknown(props):
        return
    public = props.get("endpointPublicAccess") if isinstance(props, dict) else None
    if node.type == EKS_COMPONENT and public is None:
        public = True  # pulumi-eks's default
    if is_unknown(public) or not public:
        return
    if not config.get("allowPublicEndpoint", False):
        yield Violation(
            node.urn,
            f"{describe(node)} has a public API endpoint, which this stack's policy config forbids; "
            "set endpointPublicAccess to false and reach the API from the VPC",
        )
        return
    given = props.get("publicAccessCidrs")
    cidrs = parse_cidrs(given, "publicAccessCidrs")
    if cidrs.malformed:
        yield Violation(
            node.urn,
            f"{describe(node)} has values that are not CIDRs ({'; '.join(cidrs.malformed)}); write each range as "
            "address/prefix, e.g. 203.0.113.0/24",
        )
    if given in (None, []):
        open_to = "no publicAccessCidrs, which EKS reads as 0.0.0.0/0"
    else:
        open_to = ", ".join(f"publicAccessCidrs cover {internet}" for internet in internet_covered(cidrs.networks))
    if open_to:
        yield Violation(
            node.urn,
            f"{describe(node)} has a public API endpoint open to the internet ({open_to}); "
            "restrict publicAccessCidrs to known ranges",
        )


def no_world_ingress(node: Node, config: dict) -> Iterator[Violation]:
    if node.type == SECURITY_GROUP:
        rules = node.props.get("ingress") or []
    elif node.type == SECURITY_GROUP_RULE:
        rules = [node.props] if node.props.get("type") == "ingress" else []
    else:
        rules = [node.props]
    readable = []
    for rule in rules if isinstance(rules, list) else []:
        traffic = traffic_of(rule) if isinstance(rule, dict) else None
        if traffic is None:
            continue
        sources = sources_of(rule)
        if sources.malformed:
            yield Violation(
                node.urn,
                f"{describe(node)} has ingress sources that are not CIDRs ({'; '.join(sources.malformed)}); write each "
                "range as address/prefix, e.g. 10.0.0.0/16",
            )
        if traffic.ports is None:
            yield Violation(
                node.urn,
                f"{describe(node)} has a {traffic.protocol} ingress rule whose ports {shown(rule.get('fromPort'))!r}-"
                f"{shown(rule.get('toPort'))!r} are not a port range; use whole ports 0-65535 with fromPort <= toPort",
            )
        readable.append((traffic, sources.networks))
    # Rules add up: two halves of the internet in two rules on the same port let the whole internet in.
    for exposure in internet_exposures(readable):
        yield Violation(
            node.urn,
            f"{describe(node)} allows ingress from the whole IPv{exposure.internet.version} internet "
            f"({', '.join(map(str, exposure.networks))}) on {exposure.traffic}; restrict the source to known "
            "ranges or security groups",
        )


def ecr_immutable_scan_on_push(node: Node, config: dict) -> Iterator[Violation]:
    mutability = node.props.get("imageTagMutability", "MUTABLE")
    if not is_unknown(mutability) and not str(mutability).startswith("IMMUTABLE"):
        yield Violation(node.urn, f"{describe(node)} has mutable tags; set imageTagMutability to IMMUTABLE")
    if dig(node.props, "imageScanningConfiguration", "scanOnPush") is not True:
        yield Violation(node.urn, f"{describe(node)} does not scan on push; set imageScanningConfiguration.scanOnPush")


def _pod_specs(node: Node) -> list[dict]:
    if node.type == POD:
        specs = [node.props.get("spec")]
    elif node.type == CRON_JOB:
        specs = [dig(node.props, "spec", "jobTemplate", "spec", "template", "spec")]
    else:
        specs = [dig(node.props, "spec", "template", "spec")]
    return [s for s in specs if isinstance(s, dict)]


def images_pinned(node: Node, config: dict) -> Iterator[Violation]:
    for spec in _pod_specs(node):
        for container in [*listed(spec.get("initContainers")), *listed(spec.get("containers"))]:
            image = container.get("image") if isinstance(container, dict) else None
            if not isinstance(image, str) or is_unknown(image):
                continue
            last_part = image.rsplit("/", 1)[-1]
            tag = last_part.rpartition(":")[2] if ":" in last_part else ""
            if "@sha256:" not in image and (not tag or tag == "latest"):
                yield Violation(
                    node.urn, f"{describe(node)} runs image '{image}' without a pinned tag; use an exact version tag or a digest"
                )


def helm_release_pinned(node: Node, config: dict) -> Iterator[Violation]:
    allowed = config.get("allowedRepositories") or DEFAULT_ALLOWED_CHART_REPOSITORIES
    version = node.props.get("version")
    chart = node.props.get("chart")
    if is_unknown(version) or is_unknown(chart):
        return
    if not isinstance(version, str) or not EXACT_VERSION.match(version):
        yield Violation(
            node.urn, f"{describe(node)} installs chart {chart} at version {version!r}; pin an exact chart version (e.g. 1.2.3)"
        )
    repository = dig(node.props, "repositoryOpts", "repo") or (
        chart.rsplit("/", 1)[0] if str(chart).startswith("oci://") else None
    )
    if is_unknown(repository):
        return
    if not isinstance(repository, str) or repository.rstrip("/") not in [str(r).rstrip("/") for r in allowed]:
        yield Violation(
            node.urn,
            f"{describe(node)} installs {chart} from {repository or 'an unnamed repository'}, "
            f"which is not an allowed chart repository ({', '.join(allowed)})",
        )


def no_public_load_balancer(node: Node, config: dict) -> Iterator[Violation]:
    if dig(node.props, "spec", "type") != "LoadBalancer":
        return
    name = dig(node.props, "metadata", "name")
    if isinstance(name, str) and name in (config.get("allowedServices") or []):
        return
    annotations = dig(node.props, "metadata", "annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    if not any(annotations.get(k) in values for k, values in INTERNAL_LB_ANNOTATIONS.items()):
        yield Violation(
            node.urn,
            f"{describe(node)} is a public LoadBalancer; use a ClusterIP Service with "
            "kubectl port-forward, or annotate it as an internal load balancer",
        )


def stateful_resources_protected(graph: Graph, config: dict) -> Iterator[Violation]:
    if not config.get("requireProtection", False):
        return
    for node in graph.of_type(*STATEFUL_TYPES):
        if not node.protect:
            yield Violation(
                node.urn,
                f"{describe(node)} holds state but is not protected; set protect (the program's "
                "protectStatefulResources config) so pulumi destroy cannot delete it",
            )
