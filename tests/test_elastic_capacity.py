"""Elastic Trainium capacity: Karpenter pools with the managed groups' node setup, scale from zero, idle back to zero.

The managed launch template and the elastic EC2NodeClass are rendered from one NodeTemplate; these tests compare what
each kind gives a node of the same type, read from the evaluated plans, and what Karpenter itself needs to bring them.
"""

from __future__ import annotations

import base64
import email
import json

import pytest
import yaml
from support import (
    STACKS,
    ec2_recommended_layout,
    evaluate,
    offering,
    one,
    platform,
    run_preflight,
    settings,
    sold_as,
    with_groups,
)

from plan_graph import deployment
from plan_graph.graph import Graph
from preflight import analysis
from trainium_eks import catalog, layout, versions
from trainium_eks.config.stack_items import DEFAULT_IDLE_MINUTES
from trainium_eks.karpenter_termination import pool_termination_grace_seconds

pytestmark = pytest.mark.stacks

LT = "aws:ec2/launchTemplate:LaunchTemplate"
NG = "aws:eks/nodeGroup:NodeGroup"
PG = "aws:ec2/placementGroup:PlacementGroup"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
RELEASE = "kubernetes:helm.sh/v3:Release"
ROLE = "aws:iam/role:Role"
QUEUE = "aws:sqs/queue:Queue"
EVENT_RULE = "aws:cloudwatch/eventRule:EventRule"
EVENT_TARGET = "aws:cloudwatch/eventTarget:EventTarget"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
IAM_POLICY = "aws:iam/policy:Policy"


def group(instance_type: str, provisioning: str, **extra) -> dict:
    sizes = {"minSize": 2, "desiredSize": 2} if provisioning == "managed" else {}
    kind = {"name": "trn", "instanceType": instance_type, "provisioning": provisioning, "maxSize": 2, **sizes}
    return {**kind, **sold_as(instance_type), **extra}


def both_kinds(instance_type: str, **extra):
    """The plans of one group of ``instance_type`` as a managed node group and as an elastic pool, on one stack."""
    managed = with_groups(instance_type, group(instance_type, "managed", **extra))
    elastic = with_groups(instance_type, group(instance_type, "karpenter", **extra))
    return (
        one([r for r in managed.find(LT) if r.name.endswith("-trn-lt")]),
        one([r for r in managed.find(NG) if r.name.endswith("-trn-ng")]),
        one(elastic.find(NODE_CLASS)),
        one(elastic.find(NODE_POOL)),
        managed,
        elastic,
    )


@pytest.mark.parametrize("instance_type", catalog.TRAINIUM_TYPES)
def test_the_node_class_gives_a_node_what_the_managed_launch_template_gives_it(instance_type):
    lt, ng, node_class, pool, managed, elastic = both_kinds(instance_type)
    spec = node_class.inputs["spec"]

    # Interfaces: card, device and type, in the catalog's layout.
    interfaces = lambda items: [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) for i in items]  # noqa: E731
    assert interfaces(spec.get("networkInterfaces", [])) == interfaces(lt.inputs.get("networkInterfaces", []))
    # The group's own cluster placement group (the same resource in both plans).
    if catalog.INSTANCE_TYPES[instance_type].supports_efa:
        assert spec["placementGroupSelector"] == {"name": lt.inputs["placement"]["groupName"]}
        pg = one(elastic.find(PG))
        assert pg.urn in node_class.property_dependencies["spec"] and pg.urn in lt.property_dependencies["placement"]
        # The same security groups: the cluster's and the group's EFA group.
        (groups,) = {tuple(i["securityGroups"]) for i in lt.inputs["networkInterfaces"]}
        assert [t["id"] for t in spec["securityGroupSelectorTerms"]] == list(groups)
    else:
        assert "placementGroupSelector" not in spec and "placement" not in lt.inputs
        # A launch template without interfaces leaves the node on the cluster security group, which the pool selects.
        assert [t["id"] for t in spec["securityGroupSelectorTerms"]] == [elastic.outputs["clusterSecurityGroupId"]]
    # One subnet, the Trainium subnet.
    assert [t["id"] for t in spec["subnetSelectorTerms"]] == ng.inputs["subnetIds"]
    # IMDS: tokens required, one hop, the endpoint on.
    for key in ("httpEndpoint", "httpTokens", "httpPutResponseHopLimit"):
        assert spec["metadataOptions"][key] == lt.inputs["metadataOptions"][key], key
    # The encrypted gp3 root volume of the same size.
    (lt_root,), (pool_root,) = lt.inputs["blockDeviceMappings"], spec["blockDeviceMappings"]
    assert pool_root["deviceName"] == lt_root["deviceName"] and pool_root["rootVolume"] is True
    assert pool_root["ebs"]["volumeSize"] == f"{int(lt_root['ebs']['volumeSize'])}Gi"
    assert pool_root["ebs"]["volumeType"] == lt_root["ebs"]["volumeType"] == "gp3"
    assert pool_root["ebs"]["encrypted"] is True and lt_root["ebs"]["encrypted"] == "true"
    # The stack's tags on every instance (Karpenter names instances after their nodes).
    instance_tags = next(t["tags"] for t in lt.inputs["tagSpecifications"] if t["resourceType"] == "instance")
    assert spec["tags"] == {k: v for k, v in instance_tags.items() if k != "Name"}
    # The same labels and Neuron taint, the same pinned node image release.
    template = pool.inputs["spec"]["template"]
    assert template["metadata"]["labels"] == ng.inputs["labels"]
    ((taint,), (managed_taint,)) = template["spec"]["taints"], ng.inputs["taints"]
    neuron = (layout.NEURON_TAINT_KEY, layout.NEURON_TAINT_VALUE)
    assert (taint["key"], taint["value"], taint["effect"]) == (*neuron, layout.NEURON_TAINT_EFFECT_K8S)
    assert (managed_taint["key"], managed_taint["value"], managed_taint["effect"]) == (*neuron, layout.NEURON_TAINT_EFFECT_EKS)
    (alias,) = [t["alias"] for t in spec["amiSelectorTerms"]]
    assert alias.startswith("al2023@v") and alias.removeprefix("al2023@v") == ng.inputs["releaseVersion"].rsplit("-", 1)[1]


def pool_of(plan, name: str):
    """The NodePool of the group ``name``: the one whose nodes carry its node-group label."""
    return one(
        [p for p in plan.find(NODE_POOL) if p.inputs["spec"]["template"]["metadata"]["labels"][layout.NODE_GROUP_LABEL] == name]
    )


def test_an_elastic_pool_scales_from_zero_to_max_size_and_never_empties_a_busy_node():
    plan = evaluate("staging")
    stack = settings("staging").config
    elastic = [g for g in json.loads(stack["trainium-eks:trainiumNodeGroups"]) if g.get("provisioning") == "karpenter"]
    assert elastic and len(plan.find(NODE_POOL)) == len(elastic)
    for configured in elastic:
        pool = pool_of(plan, configured["name"]).inputs["spec"]
        spec = catalog.INSTANCE_TYPES[configured["instanceType"]]
        requirements = {r["key"]: (r["operator"], r["values"]) for r in pool["template"]["spec"]["requirements"]}
        assert requirements["node.kubernetes.io/instance-type"] == ("In", [configured["instanceType"]])
        assert requirements["topology.k8s.aws/zone-id"] == ("In", [stack["trainium-eks:trainiumAzId"]])
        # Into its reservation when it has one (Karpenter's reserved capacity type), else on demand.
        capacity = "reserved" if configured.get("capacityReservation") else "on-demand"
        assert requirements["karpenter.sh/capacity-type"] == ("In", [capacity])
        # Karpenter launches no node past a limit: maxSize nodes of the one type.
        assert int(pool["limits"]["cpu"]) == configured["maxSize"] * spec.vcpus
        assert int(pool["limits"]["cpu"]) < (configured["maxSize"] + 1) * spec.vcpus
        idle = f"{configured.get('idleMinutes', DEFAULT_IDLE_MINUTES)}m"
        # Nothing voluntary takes a busy node: only empty nodes go, drift held at 0 nodes, no expiry; and what Karpenter
        # must take drains each pod in full (tests/test_karpenter_termination.py follows every way a node goes).
        assert pool["disruption"]["consolidationPolicy"] == "WhenEmpty" and pool["disruption"]["consolidateAfter"] == idle
        assert {"nodes": "0", "reasons": ["Drifted"]} in pool["disruption"]["budgets"]
        block = (configured.get("capacityReservation") or {}).get("type") == "capacity-block"
        assert pool["template"]["spec"]["expireAfter"] == "Never"
        assert pool["template"]["spec"]["terminationGracePeriod"] == f"{pool_termination_grace_seconds(block)}s"
        assert "replicas" not in pool  # not a static pool: nothing runs until a job waits
    if len(elastic) == len(json.loads(stack["trainium-eks:trainiumNodeGroups"])):
        assert not [ng for ng in plan.find(NG) if ng.inputs["amiType"] == "AL2023_x86_64_NEURON"]


TRN1, TRN2 = catalog.INSTANCE_TYPES["trn1.32xlarge"], catalog.INSTANCE_TYPES["trn2.48xlarge"]


def two_generations(provisioning: str):
    """A stack with a trn1 group and a trn2 group (in a Capacity Block, as the catalog sells trn2) of one kind."""
    groups = [{**group(t.name, provisioning), "name": t.name.replace(".", "-")} for t in (TRN1, TRN2)]
    return with_groups(TRN2.name, *groups)


def node_setup(plan, instance_type: str) -> dict:
    """What a group of ``instance_type`` gives its nodes, from either kind's resources: interfaces, placement group,
    instance store, node image, capacity, labels."""
    name = instance_type.replace(".", "-")
    pgs = [p for p in plan.find(PG) if p.name.endswith(f"-{name}-cluster")]
    managed = [g for g in plan.find(NG) if g.name.endswith(f"-{name}-ng")]
    if managed:
        (ng,) = managed
        lt = one([r for r in plan.find(LT) if r.urn in ng.property_dependencies["launchTemplate"]])
        kubelet, date = ng.inputs["releaseVersion"].rsplit("-", 1)
        return {
            "interfaces": lt.inputs["networkInterfaces"],
            "placement": (lt.inputs["placement"]["groupName"], lt.property_dependencies["placement"]),
            "user_data": base64.b64decode(lt.inputs["userData"]).decode(),
            "release": f"v{date}",
            "kubelet": kubelet,
            "capacity": (ng.inputs["capacityType"], lt.inputs.get("capacityReservationSpecification")),
            "labels": ng.inputs["labels"],
            "placement_group": one(pgs),
        }
    pool = pool_of(plan, name)
    node_class = one([c for c in plan.find(NODE_CLASS) if c.name.endswith(f"-{name}-nodeclass")])
    spec, requirements = node_class.inputs["spec"], pool.inputs["spec"]["template"]["spec"]["requirements"]
    (alias,) = [term["alias"] for term in spec["amiSelectorTerms"]]
    assert spec["instanceStorePolicy"] == "RAID0"
    return {
        "interfaces": spec["networkInterfaces"],
        "placement": (spec["placementGroupSelector"]["name"], node_class.property_dependencies["spec"]),
        "user_data": spec["userData"],
        "release": alias.removeprefix("al2023@"),  # Karpenter resolves the kubelet of the cluster's version itself
        "kubelet": None,
        "capacity": (
            next(r["values"] for r in requirements if r["key"] == "karpenter.sh/capacity-type"),
            spec.get("capacityReservationSelectorTerms"),
        ),
        "labels": pool.inputs["spec"]["template"]["metadata"]["labels"],
        "placement_group": one(pgs),
    }


@pytest.mark.parametrize("provisioning", ["managed", "karpenter"])
def test_a_trn2_group_beside_a_trn1_group_gets_its_generations_nodes(provisioning):
    plan = two_generations(provisioning)
    kubernetes = settings("staging").config["trainium-eks:kubernetesVersion"]
    block = sold_as(TRN2.name)["capacityReservation"]
    for spec in (TRN1, TRN2):
        node = node_setup(plan, spec.name)
        stack = versions.training_stack_of(spec.generation)
        release = versions.NODE_IMAGE_RELEASES[stack.default_node_image_release]
        # The EC2 guide's accelerated layout for the type's cards: ENA primary, one EFA-only interface per card.
        found = [(int(i["networkCardIndex"]), int(i["deviceIndex"]), i["interfaceType"]) for i in node["interfaces"]]
        assert found == ec2_recommended_layout(spec.network_cards)
        # The group's own cluster placement group.
        assert node["placement_group"].inputs["strategy"] == "cluster" and node["placement_group"].urn in node["placement"][1]
        # Its NVMe instance store as one RAID0 volume, where images and the compile cache go.
        (config,) = nodeadm_documents(node["user_data"])
        assert config["spec"]["instance"]["localStorage"]["strategy"] == "RAID0"
        # The release of its generation's training stack, whose driver the stack's runtime initialises on.
        assert node["release"] == release.tag and stack.runtime.runs_on(release.neuron_driver)
        assert node["kubelet"] in (None, release.kubelet_versions[kubernetes])
        assert node["labels"][layout.TRAINING_STACK_LABEL] == stack.name
    assert node_setup(plan, TRN1.name)["release"] != node_setup(plan, TRN2.name)["release"]
    assert node_setup(plan, TRN1.name)["placement"][0] != node_setup(plan, TRN2.name)["placement"][0]
    # trn2 launches into its Capacity Block; trn1 on demand.
    trn1_capacity, trn2_capacity = node_setup(plan, TRN1.name)["capacity"], node_setup(plan, TRN2.name)["capacity"]
    if provisioning == "managed":
        assert trn2_capacity == ("CAPACITY_BLOCK", {"capacityReservationTarget": {"capacityReservationId": block["id"]}})
        assert trn1_capacity == ("ON_DEMAND", None)
    else:
        # Its block by ID, and any block tagged for the group: a block bought later needs no stack edit.
        tag = {layout.CAPACITY_BLOCK_GROUP_TAG: layout.capacity_block_tag_value(plan.outputs["clusterName"], "trn2-48xlarge")}
        assert trn2_capacity == (["reserved"], [{"tags": tag}, {"id": block["id"]}])
        assert trn1_capacity == (["on-demand"], None)


def test_idle_minutes_set_when_an_empty_node_goes():
    plan = with_groups("trn1.32xlarge", group("trn1.32xlarge", "karpenter", idleMinutes=5))
    assert one(plan.find(NODE_POOL)).inputs["spec"]["disruption"]["consolidateAfter"] == "5m"
    assert plan.outputs["trainiumNodeGroupScaling"] == {"trn": {"provisioning": "karpenter", "idleMinutes": 5}}


def group_labels(resource: dict) -> dict:
    """The labels a node group or a pool gives its nodes (plan JSON)."""
    inputs = resource["inputs"]
    return inputs["spec"]["template"]["metadata"]["labels"] if resource["type"] == NODE_POOL else inputs.get("labels", {})


@pytest.mark.parametrize("stack", STACKS)
def test_an_idle_elastic_stack_pays_for_no_trainium_node(stack):
    result = run_preflight("plan", stack, "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    configured = {g["name"]: g for g in json.loads(settings(stack).config["trainium-eks:trainiumNodeGroups"])}
    group_of = {
        r["urn"]: group_labels(r)[layout.NODE_GROUP_LABEL]
        for r in plan["resources"]
        if r["type"] in (NODE_POOL, NG) and layout.NODE_GROUP_LABEL in group_labels(r)
    }
    # A group in a reservation pays for it busy or idle: the reservation's own tests price it.
    on_demand = {name for name, g in configured.items() if not g.get("capacityReservation")}
    estimate = plan["cost"]
    lines = [
        line
        for line in estimate["lines"]
        if group_of.get(line["urn"]) in on_demand and any(t in line["description"] for t in catalog.TRAINIUM_TYPES)
    ]
    assert {group_of[line["urn"]] for line in lines} == on_demand
    for line in lines:
        assert line["hourlyUsd"] > 0
        if configured[group_of[line["urn"]]].get("provisioning") == "karpenter":  # busy: the pool at maxSize; idle: none
            assert line["idleHourlyUsd"] == 0
        else:  # a managed group runs its nodes either way
            assert line["idleHourlyUsd"] == line["hourlyUsd"]
    if any(configured[name].get("provisioning") == "karpenter" for name in on_demand):
        assert estimate["idleMonthlyUsd"] < estimate["monthlyUsd"]
    text = run_preflight("plan", stack).stdout
    assert "USD/month busy" in text and "USD/month idle" in text


@pytest.mark.parametrize("kind", ["capacity-block", "odcr"])
def test_a_reserved_pool_pays_whether_or_not_it_runs_a_block_up_front_outside_the_month_an_odcr_every_month(kind):
    reservation = {
        "type": kind,
        "id": "cr-0123456789abcdef0",
        "azId": offering("trn1.32xlarge")["trainiumAzId"],
        "instanceCount": 2,
    }
    reservation |= {"hourlyUsd": 15.5} if kind == "capacity-block" else {}
    plan = with_groups("trn1.32xlarge", group("trn1.32xlarge", "karpenter", capacityReservation=reservation))
    node_class, pool = one(plan.find(NODE_CLASS)), one(plan.find(NODE_POOL))
    assert {"id": reservation["id"]} in node_class.inputs["spec"]["capacityReservationSelectorTerms"]
    assert node_class.inputs["metadata"]["annotations"][layout.CAPACITY_RESERVATION_AZ_TAG] == reservation["azId"]
    requirements = {r["key"]: r["values"] for r in pool.inputs["spec"]["template"]["spec"]["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ["reserved"]
    estimate = analysis.annotate(plan.to_json())["cost"]
    instances = [line for line in estimate["lines"] if "trn1.32xlarge" in line["description"]]
    if kind == "capacity-block":
        # Bought outside the stack and paid up front for its window: its own kind of line, in neither monthly figure.
        (block,) = estimate["prepaid"]
        assert (block["urn"], block["reservation"], block["instances"]) == (pool.urn, reservation["id"], 2)
        assert block["hourlyUsd"] == pytest.approx(2 * 15.5) and "paid up front" in block["description"]
        assert not instances, "the block's instances are not a running cost of the stack"
        assert all(line["idleHourlyUsd"] == 0 for line in estimate["lines"] if line["urn"] == pool.urn)
    else:
        # An ODCR is billed at the on-demand rate for as long as it exists, used or not.
        (odcr,) = instances
        rate = 2 * catalog.INSTANCE_TYPES["trn1.32xlarge"].price(offering("trn1.32xlarge")["aws:region"])
        assert odcr["hourlyUsd"] == odcr["idleHourlyUsd"] == pytest.approx(rate) and not estimate["prepaid"]


def test_karpenter_runs_on_the_system_nodes_with_its_queue_role_and_node_access():
    plan = evaluate("staging")
    by_urn = {r.urn: r for r in plan.resources}
    (crds,) = [r for r in plan.find(RELEASE) if r.inputs["chart"] == versions.KARPENTER_CRD_CHART.chart]
    (controller,) = [r for r in plan.find(RELEASE) if r.inputs["chart"] == versions.KARPENTER_CHART.chart]
    assert controller.inputs["version"] == crds.inputs["version"] == versions.KARPENTER_CHART.version
    assert controller.inputs["skipCrds"] is True and crds.urn in controller.dependencies  # CRDs upgrade with their chart
    values = controller.inputs["values"]
    assert values["replicas"] == 2 and values["podDisruptionBudget"]["maxUnavailable"] == 1
    assert values["nodeSelector"][layout.NODE_ROLE_LABEL] == layout.SYSTEM_NODE_ROLE
    assert values["settings"]["clusterName"] == plan.outputs["clusterName"]
    assert values["settings"]["clusterEndpoint"] == plan.outputs["clusterEndpoint"]
    queue = one(plan.find(QUEUE))
    assert values["settings"]["interruptionQueue"] == queue.inputs["name"]
    assert queue.inputs["messageRetentionSeconds"] == 300 and queue.inputs["sqsManagedSseEnabled"] is True
    karpenters = [r for r in plan.find(EVENT_RULE) if r.urn.startswith(queue.urn.split("$")[0] + "$")]
    assert {json.loads(r.inputs["eventPattern"])["detail-type"][0] for r in karpenters} >= {
        "EC2 Capacity Reservation Instance Interruption Warning",
        "EC2 Instance State-change Notification",
        "AWS Health Event",
    }
    # Each of Karpenter's rules feeds its queue (the stack's Capacity Block events rule notifies people, not Karpenter).
    targets = [t for t in plan.find(EVENT_TARGET) if t.urn.startswith(queue.urn.split("$")[0] + "$")]
    assert len(targets) == len(karpenters)
    for target in targets:
        assert queue.urn in target.property_dependencies["arn"]
    # The controller's role: IRSA for kube-system/karpenter, the account the values name.
    service_account = values["serviceAccount"]
    role = one([by_urn[u] for u in controller.property_dependencies["values"] if by_urn[u].type == ROLE])
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    subject = f"system:serviceaccount:kube-system:{service_account['name']}"
    assert [subject] in trust["Condition"]["StringEquals"].values()
    # Nodes join through the node role's EC2_LINUX access entry; the EC2NodeClass names that role.
    entry = one([e for e in plan.find(ACCESS_ENTRY) if e.inputs["type"] != "STANDARD"])  # STANDARD: the teams' members
    assert entry.inputs["type"] == "EC2_LINUX"
    node_role = one([by_urn[u] for u in entry.property_dependencies["principalArn"]])
    assert plan.find(NODE_CLASS) and all(node_role.urn in c.property_dependencies["spec"] for c in plan.find(NODE_CLASS))
    assert entry.urn in controller.dependencies


def test_karpenter_may_launch_and_end_only_this_clusters_nodes():
    plan = evaluate("staging")
    cluster = plan.outputs["clusterName"]
    scoped = []
    for policy in plan.find(IAM_POLICY):
        for statement in json.loads(policy.inputs["policy"])["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(a in ("ec2:TerminateInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags") for a in actions):
                assert f"kubernetes.io/cluster/{cluster}" in json.dumps(statement["Condition"]), statement["Sid"]
                scoped.append(statement["Sid"])
            if "iam:PassRole" in actions:
                assert statement["Resource"].startswith("arn:aws:iam::") and statement["Condition"]
            assert statement["Resource"] != "*" or not any(
                a.split(":")[1].startswith(("Run", "Create", "Terminate", "Delete")) for a in actions
            )
    assert scoped or not any(group.elastic for group in platform("staging").trainium_node_groups)  # Karpenter's, if any


def test_pools_are_created_after_karpenter_and_its_crds():
    plan = json.loads(run_preflight("plan", "staging", "--json").stdout)
    schedule = deployment.Schedule(Graph.from_records(plan["resources"]))
    steps = {node.urn: schedule.step(node) for node in schedule.graph}
    controller = next(u for u in steps if u.endswith("trainium-karpenter-karpenter"))
    for urn, step in steps.items():
        if urn.endswith(("-nodepool", "-nodeclass")):
            assert step.start >= steps[controller].finish, urn


def nodeadm_documents(user_data: str) -> list[dict]:
    """The NodeConfig documents of user data, read as nodeadm reads them: MIME parts of its media type, YAML inside."""
    parts = email.message_from_string(user_data).walk()
    return [yaml.safe_load(p.get_payload()) for p in parts if p.get_content_type() == "application/node.eks.aws"]


@pytest.mark.parametrize("instance_type", catalog.TRAINIUM_TYPES)
def test_both_kinds_pull_images_onto_the_instance_store_in_parallel(instance_type):
    lt, _, node_class, _, _, _ = both_kinds(instance_type)
    spec = node_class.inputs["spec"]
    assert lt.inputs["userData"] == base64.b64encode(spec["userData"].encode()).decode()  # one document, two encodings
    (config,) = nodeadm_documents(spec["userData"])
    assert (config["apiVersion"], config["kind"]) == ("node.eks.aws/v1alpha1", "NodeConfig")
    assert config["spec"]["instance"]["localStorage"]["strategy"] == spec["instanceStorePolicy"] == "RAID0"
    assert catalog.INSTANCE_TYPES[instance_type].instance_store_gb > 0
    release = versions.NODE_IMAGE_RELEASES[spec["amiSelectorTerms"][0]["alias"].split("@")[1]]
    assert config["spec"]["featureGates"] == {"FastImagePull": True} and release.fast_image_pull


def test_a_node_without_instance_store_or_fast_pulls_gets_no_user_data(monkeypatch):
    # The system nodes (m6i, EBS only, no feature gate asked) boot with EKS's bootstrap alone.
    system = one([r for r in evaluate("dev").find(LT) if r.name.endswith("-system")])
    assert "userData" not in system.inputs
    monkeypatch.setattr(versions, "FAST_IMAGE_PULL_SINCE", "v99999999")  # a release whose nodeadm lacks the gate
    lt, *_ = both_kinds("trn1.32xlarge")
    (config,) = nodeadm_documents(base64.b64decode(lt.inputs["userData"]).decode())
    assert "featureGates" not in config["spec"] and config["spec"]["instance"]["localStorage"]["strategy"] == "RAID0"
