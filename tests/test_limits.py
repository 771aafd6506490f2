"""Limits that hold: node counts the subnets' addresses cannot carry, lists longer than EKS takes, values the CLI would
read otherwise (a boolean spelling, a null, a control character in a tag), a key given twice, a policy config that
names no policy or is missing, and stack outputs the job tools cannot use. Each is one line naming the key and the
fix, exit status 2 where a command reads it."""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from support import cached_plan, node_group_config, run_preflight, settings
from test_jobs import outputs_file, run_module
from test_preflight_bad_input import MINIMAL_PLAN, one_line

from preflight import check
from trainium_eks import catalog
from trainium_eks.config import ConfigError, parse
from trainium_eks.contract import ContractError, PlatformContract

POOL = {"name": "trn1-32xl", "instanceType": "trn1.32xlarge", "provisioning": "karpenter"}


def refusal(**overrides) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(settings("staging", teams=[], **overrides).config, stack="staging")
    message = str(caught.value)
    assert "\n" not in message and "; " in message, message
    return message


def trainium_subnet_addresses(vpc_cidr: str) -> int:
    """The Trainium subnet is the first of four equal blocks of the VPC's first half; AWS keeps five addresses."""
    subnet = next(ipaddress.IPv4Network(vpc_cidr).subnets(new_prefix=ipaddress.IPv4Network(vpc_cidr).prefixlen + 3))
    return subnet.num_addresses - 5


def least_per_node(instance_type: str) -> int:
    """On an EFA-only layout the primary ENA interface alone has an address; the training pod takes one more."""
    assert catalog.INSTANCE_TYPES[instance_type].efa_only_interfaces
    return 1 + 1


# ---- addresses --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vpc_cidr", ["10.0.0.0/20", "10.0.0.0/16"])
def test_a_pool_fits_its_subnet_up_to_the_last_node(vpc_cidr):
    fitting = trainium_subnet_addresses(vpc_cidr) // least_per_node("trn1.32xlarge")
    accepted = parse(
        settings("staging", teams=[], vpcCidr=vpc_cidr, trainiumNodeGroups=[{**POOL, "maxSize": fitting}]).config, stack="staging"
    )
    assert accepted.trainium_node_groups[0].scaling.max_size == fitting
    message = refusal(vpcCidr=vpc_cidr, trainiumNodeGroups=[{**POOL, "maxSize": fitting + 1}])
    assert message.startswith("trainium-eks:trainiumNodeGroups[0].maxSize:")
    assert str(trainium_subnet_addresses(vpc_cidr)) in message and "lower maxSize" in message
    assert ("widen vpcCidr" in message) is (vpc_cidr != "10.0.0.0/16")  # a /16 is as wide as a VPC gets here


def test_absurd_counts_are_refused_by_the_same_arithmetic():
    assert "maxSize" in refusal(trainiumNodeGroups=[{**POOL, "maxSize": 10**23}]).split(": ")[0]
    message = refusal(vpcCidr="10.0.0.0/20", trainiumNodeGroups=[{**POOL, "maxSize": 5000}])
    assert "a /23 of vpcCidr 10.0.0.0/20" in message
    assert refusal(systemNodeMaxSize=100000).startswith("trainium-eks:systemNodeMaxSize:")


def test_two_groups_share_the_subnet():
    half = trainium_subnet_addresses("10.0.0.0/20") // least_per_node("trn1.32xlarge") // 2 + 1
    groups = [node_group_config(f"trn1-{i}", "trn1.32xlarge", size=half) for i in range(2)]
    message = refusal(vpcCidr="10.0.0.0/20", trainiumNodeGroups=groups)
    assert message.startswith("trainium-eks:trainiumNodeGroups[1].maxSize:") and "with the groups before it" in message


@hypothesis_settings(max_examples=40, deadline=None)
@given(st.integers(1, 10**30))
def test_any_pool_size_is_accepted_exactly_when_it_fits(max_size):
    fits = max_size * least_per_node("trn1.32xlarge") <= trainium_subnet_addresses("10.0.0.0/20")
    raw = settings("staging", teams=[], vpcCidr="10.0.0.0/20", trainiumNodeGroups=[{**POOL, "maxSize": max_size}]).config
    if fits:
        parse(raw, stack="staging")
    else:
        with pytest.raises(ConfigError, match="maxSize"):
            parse(raw, stack="staging")


def test_plan_prints_what_a_crowded_node_takes():
    result = run_preflight("plan", "staging")
    assert result.returncode == 0, result.stderr
    spec = catalog.INSTANCE_TYPES["trn1.32xlarge"]
    assert f"up to {1 + spec.max_pods - catalog.HOST_NETWORK_PODS} with its pods" in result.stdout


# ---- what EKS and the CLI take ----------------------------------------------------------------------------------


def test_more_public_ranges_than_eks_takes_are_refused():
    cidrs = [f"203.0.{i}.0/24" for i in range(41)]
    assert "more than 40" in refusal(publicAccessCidrs=cidrs)


@pytest.mark.parametrize("spelling", ["True", "true", "False", "false"])
def test_booleans_read_as_the_sdk_reads_them(spelling):
    cfg = parse(settings("staging", teams=[], tensorboard=spelling).config, stack="staging")
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
    one_line(run_preflight("check", "--graph", str(plan)), "policies/config/qa.json", "not found", "{}")


# ---- stack outputs the job tools read ---------------------------------------------------------------------------

BAD_OUTPUTS = [
    ("kubeconfig", "{not json", "kubeconfig: not a JSON kubeconfig"),
    ("etcdEndpoint", "etcd.training.svc.cluster.local", "etcdEndpoint: 'etcd.training.svc.cluster.local' is not host:port"),
    ("etcdEndpoint", "etcd:port", "numeric port"),
]


@pytest.mark.parametrize(("key", "value", "words"), BAD_OUTPUTS, ids=[f"{k}={v}" for k, v, _ in BAD_OUTPUTS])
@pytest.mark.parametrize("tool", [("jobs.launch", "--dryrun"), ("jobs.acceptance", "etcd-rendezvous", "--dryrun")])
def test_malformed_outputs_stop_the_job_tools_in_one_line(tmp_path, tool, key, value, words):
    path, _ = outputs_file(tmp_path, edit=lambda outputs: outputs.update({key: value}))
    module, *args = tool
    one_line(run_module(module, *args, "--outputs", str(path)), words)


@hypothesis_settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_any_etcd_endpoint_is_read_or_refused_never_a_traceback(endpoint):
    outputs = json.loads(json.dumps(cached_plan("staging", False).outputs))
    outputs["etcdEndpoint"] = endpoint
    try:
        contract = PlatformContract.from_outputs(outputs)
    except ContractError as error:
        assert "\n" not in str(error)
    else:
        host, port = contract.etcd_endpoint.rsplit(":", 1)
        assert host and port.isdigit()
