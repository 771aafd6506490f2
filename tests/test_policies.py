"""Policy packs: every stack passes; every rule catches a minimal mutation of a real stack's graph or config."""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import STACKS, evaluate, node_group_config, settings
from policies.packs import PACKS
from preflight import check

ALL_POLICIES = {p.name for pack in PACKS for p in pack.policies}


@functools.cache
def _plan_json(stack: str, preview: bool = False) -> str:
    return json.dumps(evaluate(stack, preview=preview).to_json())


def plan_of(stack: str, preview: bool = False) -> dict:
    return json.loads(_plan_json(stack, preview))


def findings(plan: dict, stack: str | None = None, config: dict | None = None) -> check.CheckResult:
    stack = stack or plan["stack"]
    policy_config = check.load_policy_config(stack) if config is None else config
    return check.check_plan(plan, policy_config, f"{stack}.json")


def resource(plan: dict, type_: str, name_part: str = "") -> dict:
    matches = [r for r in plan["resources"] if r["type"] == type_ and name_part in r["name"]]
    assert matches, (type_, name_part)
    return matches[0]


def caught(policy: str, plan: dict, stack: str | None = None, config: dict | None = None) -> list[check.Finding]:
    result = findings(plan, stack, config)
    hits = [v for v in result.violations if v.policy == policy and v.enforcement_level == "mandatory"]
    assert hits, f"{policy} did not fire: {[(v.policy, v.message) for v in result.violations]}"
    return hits


def trainium_node_group(plan: dict) -> dict:
    return next(
        r for r in plan["resources"] if r["type"] == "aws:eks/nodeGroup:NodeGroup" and r["inputs"]["amiType"].endswith("NEURON")
    )


def trainium_template(plan: dict) -> dict:
    return next(r for r in plan["resources"] if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate" and "-lt" in r["name"])


# ---- every stack passes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("preview", [False, True], ids=["update", "preview"])
@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_pass_every_policy(stack, preview):
    result = findings(plan_of(stack, preview))
    assert result.violations == [], [(v.policy, v.message) for v in result.violations]


# ---- trainium-topology --------------------------------------------------------------------------------


def test_node_group_in_two_subnets_is_caught():
    plan = plan_of("staging")
    ng, az1 = trainium_node_group(plan), resource(plan, "aws:ec2/subnet:Subnet", "private-az1")
    ng["inputs"]["subnetIds"].append("subnet-other")
    ng["propertyDependencies"]["subnetIds"].append(az1["urn"])
    (hit,) = caught("trainium-node-group-single-az", plan)
    assert hit.urn == ng["urn"] and "2 subnets" in hit.message


def test_missing_or_misplaced_efa_interface_is_caught():
    plan = plan_of("staging")
    template = trainium_template(plan)
    template["inputs"]["networkInterfaces"].pop()
    assert "network cards [0, 1, 2, 3, 4, 5, 6]" in caught("trainium-efa-interface-per-network-card", plan)[0].message
    plan = plan_of("prod")
    trainium_template(plan)["inputs"]["networkInterfaces"][3]["deviceIndex"] = 0.0
    assert "network card 3 at device index 0" in caught("trainium-efa-interface-per-network-card", plan)[0].message


def test_missing_placement_group_or_wrong_strategy_is_caught():
    plan = plan_of("staging")
    template = trainium_template(plan)
    del template["inputs"]["placement"]
    template["propertyDependencies"]["placement"] = []
    caught("trainium-cluster-placement-group", plan)
    plan = plan_of("staging")
    resource(plan, "aws:ec2/placementGroup:PlacementGroup")["inputs"]["strategy"] = "spread"
    assert "spread" in caught("trainium-cluster-placement-group", plan)[0].message


def test_non_neuron_ami_is_caught():
    plan = plan_of("dev")
    trainium_node_group(plan)["inputs"]["amiType"] = "AL2023_x86_64_STANDARD"
    caught("trainium-neuron-ami", plan)


def test_efa_group_without_self_egress_is_caught():
    plan = plan_of("prod")
    efa_group = resource(plan, "aws:ec2/securityGroup:SecurityGroup", "-efa")
    efa_group["inputs"]["egress"] = [r for r in efa_group["inputs"]["egress"] if not r.get("self")]
    caught("efa-security-group-self-traffic", plan)


def test_az_without_the_instance_type_is_caught():
    plan = plan_of("staging")
    resource(plan, "aws:ec2/subnet:Subnet", "private-trainium")["inputs"]["availabilityZoneId"] = "use1-az1"
    assert "use1-az1 (us-east-1) does not offer trn1.32xlarge" in caught("trainium-az-offers-instance-type", plan)[0].message


def test_file_system_outside_the_trainium_az_is_caught():
    plan = plan_of("staging")
    fsx, az1 = resource(plan, "aws:fsx/lustreFileSystem:LustreFileSystem"), resource(plan, "aws:ec2/subnet:Subnet", "private-az1")
    fsx["propertyDependencies"]["subnetIds"] = [az1["urn"]]
    caught("fsx-lustre-in-trainium-az", plan)


def test_lustre_client_ports_closed_is_caught():
    plan = plan_of("dev")
    plan["resources"] = [r for r in plan["resources"] if r["inputs"].get("fromPort") != 1018]
    assert any("1018-1023" in h.message for h in caught("fsx-lustre-ports-reachable", plan))


def test_missing_device_plugin_or_toleration_is_caught():
    plan = plan_of("staging")
    plan["resources"] = [r for r in plan["resources"] if r["name"] != "neuron-device-plugin"]
    assert "neuron-helm-chart" in caught("neuron-and-efa-device-plugins", plan)[0].message
    plan = plan_of("staging")
    resource(plan, "kubernetes:helm.sh/v3:Release", "efa-device-plugin")["inputs"]["values"]["tolerations"] = []
    assert "does not tolerate" in caught("neuron-and-efa-device-plugins", plan)[0].message


def test_queue_beyond_capacity_or_no_queue_is_caught():
    plan = plan_of("prod")
    queue = resource(plan, "kubernetes:scheduling.volcano.sh/v1beta1:Queue", "training")
    queue["inputs"]["spec"]["capability"]["aws.amazon.com/neuron"] = 999.0
    caught("volcano-queue-within-capacity", plan)
    plan = plan_of("dev")
    plan["resources"] = [r for r in plan["resources"] if not r["type"].endswith(":Queue")]
    caught("volcano-queue-within-capacity", plan)


def test_etcd_without_v2_or_unpinned_is_caught():
    plan = plan_of("dev")
    container = resource(plan, "kubernetes:apps/v1:StatefulSet")["inputs"]["spec"]["template"]["spec"]["containers"][0]
    container["args"].remove("--enable-v2=true")
    container["image"] = "quay.io/coreos/etcd:v3.6.14"
    messages = [h.message for h in caught("etcd-pinned-with-v2-api", plan)]
    assert any("v3.5" in m for m in messages) and any("--enable-v2" in m for m in messages)


def test_capacity_reservation_outside_the_trainium_az_is_caught():
    az = settings("staging").config["trainium-eks:trainiumAzId"]
    reservation = {"type": "odcr", "id": "cr-0123456789abcdef0", "azId": az}
    plan = evaluate(
        "staging", trainiumNodeGroups=[node_group_config("trn1-32xl", "trn1.32xlarge", capacityReservation=reservation)]
    ).to_json()
    assert not findings(plan).violations
    trainium_template(plan)["inputs"]["tags"]["trainium-eks/capacity-reservation-az-id"] = "use1-az1"
    caught("capacity-reservation-in-trainium-az", plan)


# ---- security-baseline --------------------------------------------------------------------------------


def test_imdsv1_is_caught():
    plan = plan_of("dev")
    trainium_template(plan)["inputs"]["metadataOptions"]["httpTokens"] = "optional"
    caught("ec2-launch-template-imdsv2-required", plan)


def test_unencrypted_root_volume_is_caught():
    plan = plan_of("dev")
    trainium_template(plan)["inputs"]["blockDeviceMappings"][0]["ebs"]["encrypted"] = "false"
    caught("ec2-launch-template-encrypted-block-devices", plan)


@pytest.mark.parametrize(
    ("type_", "edit"),
    [
        ("eks:index:Cluster", lambda inputs: inputs.pop("encryptionConfigKeyArn")),
        ("aws:fsx/lustreFileSystem:LustreFileSystem", lambda inputs: inputs.pop("kmsKeyId")),
        ("aws:ecr/repository:Repository", lambda inputs: inputs.update(encryptionConfigurations=[{"encryptionType": "AES256"}])),
    ],
    ids=["eks", "fsx", "ecr"],
)
def test_missing_kms_encryption_is_caught(type_, edit):
    plan = plan_of("staging")
    edit(resource(plan, type_)["inputs"])
    caught("kms-encryption-at-rest", plan)


def test_missing_control_plane_log_type_is_caught():
    plan = plan_of("prod")
    resource(plan, "eks:index:Cluster")["inputs"]["enabledClusterLogTypes"].remove("audit")
    assert "audit" in caught("eks-control-plane-logging", plan)[0].message


def test_config_map_authentication_is_caught():
    plan = plan_of("prod")
    resource(plan, "eks:index:Cluster")["inputs"]["authenticationMode"] = "CONFIG_MAP"
    caught("eks-authentication-mode-api", plan)


def test_public_endpoint_is_caught_where_forbidden_or_open_to_the_world():
    prod_public = evaluate("prod", endpointPublicAccess=True, publicAccessCidrs=["203.0.113.0/24"]).to_json()
    assert "forbids" in caught("eks-endpoint-public-access", prod_public)[0].message
    dev_world = evaluate("dev", publicAccessCidrs=["0.0.0.0/0"]).to_json()
    assert "open to the internet" in caught("eks-endpoint-public-access", dev_world)[0].message


def test_world_ingress_is_caught():
    plan = plan_of("dev")
    group = resource(plan, "aws:ec2/securityGroup:SecurityGroup", "-lustre")
    group["inputs"]["ingress"] = [{"protocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "cidrBlocks": ["0.0.0.0/0"]}]
    caught("security-group-no-world-ingress", plan)
    plan = plan_of("dev")
    rule = resource(plan, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "lustre-from-nodes")
    rule["inputs"]["cidrIpv4"] = "0.0.0.0/0"
    caught("security-group-no-world-ingress", plan)


def test_wildcard_admin_policy_is_caught():
    plan = plan_of("dev")
    resource(plan, "aws:iam/rolePolicy:RolePolicy")["inputs"]["policy"] = json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    )
    caught("iam-no-wildcard-admin", plan)


def test_full_access_policy_on_a_service_account_role_is_caught():
    plan = plan_of("dev")
    resource(plan, "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "ebs-csi")["inputs"]["policyArn"] = (
        "arn:aws:iam::aws:policy/AmazonFSxFullAccess"
    )
    caught("irsa-no-full-access-policies", plan)
    plan = plan_of("dev")  # the same policy on the EC2 node role is not an IRSA role
    resource(plan, "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "node-ssm")["inputs"]["policyArn"] = (
        "arn:aws:iam::aws:policy/AmazonFSxFullAccess"
    )
    assert not [v for v in findings(plan).violations if v.policy == "irsa-no-full-access-policies"]


def test_mutable_or_unscanned_repository_is_caught():
    plan = plan_of("dev")
    repository = resource(plan, "aws:ecr/repository:Repository")["inputs"]
    repository["imageTagMutability"] = "MUTABLE"
    repository["imageScanningConfiguration"]["scanOnPush"] = False
    assert len(caught("ecr-immutable-scan-on-push", plan)) == 2


def test_latest_image_is_caught():
    plan = plan_of("dev")
    deployment = resource(plan, "kubernetes:apps/v1:Deployment")["inputs"]
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "tensorflow/tensorflow:latest"
    caught("container-images-pinned", plan)


def test_unpinned_chart_or_unknown_repository_is_caught():
    plan = plan_of("dev")
    resource(plan, "kubernetes:helm.sh/v3:Release", "volcano")["inputs"]["version"] = "1.x"
    caught("helm-release-pinned", plan)
    plan = plan_of("dev")
    resource(plan, "kubernetes:helm.sh/v3:Release", "volcano")["inputs"]["repositoryOpts"]["repo"] = "https://charts.example.com"
    assert "not an allowed chart repository" in caught("helm-release-pinned", plan)[0].message


def test_public_tensorboard_is_caught():
    plan = plan_of("dev")
    service = next(
        r
        for r in plan["resources"]
        if r["type"] == "kubernetes:core/v1:Service" and r["inputs"]["metadata"]["name"] == "tensorboard"
    )
    service["inputs"]["spec"]["type"] = "LoadBalancer"
    caught("no-public-load-balancer", plan)


def test_unprotected_state_is_caught_in_prod():
    plan = evaluate("prod", protectStatefulResources=False).to_json()
    hits = caught("stateful-resources-protected", plan)
    assert any("LustreFileSystem" in h.message for h in hits)
    assert not [v for v in findings(evaluate("dev").to_json()).violations if v.policy == "stateful-resources-protected"]


# ---- cost-guard ---------------------------------------------------------------------------------------


def test_node_ceiling_is_caught():
    group = {**node_group_config("trn1-32xl", "trn1.32xlarge"), "maxSize": 3}
    plan = evaluate("staging", trainiumNodeGroups=[group]).to_json()
    assert "grow to 3 nodes" in caught("trainium-node-limit", plan)[0].message


def test_budget_is_caught():
    plan = plan_of("staging")
    trainium_node_group(plan)["inputs"]["scalingConfig"].update(desiredSize=4.0, maxSize=4.0)
    hit = caught("monthly-cost-budget", plan)[0]
    assert "trn1.32xlarge" in hit.message and "36,000" in hit.message


def test_missing_tags_are_caught_or_remediated_per_stack_config():
    plan = plan_of("staging")
    del resource(plan, "aws:ecr/repository:Repository")["inputs"]["tags"]["owner"]
    assert "owner" in caught("required-tags", plan)[0].message
    plan = plan_of("dev")  # dev remediates with its default tags
    repository = resource(plan, "aws:ecr/repository:Repository")
    del repository["inputs"]["tags"]["owner"]
    result = findings(plan)
    assert not result.violations
    assert [(r.policy, r.urn) for r in result.remediations] == [("required-tags", repository["urn"])]


# ---- coverage and configuration ------------------------------------------------------------------------


def test_every_policy_has_a_mutation_test():
    tested = set(re.findall(r'caught\(\s*"([a-z0-9-]+)"', Path(__file__).read_text()))
    assert ALL_POLICIES - tested == set(), f"no mutation test for {sorted(ALL_POLICIES - tested)}"
    assert tested <= ALL_POLICIES


def test_every_policy_is_documented():
    guide = (Path(__file__).resolve().parents[1] / "docs" / "policies.md").read_text()
    assert {name for name in ALL_POLICIES if f"`{name}`" not in guide} == set()


def test_workflows_pair_every_pack_with_the_stack_config():
    root = Path(__file__).resolve().parents[1]
    pulumi_steps = [
        (workflow.name, step)
        for workflow in (root / ".github" / "workflows").glob("*.yml")
        for job in yaml.safe_load(workflow.read_text())["jobs"].values()
        for step in job.get("steps", [])
        if str(step.get("uses", "")).startswith("pulumi/actions")
    ]
    assert {step["with"]["command"] for _, step in pulumi_steps} == {"preview", "up"}
    for workflow, step in pulumi_steps:
        packs, configs = step["with"]["policyPacks"].split(), step["with"]["policyPackConfigs"].splitlines()
        assert sorted(packs) == sorted(f"policies/{p.name}" for p in PACKS), workflow
        assert len(configs) == len(packs) and all(c.startswith("policies/config/") for c in configs), workflow


def test_policy_config_files_are_valid_for_every_pack():
    for stack in STACKS:
        config = check.load_policy_config(stack)
        unknown = set(config) - ALL_POLICIES - {"all"}
        assert not unknown, f"policies/config/{stack}.json names unknown policies {unknown}"
        for pack in PACKS:
            check.reconcile(pack, config, stack)


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"monthly-cost-budget": {"maxMonthlyUsd": "lots"}}, "monthly-cost-budget.maxMonthlyUsd"),
        ({"monthly-cost-budget": {"maxMonthyUsd": 10}}, "Additional properties"),
        ({"required-tags": "sometimes"}, "not an enforcement level"),
    ],
)
def test_invalid_policy_config_is_rejected(config, words):
    with pytest.raises(check.PolicyConfigError, match=words):
        for pack in PACKS:
            check.reconcile(pack, config, "test.json")


def test_enforcement_levels_follow_the_config():
    plan = plan_of("dev")
    trainium_node_group(plan)["inputs"]["amiType"] = "AL2023_x86_64_STANDARD"
    advisory = findings(plan, config={**check.load_policy_config("dev"), "trainium-neuron-ami": "advisory"}).violations
    assert [(v.policy, v.enforcement_level) for v in advisory] == [("trainium-neuron-ami", "advisory")]
    assert not findings(plan, config={"all": "disabled"}).violations


def test_graph_mutation_does_not_leak_between_tests():
    assert copy.deepcopy(plan_of("dev")) == plan_of("dev")
