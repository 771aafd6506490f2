"""The mutation cases of elastic (Karpenter) Trainium pools: the same rules a managed group answers to, applied to a
NodePool and its EC2NodeClass (staging's pool, or a stack made elastic by override), and the rules only pools have.

``tests/test_policies.py`` merges these with the other tables into the one it runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from mutation_case import Case, edit, resource
from policy_mutations import RESERVATION
from support import one_group, settings

from plan_graph.trainium_groups import NODE_CLASS, NODE_POOL, PLACEMENT_GROUP, SECURITY_GROUP, SUBNET
from trainium_eks import versions

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
edit_class = functools.partial(edit, NODE_CLASS, "-nodeclass", "spec")
edit_pool = functools.partial(edit, NODE_POOL, "-nodepool", "spec")
ELASTIC_PROD = {
    "trainiumNodeGroups": [{"name": "trn1n-32xl", "instanceType": "trn1n.32xlarge", "provisioning": "karpenter", "maxSize": 8}]
}
ELASTIC_RESERVED = {
    "trainiumNodeGroups": [
        {
            "name": "trn1-32xl",
            "instanceType": "trn1.32xlarge",
            "provisioning": "karpenter",
            "maxSize": 2,
            "capacityReservation": RESERVATION,
        }
    ]
}


def _node_class(plan: dict) -> dict:
    return resource(plan, NODE_CLASS, "-nodeclass")


def _second_subnet(plan: dict) -> None:
    node_class = _node_class(plan)
    node_class["inputs"]["spec"]["subnetSelectorTerms"].append({"id": "subnet-0123456789abcdef0"})
    node_class["propertyDependencies"]["spec"].append(resource(plan, SUBNET, "private-az1")["urn"])


def _unlinked(type_: str, *path: str) -> Callable[[dict], None]:
    """Remove a NodeClass setting and the resource it came from (the spec's link to it)."""

    def mutate(plan: dict) -> None:
        edit_class(*path)(plan)
        linked = {r["urn"] for r in plan["resources"] if r["type"] == type_}
        spec_links = _node_class(plan)["propertyDependencies"]["spec"]
        spec_links[:] = [urn for urn in spec_links if urn not in linked]

    return mutate


def _no_self_egress(plan: dict) -> None:
    group = resource(plan, SECURITY_GROUP, "-efa")["inputs"]
    group["egress"] = [r for r in group["egress"] if not r.get("self")]


def _karpenter_without_repair(plan: dict) -> None:
    (release,) = [
        r for r in plan["resources"] if r["type"] == HELM_RELEASE and r["inputs"]["chart"] == versions.KARPENTER_CHART.chart
    ]
    release["inputs"]["values"]["settings"]["featureGates"]["nodeRepair"] = False


STAGING_AZ = settings("staging", fixture=True).config["trainium-eks:trainiumAzId"]

ELASTIC_CASES: dict[str, list[Case]] = {
    "trainium-node-group-single-az": [
        Case("pool-two-subnets", "staging", _second_subnet, ("2 subnets",), NODE_POOL, 1),
        Case("pool-by-tag", "staging", edit_class("subnetSelectorTerms", to=[{"tags": {"team": "a"}}]), ("by tag",), NODE_POOL),
    ],
    "trainium-efa-interface-per-network-card": [
        Case(
            "pool-card-7-missing",
            "staging",
            edit_class("networkInterfaces", 8),
            ("no interface at network card 7 ",),
            NODE_CLASS,
            1,
        )
    ],
    "trainium-cluster-placement-group": [
        Case(
            "pool-none", "staging", _unlinked(PLACEMENT_GROUP, "placementGroupSelector"), ("placementGroupSelector",), NODE_CLASS
        )
    ],
    "trainium-neuron-ami": [
        Case("pool-by-id", "staging", edit_class("amiSelectorTerms", to=[{"id": "ami-0123456789abcdef0"}]), blames=NODE_CLASS)
    ],
    "trainium-node-image-pinned": [
        Case("pool-latest", "staging", edit_class("amiSelectorTerms", 0, "alias", to="al2023@latest"), ("latest",), NODE_CLASS, 1)
    ],
    "trainium-neuron-taint": [
        Case("pool-untainted", "staging", edit_pool("template", "spec", "taints", to=[]), ("lacks the taint",), NODE_POOL, 1)
    ],
    "trainium-pool-keeps-busy-nodes": [
        Case(
            "underutilized",
            "staging",
            edit_pool("disruption", "consolidationPolicy", to="WhenEmptyOrUnderutilized"),
            ("WhenEmpty",),
            NODE_POOL,
            1,
        ),
        Case("expires", "dev", edit_pool("template", "spec", "expireAfter", to="720h"), ("'720h'",), NODE_POOL, 1),
        Case("no-grace", "staging", edit_pool("template", "spec", "terminationGracePeriod"), ("still training",), NODE_POOL),
        Case(
            "short-grace", "dev", edit_pool("template", "spec", "terminationGracePeriod", to="1h"), ("cut short",), NODE_POOL, 1
        ),
        Case(
            "block-grace",
            "staging",
            edit_pool("template", "spec", "terminationGracePeriod", to="600s"),
            ("EC2 terminates",),
            NODE_POOL,
            1,
            overrides=one_group("trn2.48xlarge"),
        ),
        Case("drift-unheld", "staging", edit_pool("disruption", "budgets", to=[{"nodes": "10%"}]), ("Drifted",), NODE_POOL),
    ],
    "efa-security-group-self-traffic": [Case("pool-no-self-egress", "staging", _no_self_egress, blames=NODE_CLASS)],
    "capacity-reservation-in-trainium-az": [
        Case(
            "pool-az1",
            "staging",
            edit(NODE_CLASS, "-nodeclass", "metadata", "annotations", "trainium-eks/capacity-reservation-az-id", to="use1-az1"),
            ("use1-az1",),
            NODE_CLASS,
            overrides=ELASTIC_RESERVED,
        )
    ],
    "trainium-node-auto-repair": [
        Case("prod-pool-without-repair", "prod", _karpenter_without_repair, ("feature gate",), NODE_POOL, 1, ELASTIC_PROD)
    ],
    "ec2-launch-template-imdsv2-required": [
        Case("pool-two-hops", "staging", edit_class("metadataOptions", "httpPutResponseHopLimit", to=2.0), blames=NODE_CLASS)
    ],
    "ec2-launch-template-encrypted-block-devices": [
        Case("pool-root", "dev", edit_class("blockDeviceMappings", 0, "ebs", "encrypted", to=False), blames=NODE_CLASS)
    ],
    "trainium-node-limit": [Case("pool-max-3", "staging", edit_pool("limits", "cpu", to="384"), ("grow to 3 nodes",))],
    "monthly-cost-budget": [Case("pool-4-nodes", "staging", edit_pool("limits", "cpu", to="512"), ("trn1.32xlarge", "36,000"))],
}
SPARED_ELASTIC: dict[str, list[Case]] = {
    "capacity-reservation-in-trainium-az": [Case("pool-in-az", "staging", lambda plan: None, overrides=ELASTIC_RESERVED)],
}
