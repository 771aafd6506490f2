"""Limits that hold: node counts the subnets' addresses cannot carry (counted as the VPC CNI takes them), a file system
beyond the account's quota, an image size no node holds, a reservation given to two groups (and billed twice), the
launcher's and the first-step estimate's node counts, README's scaling example, lists longer than EKS takes, values the CLI would
read otherwise (a boolean spelling, a null, a control character in a tag), a key given twice, a policy config that
names no policy or is missing, and stack outputs the job tools cannot use. Each is one line naming the key and the
fix, exit status 2 where a command reads it.

The cases edit the fixture stacks (tests/fixture_stacks), their Trainium groups where the catalog offers the type, so that
no shipped stack's values are assumed."""

from __future__ import annotations

import ipaddress
import json
import math
import re

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from job_outputs import outputs_file, run_module
from support import (
    FIXTURE_STACKS,
    MINIMAL_PLAN,
    cached_plan,
    evaluate,
    node_group_config,
    offering,
    one_line,
    run_preflight,
    settings,
    stack_copy,
)

from plan_graph import cost
from plan_graph.graph import Graph
from preflight import analysis, check, stackfile
from trainium_eks import catalog
from trainium_eks.config import ConfigError, parse
from trainium_eks.contract import ContractError, PlatformContract

POOL = {"name": "trn1-32xl", "instanceType": "trn1.32xlarge", "provisioning": "karpenter"}
# The fixture staging stack without teams, where the catalog offers trn1.32xlarge: the groups below are of that type.
STAGING = {"teams": [], **offering("trn1.32xlarge")}
DEV_FILE = str(FIXTURE_STACKS / "Pulumi.dev.yaml")


def staging(**overrides) -> stackfile.StackSettings:
    return settings("staging", fixture=True, **{**STAGING, **overrides})


def refusal(**overrides) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(staging(**overrides).config, stack="staging")
    message = str(caught.value)
    assert "\n" not in message and "; " in message, message
    return message


def trainium_subnet_addresses(vpc_cidr: str) -> int:
    """The Trainium subnet is the first of four equal blocks of the VPC's first half; AWS keeps five addresses."""
    subnet = next(ipaddress.IPv4Network(vpc_cidr).subnets(new_prefix=ipaddress.IPv4Network(vpc_cidr).prefixlen + 3))
    return subnet.num_addresses - 5


def running_node(instance_type: str) -> int:
    """What a running node of an EFA-only layout takes: the VPC CNI's interface for its pods and its warm one, every
    address of both (the EFA-only interfaces have none)."""
    spec = catalog.INSTANCE_TYPES[instance_type]
    assert spec.efa_only_interfaces
    return 2 * spec.ipv4_per_interface


# ---- addresses --------------------------------------------------------------------------------------------------


# The VPC CNI and kube-proxy, which eni-max-pods.txt adds to the pods with addresses ([MAX-PODS] in trainium_eks/catalog.py).
HOST_NETWORK_PODS = 2


@pytest.mark.parametrize("instance_type", [t for t, spec in catalog.INSTANCE_TYPES.items() if spec.max_pods])
def test_the_cni_limits_give_the_eks_ami_max_pods(instance_type):
    """eni-max-pods.txt is the CNI's interfaces x (addresses - 1) + 2: the two tables the catalog cites agree."""
    spec = catalog.INSTANCE_TYPES[instance_type]
    assert spec.cni_interfaces * (spec.ipv4_per_interface - 1) + HOST_NETWORK_PODS == spec.max_pods


@pytest.mark.parametrize("vpc_cidr", ["10.0.0.0/20", "10.0.0.0/16"])
def test_a_pool_fits_its_subnet_up_to_the_last_running_node(vpc_cidr):
    fitting = trainium_subnet_addresses(vpc_cidr) // running_node("trn1.32xlarge")
    accepted = parse(staging(vpcCidr=vpc_cidr, trainiumNodeGroups=[{**POOL, "maxSize": fitting}]).config, stack="staging")
    assert accepted.trainium_node_groups[0].scaling.max_size == fitting
    message = refusal(vpcCidr=vpc_cidr, trainiumNodeGroups=[{**POOL, "maxSize": fitting + 1}])
    assert message.startswith("trainium-eks:trainiumNodeGroups[0].maxSize:")
    assert str(trainium_subnet_addresses(vpc_cidr)) in message and "lower maxSize" in message
    assert ("widen vpcCidr" in message) is (vpc_cidr != "10.0.0.0/16")  # a /16 is as wide as a VPC gets here


def test_thousands_of_nodes_are_refused_where_two_addresses_a_node_passed():
    message = refusal(trainiumNodeGroups=[{**POOL, "maxSize": 4000}])
    assert message.startswith("trainium-eks:trainiumNodeGroups[0].maxSize:") and "warm" in message
    assert "maxSize" in refusal(trainiumNodeGroups=[{**POOL, "maxSize": 10**23}]).split(": ")[0]
    assert refusal(systemNodeMaxSize=100000).startswith("trainium-eks:systemNodeMaxSize:")


def test_two_groups_share_the_subnet():
    half = trainium_subnet_addresses("10.0.0.0/20") // running_node("trn1.32xlarge") // 2 + 1
    groups = [node_group_config(f"trn1-{i}", "trn1.32xlarge", size=half) for i in range(2)]
    message = refusal(vpcCidr="10.0.0.0/20", trainiumNodeGroups=groups)
    assert message.startswith("trainium-eks:trainiumNodeGroups[1].maxSize:") and "with the groups before it" in message


@hypothesis_settings(max_examples=40, deadline=None)
@given(st.integers(1, 10**30))
def test_any_pool_size_is_accepted_exactly_when_its_running_nodes_fit(max_size):
    fits = max_size * running_node("trn1.32xlarge") <= trainium_subnet_addresses("10.0.0.0/20")
    raw = staging(vpcCidr="10.0.0.0/20", trainiumNodeGroups=[{**POOL, "maxSize": max_size}]).config
    if fits:
        parse(raw, stack="staging")
    else:
        with pytest.raises(ConfigError, match="maxSize"):
            parse(raw, stack="staging")


def test_plan_prints_what_the_rule_counts_and_warns_when_crowded_nodes_would_not_fit(tmp_path):
    subnet = trainium_subnet_addresses("10.0.0.0/20")
    spec = catalog.INSTANCE_TYPES["trn1.32xlarge"]
    size = subnet // running_node("trn1.32xlarge")  # the most the rule accepts; crowded, they need more than the subnet
    assert size * spec.node_addresses(0, crowded=True) > subnet

    def edit(config):
        config["aws:region"], config["trainium-eks:trainiumAzId"] = STAGING["aws:region"], STAGING["trainiumAzId"]
        config["trainium-eks:vpcCidr"] = "10.0.0.0/20"
        config["trainium-eks:teams"] = []
        config["trainium-eks:trainiumNodeGroups"] = [{**POOL, "maxSize": size}]

    result = run_preflight("plan", "staging", "--stack-file", stack_copy(tmp_path, "staging", edit, fixture=True))
    assert result.returncode == 0, result.stderr
    assert f"({subnet:,} usable)" in result.stdout
    assert f"{running_node('trn1.32xlarge')} per running trn1.32xlarge node" in result.stdout
    assert (
        f"{size * running_node('trn1.32xlarge'):,} to {size * spec.node_addresses(0, crowded=True):,} at maxSize" in result.stdout
    )
    assert "pods past what a running node holds may wait for an address" in result.stdout


# ---- the file system --------------------------------------------------------------------------------------------


def test_a_file_system_beyond_the_accounts_default_quota_is_refused():
    quota = catalog.FSX_LUSTRE_STORAGE_QUOTA_GIB[STAGING["aws:region"]]
    largest = quota - quota % 2400
    storage = {"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 125}
    assert parse(staging(fsxStorageCapacityGiB=largest, **storage).config, stack="staging")
    for capacity in (largest + 2400, 240_000_000):
        message = refusal(fsxStorageCapacityGiB=capacity, **storage)
        assert message.startswith("trainium-eks:fsxStorageCapacityGiB:") and f"{quota:,} GiB" in message
        assert f"use at most {largest:,} GiB" in message


# ---- the image size of the first-step estimate ------------------------------------------------------------------


@pytest.mark.parametrize("size", ["1e308", "inf", "nan", "0", "-1", "8000", "ten"])
def test_an_image_size_no_node_can_hold_is_refused_in_one_line(size):
    one_line(run_preflight("plan", "dev", "--stack-file", DEV_FILE, "--image-gib", size), "--image-gib", "is not an image size")


def test_a_plausible_image_size_is_counted_in_dollars_and_minutes():
    result = run_preflight("plan", "dev", "--stack-file", DEV_FILE, "--json", "--image-gib", "25")
    assert result.returncode == 0, result.stderr
    pulls = [t for step in json.loads(result.stdout)["firstStep"] for t in step["terms"] if "image pull" in t["what"]]
    assert pulls and all(t["minutes"] and math.isfinite(t["minutes"]) and "inf" not in t["source"] for t in pulls)


# ---- capacity reservations --------------------------------------------------------------------------------------

RESERVATION = {"type": "odcr", "id": "cr-0123456789abcdef0", "instanceCount": 2}


def reserved_groups(*ids: str) -> list[dict]:
    az = STAGING["trainiumAzId"]
    return [
        node_group_config(f"trn1-{i}", "trn1.32xlarge", size=1, capacityReservation={**RESERVATION, "id": cr, "azId": az})
        for i, cr in enumerate(ids)
    ]


def test_a_reservation_serves_one_group():
    message = refusal(trainiumNodeGroups=reserved_groups("cr-0123456789abcdef0", "cr-0123456789abcdef0"))
    assert message.startswith("trainium-eks:trainiumNodeGroups[1].capacityReservation.id:") and "trn1-0" in message


def test_a_reservation_two_groups_name_is_billed_once():
    groups = reserved_groups("cr-0123456789abcdef0", "cr-0fedcba9876543210")
    plan = evaluate("staging", fixture=True, **STAGING, trainiumNodeGroups=groups)
    region = STAGING["aws:region"]
    separate = cost.estimate(Graph.from_records(plan.to_json()["resources"]), region)
    shared = plan.to_json()
    for resource in shared["resources"]:  # a hand-edited plan: the second group's template names the first reservation
        target = (resource["inputs"].get("capacityReservationSpecification") or {}).get("capacityReservationTarget")
        if target and target.get("capacityReservationId") == "cr-0fedcba9876543210":
            target["capacityReservationId"] = "cr-0123456789abcdef0"
    once = cost.estimate(Graph.from_records(shared["resources"]), region)
    per_reservation = RESERVATION["instanceCount"] * catalog.INSTANCE_TYPES["trn1.32xlarge"].price(region)
    assert separate.hourly_usd - once.hourly_usd == pytest.approx(per_reservation)
    assert any("paid for with the group before" in line.description for line in once.lines)


# ---- one node count for the launcher and the first-step estimate -----------------------------------------------


def test_the_first_step_counts_the_nodes_the_launcher_lets_a_job_take():
    groups = [node_group_config("trn1n", "trn1n.32xlarge", size=2) | {"maxSize": 6}]
    plan = analysis.annotate(evaluate("prod", fixture=True, trainiumNodeGroups=groups, **offering("trn1n.32xlarge")).to_json())
    contract = PlatformContract.from_outputs(plan["outputs"])
    (step,) = plan["firstStep"]
    assert step["nodes"] == contract.node_ceiling(contract.node_groups[0]) == 2


# ---- README "Scaling" -------------------------------------------------------------------------------------------


def test_the_readme_scaling_example_passes_the_packs_or_says_which_policy_it_meets():
    """README speaks of the stacks as shipped, whose copies the fixture stacks are: a user's edits do not change it."""
    text = (stackfile.REPO_ROOT / "README.md").read_text()
    section = text[text.index("### Scaling") : text.index("### How elastic capacity")]
    stack, group, desired = re.search(r"run (\w+)'s `([\w-]+)` group.*?`desiredSize: (\d+)`", section, re.S).groups()
    groups = json.loads(settings(stack, fixture=True).config["trainium-eks:trainiumNodeGroups"])
    assert group in {g["name"] for g in groups}, groups
    edited = [{**g, "desiredSize": int(desired)} if g["name"] == group else g for g in groups]
    plan = analysis.annotate(evaluate(stack, fixture=True, trainiumNodeGroups=edited).to_json())
    result = check.check_plan(plan, check.load_policy_config(stack, FIXTURE_STACKS / "policy-config" / f"{stack}.json"), stack)
    assert all(f"`{v.policy}`" in section for v in result.mandatory), [v.message for v in result.mandatory]
    assert int(desired) <= next(g["maxSize"] for g in groups if g["name"] == group)  # "within its maxSize"


# ---- what EKS and the CLI take ----------------------------------------------------------------------------------


def test_more_public_ranges_than_eks_takes_are_refused():
    cidrs = [f"203.0.{i}.0/24" for i in range(41)]
    assert "more than 40" in refusal(publicAccessCidrs=cidrs)


@pytest.mark.parametrize("spelling", ["True", "true", "False", "false"])
def test_booleans_read_as_the_sdk_reads_them(spelling):
    cfg = parse(staging(tensorboard=spelling).config, stack="staging")
    assert cfg.tensorboard is (spelling.lower() == "true")


@pytest.mark.parametrize("spelling", ["TRUE", "yes", " true", "1"])
def test_other_boolean_spellings_are_refused(spelling):
    assert refusal(tensorboard=spelling).startswith("trainium-eks:tensorboard:")


def test_a_boolean_inside_a_node_group_is_json_not_a_string():
    message = refusal(trainiumNodeGroups=[{**POOL, "maxSize": 2, "efa": "true"}])
    assert message.startswith("trainium-eks:trainiumNodeGroups[0].efa:")


@hypothesis_settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", categories=["Cc"]), min_size=1, max_size=3))
def test_a_tag_value_with_a_control_character_is_refused(control):
    assert refusal(owner=f"ml{control}platform").startswith("trainium-eks:owner:")


def test_a_key_given_twice_or_without_a_value_stops_preflight_in_one_line(tmp_path):
    twice = tmp_path / "Pulumi.twice.yaml"
    twice.write_text("config:\n  trainium-eks:owner: a\n  aws:region: us-east-1\n  trainium-eks:owner: b\n")
    one_line(
        run_preflight("plan", "staging", "--stack-file", str(twice)), "line 4", "'trainium-eks:owner' already defined at line 2"
    )
    nested = tmp_path / "Pulumi.nested.yaml"
    nested.write_text("config:\n  trainium-eks:trainiumNodeGroups:\n    - name: a\n      name: b\n")
    one_line(run_preflight("plan", "staging", "--stack-file", str(nested)), "'name' already defined at line 3")
    empty = tmp_path / "Pulumi.empty.yaml"
    empty.write_text("config:\n  trainium-eks:owner:\n")
    one_line(run_preflight("plan", "staging", "--stack-file", str(empty)), "'trainium-eks:owner' has no value (null)")


# ---- policy configs ---------------------------------------------------------------------------------------------


def test_a_policy_config_naming_no_policy_is_refused(tmp_path):
    path = tmp_path / "staging.json"
    path.write_text(json.dumps({"trainium-efa-interface-per-netwrok-card": "advisory"}))
    with pytest.raises(check.PolicyConfigError, match="did you mean 'trainium-efa-interface-per-network-card'"):
        check.load_policy_config("staging", path)


def test_a_stack_without_a_policy_config_is_refused(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({**MINIMAL_PLAN, "stack": "qa"}))
    missing = stackfile.policy_config_directory() / "qa.json"  # policies/config, or $PREFLIGHT_STACK_DIR's policy-config
    one_line(run_preflight("check", "--graph", str(plan)), str(missing), "not found", "{}")


# ---- stack outputs the job tools read ---------------------------------------------------------------------------

BAD_OUTPUTS = [
    ("kubeconfig", "{not json", "kubeconfig: not a JSON kubeconfig"),
    ("etcdEndpoint", "etcd.training.svc.cluster.local", "etcdEndpoint: 'etcd.training.svc.cluster.local' is not host:port"),
    ("etcdEndpoint", "etcd:port", "numeric port"),
]


@pytest.mark.parametrize(("key", "value", "words"), BAD_OUTPUTS, ids=[f"{k}={v}" for k, v, _ in BAD_OUTPUTS])
@pytest.mark.parametrize("tool", [("jobs.launch", "--dryrun"), ("jobs.acceptance", "etcd-rendezvous", "--dryrun")])
def test_malformed_outputs_stop_the_job_tools_in_one_line(tmp_path, tool, key, value, words):
    path, _ = outputs_file(tmp_path, edit=lambda outputs: outputs.update({key: value}), fixture=True)
    module, *args = tool
    one_line(run_module(module, *args, "--outputs", str(path)), words)


@hypothesis_settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_any_etcd_endpoint_is_read_or_refused_never_a_traceback(endpoint):
    outputs = json.loads(json.dumps(cached_plan("staging", False, fixture=True).outputs))
    outputs["etcdEndpoint"] = endpoint
    try:
        contract = PlatformContract.from_outputs(outputs)
    except ContractError as error:
        assert "\n" not in str(error)
    else:
        host, port = contract.etcd_endpoint.rsplit(":", 1)
        assert host and port.isdigit()
