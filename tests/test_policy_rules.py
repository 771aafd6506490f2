"""The resource policies on hand-built resources: each rule's branches, values unknown in a preview, malformed values.
(The stack policies on small graphs are in test_stack_rules.py.)

Props use the engine's wire names (camelCase) with numbers as floats, as the packs receive them.
"""

from __future__ import annotations

import json

import pytest
from rule_graphs import expect, node

from plan_graph.graph import UNKNOWN
from plan_graph.trainium_groups import LAUNCH_TEMPLATE, SECURITY_GROUP
from policies.rules import cost, iam, scheduling, security
from policies.rules.network import internet_covered, parse_cidrs

EKS, SG_RULE, VPC_RULE = security.EKS_COMPONENT, security.SECURITY_GROUP_RULE, security.VPC_INGRESS_RULE
ABSENT = object()


def case(id_: str, policy_rule, type_: str, props: dict, *fragments: str, config: dict | None = None):
    return pytest.param(policy_rule, type_, props, config or {}, fragments, id=id_)


def endpoint(id_: str, cidrs, *fragments: str):
    """An EKS endpoint that is public where the stack allows it, with ``cidrs`` as its publicAccessCidrs."""
    props = {"endpointPublicAccess": True} | ({} if cidrs is ABSENT else {"publicAccessCidrs": cidrs})
    return case(id_, security.endpoint_public_access, EKS, props, *fragments, config=ALLOWED)


def rule(protocol: str, low: float, high: float, *cidrs: str, **extra) -> dict:
    return {"protocol": protocol, "fromPort": float(low), "toPort": float(high), "cidrBlocks": list(cidrs), **extra}


def ingress(id_: str, props: dict, *fragments: str, type_: str = SECURITY_GROUP):
    return case(id_, security.no_world_ingress, type_, props, *fragments)


def group(*rules: dict) -> dict:
    return {"ingress": list(rules)}


ALLOWED = {"allowPublicEndpoint": True}
AWS_CLUSTER_HALVES = {"vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/1", "128.0.0.0/1"]}}
NETWORK_CASES = [
    # eks-endpoint-public-access: CIDR sets by what they cover, per address family
    case("forbidden-by-default", security.endpoint_public_access, EKS, {}, "forbids"),
    case("private", security.endpoint_public_access, EKS, {"endpointPublicAccess": False}),
    case("public-unknown", security.endpoint_public_access, EKS, {"endpointPublicAccess": UNKNOWN}),
    endpoint("restricted", ["203.0.113.0/24"]),
    endpoint("no-cidrs", ABSENT, "no publicAccessCidrs"),
    endpoint("empty-cidrs", [], "no publicAccessCidrs"),
    endpoint("world", ["0.0.0.0/0"], "publicAccessCidrs cover 0.0.0.0/0"),
    endpoint("world-with-host-bits", ["10.1.2.3/0"], "cover 0.0.0.0/0"),
    endpoint("halves", ["0.0.0.0/1", "128.0.0.0/1"], "cover 0.0.0.0/0"),
    endpoint("overlapping-pieces", ["0.0.0.0/2", "64.0.0.0/2", "10.0.0.0/8", "128.0.0.0/1"], "cover 0.0.0.0/0"),
    endpoint("ipv6-halves", ["::/1", "8000::/1"], "cover ::/0"),
    endpoint("halves-of-two-families", ["0.0.0.0/1", "8000::/1"]),
    endpoint("a-quarter-short", ["0.0.0.0/1", "128.0.0.0/2"]),
    endpoint("known-half-and-unknown", ["0.0.0.0/1", UNKNOWN]),
    endpoint("known-world-and-unknown", ["0.0.0.0/1", "128.0.0.0/1", UNKNOWN], "cover 0.0.0.0/0"),
    endpoint("unknown-list", UNKNOWN),
    endpoint("not-a-list", "0.0.0.0/0", "publicAccessCidrs '0.0.0.0/0' (not a list)"),
    endpoint("not-a-string", [10.0], "publicAccessCidrs entry 10.0"),
    endpoint("bad-cidr", ["10.0.0.0/33", "203.0.113.0/24"], "publicAccessCidrs entry '10.0.0.0/33'"),
    endpoint("bad-cidr-and-world", ["nonsense", "0.0.0.0/0"], "entry 'nonsense'", "cover 0.0.0.0/0"),
    case(
        "aws-cluster",
        security.endpoint_public_access,
        security.EKS_CLUSTER,
        AWS_CLUSTER_HALVES,
        "cover 0.0.0.0/0",
        config=ALLOWED,
    ),
    # security-group-no-world-ingress: sources add up per protocol and port range
    ingress("tcp-22-world", group(rule("tcp", 22, 22, "0.0.0.0/0")), "IPv4 internet (0.0.0.0/0) on tcp 22;"),
    ingress("restricted", group(rule("tcp", 22, 22, "10.0.0.0/8"))),
    ingress("halves-1-rule", group(rule("tcp", 22, 22, "0.0.0.0/1", "128.0.0.0/1")), "(0.0.0.0/1, 128.0.0.0/1) on tcp 22;"),
    ingress("halves-2-rules", group(rule("tcp", 22, 22, "0.0.0.0/1"), rule("tcp", 22, 22, "128.0.0.0/1")), "on tcp 22;"),
    ingress("halves-on-two-ports", group(rule("tcp", 22, 22, "0.0.0.0/1"), rule("tcp", 443, 443, "128.0.0.0/1"))),
    ingress("halves-on-two-protocols", group(rule("tcp", 53, 53, "0.0.0.0/1"), rule("udp", 53, 53, "128.0.0.0/1"))),
    ingress("range-and-port", group(rule("tcp", 0, 65535, "0.0.0.0/1"), rule("tcp", 22, 22, "128.0.0.0/1")), "on tcp 22;"),
    ingress("overlapping-ranges", group(rule("tcp", 20, 30, "0.0.0.0/1"), rule("tcp", 25, 40, "128.0.0.0/1")), "on tcp 25-30;"),
    ingress("widest-range", group(rule("tcp", 0, 65535, "0.0.0.0/0"), rule("tcp", 22, 22, "10.0.0.0/8")), "on tcp 0-65535;"),
    ingress("all-protocols-and-tcp", group(rule("-1", 0, 0, "0.0.0.0/1"), rule("tcp", 443, 443, "128.0.0.0/1")), "on tcp 443;"),
    ingress("all-ipv6", group(rule("all", 0, 0, ipv6CidrBlocks=["::/0"])), "IPv6 internet (::/0) on all traffic;"),
    ingress("both-families", group(rule("-1", 0, 0, "0.0.0.0/0", ipv6CidrBlocks=["::/0"])), "IPv4 internet", "IPv6 internet"),
    ingress("protocol-number", group(rule("6", 22, 22, "0.0.0.0/0")), "on tcp 22;"),
    ingress("icmp-type-and-code", group(rule("icmp", 8, 0, "0.0.0.0/0")), "on icmp;"),
    ingress("security-groups-only", group(rule("-1", 0, 0, securityGroups=["sg-1"]))),
    ingress("unknown-protocol", group(rule(UNKNOWN, 22, 22, "0.0.0.0/0"))),
    ingress("unknown-ingress", {"ingress": UNKNOWN}),
    ingress("unknown-source-known-world", group(rule("tcp", 22, 22, "0.0.0.0/0", UNKNOWN)), "on tcp 22;"),
    ingress("unknown-source-known-half", group(rule("tcp", 22, 22, "0.0.0.0/1", UNKNOWN))),
    ingress("cidrs-not-a-list", group(rule("tcp", 22, 22) | {"cidrBlocks": "0.0.0.0/0"}), "cidrBlocks '0.0.0.0/0' (not a list)"),
    ingress("cidr-not-a-string", group(rule("tcp", 22, 22, None)), "cidrBlocks entry None"),
    ingress("bad-cidr", group(rule("tcp", 22, 22, "0.0.0.0/0/0")), "cidrBlocks entry '0.0.0.0/0/0'"),
    ingress("ports-reversed", group(rule("tcp", 443, 22, "0.0.0.0/0")), "ports 443-22 are not a port range"),
    ingress("ports-missing", group({"protocol": "tcp", "cidrBlocks": ["10.0.0.0/8"]}), "ports None-None are not"),
    ingress("rule-resource-ingress", {"type": "ingress", **rule("tcp", 22, 22, "0.0.0.0/0")}, "on tcp 22;", type_=SG_RULE),
    ingress("rule-resource-egress", {"type": "egress", **rule("tcp", 22, 22, "0.0.0.0/0")}, type_=SG_RULE),
    ingress("vpc-rule-ipv6", {"ipProtocol": "-1", "cidrIpv6": "::/0"}, "(::/0) on all traffic", type_=VPC_RULE),
    ingress(
        "vpc-rule-private", {"ipProtocol": "tcp", "fromPort": 988.0, "toPort": 988.0, "cidrIpv4": "10.0.0.0/8"}, type_=VPC_RULE
    ),
    ingress("vpc-rule-bad-cidr", {"ipProtocol": "-1", "cidrIpv4": "10.0.0/8"}, "cidrIpv4 entry '10.0.0/8'", type_=VPC_RULE),
]


def pod(*containers: dict) -> dict:
    return {"spec": {"template": {"spec": {"containers": list(containers)}}}}


def ebs(encrypted) -> dict:
    return {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": encrypted}}]}


def release(version, repository: str = security.DEFAULT_ALLOWED_CHART_REPOSITORIES[0]) -> dict:
    return {"chart": "c", "version": version, "repositoryOpts": {"repo": repository}}


ADMIN = {"Statement": [{"Effect": "Allow", "Action": ["*"], "Resource": "*"}]}
INTERNAL = {"annotations": {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"}}
ETCD_3_5_V2 = {"image": "quay.io/coreos/etcd:v3.5.17", "env": [{"name": "ETCD_ENABLE_V2", "value": "true"}]}
IAM_POLICY, DEPLOYMENT = "aws:iam/policy:Policy", "kubernetes:apps/v1:Deployment"

# (rule, resource type) -> rows of (id, props, fragment...)
OTHER_RESOURCE_RULES = {
    (security.imdsv2_required, LAUNCH_TEMPLATE): [
        ("optional", {"metadataOptions": {"httpTokens": "optional"}}, "IMDSv1"),
        ("required", {"metadataOptions": {"httpTokens": "required"}}),
        ("unknown", {"metadataOptions": {"httpTokens": UNKNOWN}}),
        ("one-hop", {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1.0}}),
        ("two-hops", {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2.0}}, "2 hops"),
        ("hops-not-a-number", {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": "2"}}, "'2' hops"),
        ("hops-unknown", {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": UNKNOWN}}),
    ],
    (security.encrypted_block_devices, LAUNCH_TEMPLATE): [
        ("false", ebs("false"), "maps /dev/xvda unencrypted"),
        ("true-string", ebs("true")),
        ("true", ebs(True)),
        ("unknown", ebs(UNKNOWN)),
    ],
    (security.kms_encryption_at_rest, EKS): [
        ("no-key", {}, "envelope-encrypt Secrets"),
        ("key", {"encryptionConfigKeyArn": "k"}),
    ],
    (security.kms_encryption_at_rest, security.FSX): [
        ("persistent", {"deploymentType": "PERSISTENT_2"}, "has no KMS key"),
        ("scratch", {"deploymentType": "SCRATCH_2"}),
    ],
    (security.kms_encryption_at_rest, security.ECR): [("aes", {}, "AES256 only")],
    (security.control_plane_logging, EKS): [
        ("missing", {"enabledClusterLogTypes": ["api"]}, "does not log audit"),
        ("unknown", {"enabledClusterLogTypes": UNKNOWN}),
    ],
    (security.authentication_mode_api, EKS): [
        ("default", {}, "CONFIG_MAP (the default)"),
        ("unknown", {"authenticationMode": UNKNOWN}),
    ],
    (security.authentication_mode_api, security.EKS_CLUSTER): [("api", {"accessConfig": {"authenticationMode": "API"}})],
    (iam.iam_no_wildcard_admin, IAM_POLICY): [
        ("admin", {"policy": json.dumps(ADMIN)}, "every action"),
        ("unknown", {"policy": UNKNOWN}),
        ("not-json", {"policy": "{"}),
    ],
    (iam.iam_no_wildcard_admin, iam.IAM_ROLE): [("inline", {"inlinePolicies": [{"policy": ADMIN}]}, "every action")],
    (security.ecr_immutable_scan_on_push, security.ECR): [
        ("defaults", {}, "mutable tags", "scan on push"),
        ("unknown", {"imageTagMutability": UNKNOWN, "imageScanningConfiguration": {"scanOnPush": True}}),
    ],
    (security.images_pinned, DEPLOYMENT): [
        ("latest", pod({"image": "nginx:latest"}), "'nginx:latest'"),
        ("registry-port", pod({"image": "registry:5000/app"}), "without a pinned tag"),
        ("pinned", pod({"image": "app:1.2.3"}, {"image": "app@sha256:ab"})),
        ("unknown", pod({"image": UNKNOWN})),
    ],
    (security.images_pinned, security.CRON_JOB): [("cron", {"spec": {"jobTemplate": pod({"image": "app"})}}, "'app'")],
    (security.helm_release_pinned, security.HELM_RELEASE): [
        ("range", release("1.x"), "'1.x'"),
        ("pinned", release("1.2.3")),
        ("repository", release("1.2.3", "https://example.com"), "not an allowed chart repository"),
        ("oci", {"chart": "oci://example.com/c", "version": "1.2.3"}, "from oci://example.com"),
        ("unknown", release(UNKNOWN)),
    ],
    (security.no_public_load_balancer, security.SERVICE): [
        ("public", {"spec": {"type": "LoadBalancer"}}, "public LoadBalancer"),
        ("internal", {"spec": {"type": "LoadBalancer"}, "metadata": INTERNAL}),
        ("cluster-ip", {"spec": {"type": "ClusterIP"}}),
    ],
    (scheduling.etcd_pinned_with_v2_api, DEPLOYMENT): [
        ("3.6-no-v2", pod({"image": "etcd:v3.6.0"}), "v3.5.x", "v2 API"),
        ("pinned-env", pod(ETCD_3_5_V2)),
        ("not-etcd", pod({"image": "app:latest"})),
    ],
    (cost.required_tags, SECURITY_GROUP): [
        ("missing", {"tags": {"owner": "me"}}, "lacks the tags environment, cost-center"),
        ("unknown", {"tags": UNKNOWN}),
    ],
    (cost.required_tags, "kubernetes:core/v1:Namespace"): [("untaggable", {})],
}
OTHER_RESOURCE_CASES = [
    case(f"{policy_rule.__name__}-{id_}", policy_rule, type_, props, *fragments)
    for (policy_rule, type_), rows in OTHER_RESOURCE_RULES.items()
    for id_, props, *fragments in rows
]


@pytest.mark.parametrize(("policy_rule", "type_", "props", "config", "fragments"), NETWORK_CASES + OTHER_RESOURCE_CASES)
def test_resource_rule(policy_rule, type_, props, config, fragments):
    expect(policy_rule(node(type_, props), config), *fragments)


def test_cidr_sets_by_family():
    cidrs = parse_cidrs(["0.0.0.0/1", "128.0.0.0/1", "::/1", UNKNOWN, 7.0, "x"], "cidrs")
    assert [str(n) for n in internet_covered(cidrs.networks)] == ["0.0.0.0/0"]
    assert cidrs.malformed == ("cidrs entry 7.0", "cidrs entry 'x'")
    assert parse_cidrs(UNKNOWN, "cidrs") == parse_cidrs(None, "cidrs") == parse_cidrs([], "cidrs")
