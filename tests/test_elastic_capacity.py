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
from support import STACKS, evaluate, offering, one, run_preflight, settings
from test_trainium_node_group import with_groups

from preflight import analysis
from trainium_eks import catalog, deployment, layout, versions
from trainium_eks.graph import Graph

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
    return {"name": "trn", "instanceType": instance_type, "provisioning": provisioning, "maxSize": 2, **sizes, **extra}


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


def test_an_elastic_pool_scales_from_zero_to_max_size_and_never_empties_a_busy_node():
    plan = evaluate("staging")
    pool = one(plan.find(NODE_POOL)).inputs["spec"]
    configured = json.loads(settings("staging").config["trainium-eks:trainiumNodeGroups"])[0]
    spec = catalog.INSTANCE_TYPES[configured["instanceType"]]
    requirements = {r["key"]: (r["operator"], r["values"]) for r in pool["template"]["spec"]["requirements"]}
    assert requirements["node.kubernetes.io/instance-type"] == ("In", [configured["instanceType"]])
    assert requirements["topology.k8s.aws/zone-id"] == ("In", [settings("staging").config["trainium-eks:trainiumAzId"]])
    assert requirements["karpenter.sh/capacity-type"] == ("In", ["on-demand"])
    # Karpenter launches no node past a limit: maxSize nodes of the one type.
    assert int(pool["limits"]["cpu"]) == configured["maxSize"] * spec.vcpus
    assert int(pool["limits"]["cpu"]) < (configured["maxSize"] + 1) * spec.vcpus
    assert pool["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30m"}  # the default idle time
    assert pool["template"]["spec"]["expireAfter"] == "Never" and "terminationGracePeriod" not in pool["template"]["spec"]
    assert "replicas" not in pool  # not a static pool: nothing runs until a job waits
    assert not [ng for ng in plan.find(NG) if ng.inputs["amiType"] == "AL2023_x86_64_NEURON"]


def test_idle_minutes_set_when_an_empty_node_goes():
    plan = with_groups("trn1.32xlarge", group("trn1.32xlarge", "karpenter", idleMinutes=5))
    assert one(plan.find(NODE_POOL)).inputs["spec"]["disruption"]["consolidateAfter"] == "5m"
    assert plan.outputs["trainiumNodeGroupScaling"] == {"trn": {"provisioning": "karpenter", "idleMinutes": 5}}


@pytest.mark.parametrize("stack", STACKS)
def test_an_idle_elastic_stack_pays_for_no_trainium_node(stack):
    result = run_preflight("plan", stack, "--json")
    assert result.returncode == 0, result.stderr
    estimate = json.loads(result.stdout)["cost"]
    trainium = [line for line in estimate["lines"] if any(t in line["description"] for t in catalog.TRAINIUM_TYPES)]
    assert trainium and all(line["hourlyUsd"] > 0 for line in trainium)
    scaling = json.loads(result.stdout)["outputs"]["trainiumNodeGroupScaling"]
    elastic = all(s["provisioning"] == "karpenter" for s in scaling.values())
    if elastic:  # dev and staging: busy costs the pool at maxSize, idle none of it
        assert all(line["idleHourlyUsd"] == 0 for line in trainium)
        assert estimate["idleMonthlyUsd"] < estimate["monthlyUsd"]
    else:  # prod's managed group runs its nodes either way
        assert all(line["idleHourlyUsd"] == line["hourlyUsd"] for line in trainium)
    text = run_preflight("plan", stack).stdout
    assert "USD/month busy" in text and "USD/month idle" in text


def test_a_capacity_block_pool_is_priced_as_the_block_whether_or_not_it_runs():
    reservation = {
        "type": "capacity-block",
        "id": "cr-0123456789abcdef0",
        "azId": offering("trn1.32xlarge")["trainiumAzId"],
        "instanceCount": 2,
        "hourlyUsd": 15.5,
    }
    plan = with_groups("trn1.32xlarge", group("trn1.32xlarge", "karpenter", capacityReservation=reservation))
    node_class, pool = one(plan.find(NODE_CLASS)).inputs, one(plan.find(NODE_POOL)).inputs["spec"]
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [{"id": reservation["id"]}]
    assert node_class["metadata"]["annotations"][layout.CAPACITY_RESERVATION_AZ_TAG] == reservation["azId"]
    requirements = {r["key"]: r["values"] for r in pool["template"]["spec"]["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ["reserved"]
    lines = [line for line in analysis.annotate(plan.to_json())["cost"]["lines"] if "trn1.32xlarge" in line["description"]]
    (block,) = lines
    assert "Capacity Block" in block["description"] and "on demand" not in block["description"]
    assert block["hourlyUsd"] == block["idleHourlyUsd"] == pytest.approx(2 * 15.5)


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
    rules = plan.find(EVENT_RULE)
    assert {json.loads(r.inputs["eventPattern"])["detail-type"][0] for r in rules} >= {
        "EC2 Capacity Reservation Instance Interruption Warning",
        "EC2 Instance State-change Notification",
        "AWS Health Event",
    }
    for target in plan.find(EVENT_TARGET):
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
    assert node_role.urn in one(plan.find(NODE_CLASS)).property_dependencies["spec"]
    assert entry.urn in controller.dependencies


def test_karpenter_may_launch_and_end_only_this_clusters_nodes():
    plan = evaluate("staging")
    cluster = plan.outputs["clusterName"]
    for policy in plan.find(IAM_POLICY):
        for statement in json.loads(policy.inputs["policy"])["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if any(a in ("ec2:TerminateInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags") for a in actions):
                scoped = json.dumps(statement["Condition"])
                assert f"kubernetes.io/cluster/{cluster}" in scoped, statement["Sid"]
            if "iam:PassRole" in actions:
                assert statement["Resource"].startswith("arn:aws:iam::") and statement["Condition"]
            assert statement["Resource"] != "*" or not any(
                a.split(":")[1].startswith(("Run", "Create", "Terminate", "Delete")) for a in actions
            )


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
