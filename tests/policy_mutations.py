"""Each policy's mutations of a real stack's plan, managed node groups and the rest of the platform: with the elastic
pools' cases (``tests/elastic_mutations.py``) and the other ``tests/*_mutations.py``, the table ``tests/test_policies.py``
runs.

The table is keyed by policy name (its keys must be exactly the packs' policies) with the minimal edits each
policy must catch; ``SPARED_MANAGED`` holds edits a policy must let pass. The cases are built from
``tests/mutation_case.py``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

from mutation_case import (
    CONTAINER_0,
    Case,
    edit,
    edit_node_group,
    edit_template,
    resource,
    trainium_node_group,
    trainium_template,
    without,
)
from support import node_group_config, settings

from plan_graph.trainium_groups import (
    INSTANCE_TYPE_LABEL,
    LAUNCH_TEMPLATE,
    NODE_GROUP,
    NODE_POOL,
    PLACEMENT_GROUP,
    SECURITY_GROUP,
    SUBNET,
)
from policies.rules.iam import ROLE_POLICY_ATTACHMENT
from policies.rules.scheduling import QUEUE
from policies.rules.security import ECR, EKS_COMPONENT, HELM_RELEASE, SERVICE, VPC_INGRESS_RULE
from policies.rules.topology import FSX, RESERVATION_AZ_TAG
from trainium_eks import catalog, layout, tokens, versions


def _second_subnet(plan: dict) -> None:
    group, other = trainium_node_group(plan), resource(plan, SUBNET, "private-az1")
    group["inputs"]["subnetIds"].append("subnet-other")
    group["propertyDependencies"]["subnetIds"].append(other["urn"])


def _no_placement(plan: dict) -> None:
    template = trainium_template(plan)
    del template["inputs"]["placement"]
    template["propertyDependencies"]["placement"] = []


def _fsx_in_az1(plan: dict) -> None:
    resource(plan, FSX)["propertyDependencies"]["subnetIds"] = [resource(plan, SUBNET, "private-az1")["urn"]]


def _no_self_egress(plan: dict) -> None:
    group = resource(plan, SECURITY_GROUP, "-efa")["inputs"]
    group["egress"] = [r for r in group["egress"] if not r.get("self")]


def _five_trainium_nodes(plan: dict) -> None:
    trainium_node_group(plan)["inputs"]["scalingConfig"].update(desiredSize=5.0)


def _unprotect(plan: dict) -> None:
    for record in plan["resources"]:
        record["protect"] = False


def _lustre_ingress(*rules: dict) -> Callable[[dict], None]:
    return edit(SECURITY_GROUP, "-lustre", "ingress", to=list(rules))


def _tcp(low: float, high: float, *cidrs: str) -> dict:
    return {"protocol": "tcp", "fromPort": low, "toPort": high, "cidrBlocks": list(cidrs)}


def _full_access_on(attachment: str) -> Callable[[dict], None]:
    return edit(ROLE_POLICY_ATTACHMENT, attachment, "policyArn", to="arn:aws:iam::aws:policy/AmazonFSxFullAccess")


def _public_cidrs(*cidrs: str) -> Callable[[dict], None]:
    return edit(EKS_COMPONENT, "", "publicAccessCidrs", to=list(cidrs))


edit_cluster = functools.partial(edit, EKS_COMPONENT, "")
edit_ecr = functools.partial(edit, ECR, "")
edit_volcano = functools.partial(edit, HELM_RELEASE, "volcano")
WILDCARD_ADMIN = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
IPV6_HALVES_ALL_TRAFFIC = {"protocol": "-1", "fromPort": 0.0, "toPort": 0.0, "ipv6CidrBlocks": ["::/1", "8000::/1"]}
RESERVATION = {
    "type": "odcr",
    "id": "cr-0123456789abcdef0",
    "azId": settings("staging", fixture=True).config["trainium-eks:trainiumAzId"],
    "instanceCount": 2,
}
MONITORING_AGENT = "eks-node-monitoring-agent"
NO_REPAIR = {"nodeRepair": False}
RESERVATION_STAGING = {"trainiumNodeGroups": [node_group_config("trn1-32xl", "trn1.32xlarge", capacityReservation=RESERVATION)]}

ALL_BUT_IAM = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]})
ENDPOINT = tokens.EC2_VPC_ENDPOINT


def _pool_cpu_limit(limit: Callable[[int, int], str]) -> Callable[[dict], None]:
    """The Trainium NodePool's spec.limits.cpu set to ``limit(vCPUs of its instance type, its CPU limit)``."""

    def mutate(plan: dict) -> None:
        pool = resource(plan, NODE_POOL)["inputs"]
        (types,) = [r["values"] for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == INSTANCE_TYPE_LABEL]
        limits = pool["spec"]["limits"]
        limits["cpu"] = limit(catalog.INSTANCE_TYPES[types[0]].vcpus, int(float(limits["cpu"])))

    return mutate


def _users_policy_also(statement: dict) -> Callable[[dict], None]:
    """The API access users' policy with one more Allow statement."""

    def mutate(plan: dict) -> None:
        policy = resource(plan, tokens.IAM_POLICY, "api-access-users")["inputs"]
        document = json.loads(policy["policy"])
        document["Statement"].append({"Effect": "Allow", **statement})
        policy["policy"] = json.dumps(document)

    return mutate


MANAGED_GROUP_AND_PLATFORM_CASES: dict[str, list[Case]] = {
    # ---- trainium-topology
    "trainium-node-group-single-az": [Case("two-subnets", "prod", _second_subnet, ("2 subnets",), NODE_GROUP, 1)],
    "trainium-efa-interface-per-network-card": [
        Case("card-7-missing", "prod", edit_template("networkInterfaces", 8), ("no interface at network card 7 ",), count=1),
        Case(
            "device-index",
            "prod",
            edit_template("networkInterfaces", 4, "deviceIndex", to=1.0),
            ("card 3 device index 1",),
            count=1,
        ),
        Case(
            "card-index-as-text",
            "prod",
            edit_template("networkInterfaces", 4, "networkCardIndex", to="3"),
            ("interface 4 is not an object with whole networkCardIndex",),
            LAUNCH_TEMPLATE,
            1,
        ),
        Case(
            "efa-with-ena-on-a-card",
            "prod",
            edit_template("networkInterfaces", 4, "interfaceType", to="efa"),
            ("'efa' at network card 3", "has 'efa-only'"),
            LAUNCH_TEMPLATE,
            1,
        ),
    ],
    "trainium-cluster-placement-group": [
        Case("none", "prod", _no_placement, blames=LAUNCH_TEMPLATE),
        Case("spread", "prod", edit(PLACEMENT_GROUP, "", "strategy", to="spread"), ("'spread'",)),
    ],
    "trainium-neuron-ami": [Case("standard", "prod", edit_node_group("amiType", to="AL2023_x86_64_STANDARD"), blames=NODE_GROUP)],
    "trainium-node-image-pinned": [Case("floating", "prod", edit_node_group("releaseVersion"), ("unset",), NODE_GROUP, 1)],
    "trainium-neuron-taint": [Case("untainted", "prod", edit_node_group("taints", to=[]), ("lacks the taint",), NODE_GROUP, 1)],
    "efa-security-group-self-traffic": [Case("no-self-egress", "prod", _no_self_egress, blames=LAUNCH_TEMPLATE)],
    "trainium-az-offers-instance-type": [
        Case("az1", "staging", edit(SUBNET, "private-trainium", "availabilityZoneId", to="use1-az1"), ("use1-az1 (us-east-1)",)),
        # A Capacity Block's price on trn1n.32xlarge in us-west-2, where EC2 sells no blocks of it.
        Case(
            "block-never-sold",
            "prod",
            edit_template("tags", layout.CAPACITY_BLOCK_HOURLY_USD_TAG, to="30"),
            ("sells no Capacity Blocks of trn1n.32xlarge in us-west-2",),
            NODE_GROUP,
            1,
        ),
    ],
    "fsx-lustre-in-trainium-az": [Case("az1", "staging", _fsx_in_az1, blames=FSX)],
    "fsx-lustre-ports-reachable": [
        Case("client-ports-closed", "dev", without(lambda r: r["inputs"].get("fromPort") == 1018), ("1018-1023",), FSX),
        Case(
            "short-range", "dev", edit(VPC_INGRESS_RULE, "clients-from-nodes", "toPort", to=1022.0), ("1018-1023 from",), count=1
        ),
    ],
    "neuron-and-efa-device-plugins": [
        Case(
            "no-neuron",
            "staging",
            without(lambda r: r["type"] == HELM_RELEASE and r["inputs"]["name"] == "neuron-device-plugin"),
            ("neuron-helm-chart",),
            NODE_POOL,
        ),
        Case(
            "no-toleration", "staging", edit(HELM_RELEASE, "efa", "values", "tolerations", to=[]), ("not tolerate",), HELM_RELEASE
        ),
    ],
    "eks-images-from-stack-region": [
        Case("chart-default", "staging", edit(HELM_RELEASE, "efa", "values", "image", "repository"), ("us-west-2's",), count=1),
        Case(
            "other-region",
            "dev",
            edit(HELM_RELEASE, "efa", "values", "image", "repository", to=versions.eks_image_repository("us-west-2", "eks/x")),
            ("from us-west-2 into a us-east-2 stack",),
            HELM_RELEASE,
            1,
        ),
    ],
    "volcano-queue-within-capacity": [
        Case("beyond", "prod", edit(QUEUE, "training", "spec", "capability", "aws.amazon.com/neuron", to=999.0), blames=QUEUE),
        # a Kubernetes quantity: "1Ki" is 1024 devices
        Case("beyond-in-Ki", "prod", edit(QUEUE, "training", "spec", "capability", "aws.amazon.com/neuron", to="1Ki"), ("1024",)),
        Case(
            "not-a-quantity",
            "prod",
            edit(QUEUE, "training", "spec", "capability", "aws.amazon.com/neuron", to="lots"),
            ("no Kubernetes quantity",),
            QUEUE,
            1,
        ),
        Case("no-queue", "dev", without(lambda r: r["type"] == QUEUE), ("no Volcano Queue",), NODE_POOL),
    ],
    "capacity-reservation-in-trainium-az": [
        Case("az1", "staging", edit_template("tags", RESERVATION_AZ_TAG, to="use1-az1"), overrides=RESERVATION_STAGING)
    ],
    "trainium-node-auto-repair": [
        Case(
            "prod-without-repair", "prod", edit_node_group("nodeRepairConfig", "enabled", to=False), ("requires",), NODE_GROUP, 1
        ),
        Case("prod-repair-removed", "prod", edit_node_group("nodeRepairConfig"), ("requires",), NODE_GROUP, 1),
        Case(
            "no-agent",
            "staging",
            without(lambda r: r["inputs"].get("addonName") == MONITORING_AGENT),
            (MONITORING_AGENT,),
            NODE_POOL,
        ),
    ],
    # ---- security-baseline
    "ec2-launch-template-imdsv2-required": [
        Case("v1", "prod", edit_template("metadataOptions", "httpTokens", to="optional")),
        Case("two-hops", "prod", edit_template("metadataOptions", "httpPutResponseHopLimit", to=2.0), ("2 hops",)),
    ],
    "ec2-launch-template-encrypted-block-devices": [
        Case("root", "prod", edit_template("blockDeviceMappings", 0, "ebs", "encrypted", to="false"))
    ],
    "kms-encryption-at-rest": [
        Case("eks", "staging", edit_cluster("encryptionConfigKeyArn"), blames=EKS_COMPONENT),
        Case("fsx", "staging", edit(FSX, "", "kmsKeyId"), blames=FSX),
        Case("ecr", "staging", edit_ecr("encryptionConfigurations", to=[{"encryptionType": "AES256"}]), blames=ECR),
    ],
    "eks-control-plane-logging": [Case("no-audit", "prod", edit_cluster("enabledClusterLogTypes", 1), ("audit",))],
    "eks-authentication-mode-api": [Case("config-map", "prod", edit_cluster("authenticationMode", to="CONFIG_MAP"))],
    "eks-endpoint-public-access": [
        Case("forbidden", "prod", edit_cluster("endpointPublicAccess", to=True), ("forbids",)),
        Case("world", "dev", _public_cidrs("0.0.0.0/0"), ("open to the internet",)),
        Case("no-cidrs", "dev", _public_cidrs(), ("no publicAccessCidrs",)),
        Case("world-in-halves", "dev", _public_cidrs("203.0.113.0/24", "0.0.0.0/1", "128.0.0.0/1"), ("cover 0.0.0.0/0",)),
        Case("not-a-cidr", "dev", _public_cidrs("203.0.113.0/33"), ("'203.0.113.0/33'",), count=1),
    ],
    "security-group-no-world-ingress": [
        Case("group", "dev", _lustre_ingress(_tcp(22.0, 22.0, "0.0.0.0/0")), ("(0.0.0.0/0) on tcp 22",)),
        Case("rule", "dev", edit(VPC_INGRESS_RULE, "lustre-from-nodes", "cidrIpv4", to="0.0.0.0/0"), blames=VPC_INGRESS_RULE),
        Case(
            "two-halves", "dev", _lustre_ingress(_tcp(0, 65535, "0.0.0.0/1"), _tcp(22, 22, "128.0.0.0/1")), ("tcp 22;",), count=1
        ),
        Case("ipv6-halves", "dev", _lustre_ingress(IPV6_HALVES_ALL_TRAFFIC), ("IPv6 internet (::/1, 8000::/1) on all traffic",)),
    ],
    "iam-no-wildcard-admin": [
        Case("star", "dev", edit("aws:iam/rolePolicy:RolePolicy", "", "policy", to=WILDCARD_ADMIN)),
        Case("not-action", "dev", edit("aws:iam/rolePolicy:RolePolicy", "", "policy", to=ALL_BUT_IAM), ("NotAction",)),
    ],
    "irsa-no-full-access-policies": [Case("ebs-csi", "dev", _full_access_on("ebs-csi"), blames=ROLE_POLICY_ATTACHMENT)],
    "ecr-immutable-scan-on-push": [
        Case("mutable", "dev", edit_ecr("imageTagMutability", to="MUTABLE"), ("mutable tags",), ECR, 1),
        Case("unscanned", "dev", edit_ecr("imageScanningConfiguration", "scanOnPush", to=False), ("scan on push",), ECR, 1),
    ],
    "container-images-pinned": [
        Case("latest", "dev", edit("kubernetes:apps/v1:Deployment", "", *CONTAINER_0, "image", to="tensorflow/tensorflow:latest"))
    ],
    "helm-release-pinned": [
        Case("range", "dev", edit_volcano("version", to="1.x"), ("'1.x'",)),
        Case("repository", "dev", edit_volcano("repositoryOpts", "repo", to="https://charts.example.com"), ("not an allowed",)),
    ],
    "no-public-load-balancer": [Case("lb", "dev", edit(SERVICE, "tensorboard", "spec", "type", to="LoadBalancer"))],
    "stateful-resources-protected": [Case("prod", "prod", _unprotect, ("LustreFileSystem",))],
    # ---- cost-guard
    "trainium-node-limit": [
        Case("max-9", "prod", edit_node_group("scalingConfig", "maxSize", to=9.0), ("grow to 9 nodes",)),
        Case(
            "pool-without-limits", "staging", edit(NODE_POOL, "", "spec", "limits", to={}), ("no spec.limits.cpu",), NODE_POOL, 1
        ),
        Case("pool-limit-not-a-quantity", "staging", edit(NODE_POOL, "", "spec", "limits", "cpu", to="many"), ("'many'",)),
        # 100 nodes' worth of any Trainium type's vCPUs, in millicores
        Case("pool-limit-in-millicores", "staging", _pool_cpu_limit(lambda vcpus, _: f"{vcpus * 100_000}m"), ("grow to 100",)),
    ],
    "image-pulls-through-vpc-endpoints": [
        Case("null-service-name", "dev", edit(ENDPOINT, "-endpoints-ecr-dkr", "serviceName", to=None), ("ecr.dkr",), count=1)
    ],
    "ec2-instance-closed": [
        Case(
            "public-ip-as-text",
            "prod",
            edit(tokens.EC2_INSTANCE, "api-access", "associatePublicIpAddress", to="true"),
            ("public address",),
            tokens.EC2_INSTANCE,
            1,
        )
    ],
    "ssm-session-access-scoped": [
        Case("wildcard-action", "prod", _users_policy_also({"Action": "ssm:Start*", "Resource": "*"}), ("every instance",)),
        Case("not-action", "prod", _users_policy_also({"NotAction": "iam:*", "Resource": "*"}), ("every instance",)),
    ],
    "monthly-cost-budget": [Case("5-nodes", "prod", _five_trainium_nodes, ("trn1n.32xlarge", "90,000"))],
    "required-tags": [Case("no-owner", "staging", edit_ecr("tags", "owner"), ("owner",), ECR)],
}

# Edits a policy must let pass, with nothing else firing either.
SPARED_MANAGED: dict[str, list[Case]] = {
    # the limit a pool has, written in millicores: the same quantity
    "trainium-node-limit": [
        Case("pool-limit-in-millicores", "staging", _pool_cpu_limit(lambda _, cpus: f"{cpus * 1000}m")),
    ],
    "irsa-no-full-access-policies": [Case("node-role", "dev", _full_access_on("node-ssm"))],
    "stateful-resources-protected": [Case("dev", "dev", _unprotect)],
    "capacity-reservation-in-trainium-az": [Case("in-az", "staging", lambda plan: None, overrides=RESERVATION_STAGING)],
    # dev does not require repair; without repair the agent is not required either.
    "trainium-node-auto-repair": [
        Case(
            "dev-without-repair", "dev", without(lambda r: r["inputs"].get("addonName") == MONITORING_AGENT), overrides=NO_REPAIR
        )
    ],
}
