"""Each class of bad input that still got through (issue 36, item 5), generated, wherever it can enter: a stack file
(``preflight plan``), stack outputs (the contract and ``jobs.launch``), a plan file (``preflight check --graph`` and
the policy rules) and the command line. Bad input gets exit status 2 and one line naming the key or option and the
fix (a policy: a mandatory violation); good input next to it still passes, so that no check refuses everything.

Examples are derandomized: CI sees the same inputs every run. The stack files are edits of the fixture staging stack
(us-east-1, one elastic trn1.32xlarge group, two teams); the outputs are its plan's and a trn2 fixture's.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutation_case import plan_of, resource
from support import FIXTURE_STACKS, cached_plan, evaluate, one_group

from jobs import launch
from jobs.job_building.grace_period import MAX_GRACE_SECONDS
from jobs.workloads.titan_config import parse_titan_options
from jobs.workloads.torchtitan_job import COUNTS, recipe_of
from plan_graph.graph import Graph
from policies.rules import access_path, cleanup, teams
from preflight import cli
from trainium_eks import catalog, layout, names, tokens
from trainium_eks.config.key_values import LOG_RETENTION_DAYS
from trainium_eks.contract import ContractError, PlatformContract

GENERATED = settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
STAGING = yaml.safe_load((FIXTURE_STACKS / "Pulumi.staging.yaml").read_text())
REGION = STAGING["config"]["aws:region"]
AZ_ID = STAGING["config"]["trainium-eks:trainiumAzId"]
ANY_FLOAT = st.floats(allow_nan=False, allow_infinity=False)


def refused_in_one_line(status: int, err: str, *words: str) -> None:
    assert status == 2 and len(err.strip().splitlines()) == 1, (status, err)
    assert all(word in err for word in words) and "Traceback" not in err, err


def plan_stack(tmp_path_factory, capsys, edit) -> tuple[int, str, str]:
    """``preflight plan staging --json`` of the fixture staging stack after ``edit(config)``."""
    document = copy.deepcopy(STAGING)
    edit(document["config"])
    path = tmp_path_factory.mktemp("stack") / "Pulumi.staging.yaml"
    path.write_text(yaml.safe_dump(document))
    capsys.readouterr()
    status = cli.main(["plan", "staging", "--stack-file", str(path), "--json"])
    out, err = capsys.readouterr()
    return status, out, err


def launch_job(tmp_path_factory, capsys, outputs: dict, *options: str) -> tuple[int, str]:
    """``jobs.launch --dryrun --json`` on ``outputs``: its exit status and stderr."""
    path = tmp_path_factory.mktemp("outputs") / "outputs.json"
    path.write_text(json.dumps(outputs))
    capsys.readouterr()
    status = launch.main(["--outputs", str(path), "--dryrun", "--json", *options])
    return status, capsys.readouterr().err


@functools.cache
def outputs_of(instance_type: str) -> str:
    """The fixture staging's outputs, with one group of ``instance_type`` where the catalog sells it."""
    if instance_type == "trn1.32xlarge":
        return json.dumps(cached_plan("staging", False, fixture=True).to_json()["outputs"])
    return json.dumps(evaluate("staging", fixture=True, **one_group(instance_type)).to_json()["outputs"])


# ---- 1. a Capacity Block of a type EC2 never sells in blocks there


NEVER_IN_BLOCKS = sorted(n for n in catalog.TRAINIUM_TYPES if REGION not in catalog.INSTANCE_TYPES[n].capacity_block_regions)


@GENERATED
@given(
    instance_type=st.sampled_from(NEVER_IN_BLOCKS),
    provisioning=st.sampled_from(["managed", "karpenter"]),
    count=st.integers(1, 64),
    price=st.floats(0.01, 1000),
)
def test_a_capacity_block_of_a_type_never_sold_in_blocks_is_refused(
    tmp_path_factory, capsys, instance_type, provisioning, count, price
):
    block = {"type": "capacity-block", "id": "cr-0123456789abcdef0", "azId": AZ_ID, "instanceCount": count, "hourlyUsd": price}

    def edit(config):
        sizes = {"minSize": 1, "desiredSize": 1} if provisioning == "managed" else {}
        node_group = {"name": "g", "instanceType": instance_type, "provisioning": provisioning, "maxSize": 1, **sizes}
        config["trainium-eks:trainiumNodeGroups"] = [{**node_group, "capacityReservation": block}]
        config.pop("trainium-eks:teams")

    status, _, err = plan_stack(tmp_path_factory, capsys, edit)
    refused_in_one_line(status, err, "capacityReservation.type", f"no Capacity Blocks of {instance_type} in {REGION}", "odcr")


# ---- 2. finite numbers that overflow


@GENERATED
@given(price=ANY_FLOAT)
def test_a_capacity_block_price_is_a_finite_price_or_refused(tmp_path_factory, capsys, price):
    block = {"type": "capacity-block", "id": "cr-0123456789abcdef0", "azId": AZ_ID, "instanceCount": 2, "hourlyUsd": price}
    status, out, err = plan_stack(
        tmp_path_factory, capsys, lambda config: config["trainium-eks:trainiumNodeGroups"][0].update(capacityReservation=block)
    )
    if 0 < price <= layout.MAX_BLOCK_USD_PER_INSTANCE_HOUR:
        assert status == 0 and "Infinity" not in out and json.loads(out)["cost"], err
    else:
        refused_in_one_line(status, err, "capacityReservation.hourlyUsd", "at most")


@GENERATED
@given(rate=ANY_FLOAT.map(lambda v: f"{v:g}") | st.sampled_from(["1e308", "inf", "-1", "x"]))
def test_a_block_price_in_a_plan_file_never_prints_an_infinite_cost(tmp_path_factory, capsys, rate):
    plan = json.loads(block_plan())
    (pool,) = [r for r in plan["resources"] if layout.CAPACITY_BLOCK_HOURLY_USD_TAG in json.dumps(r["inputs"])]
    pool["inputs"]["metadata"]["annotations"][layout.CAPACITY_BLOCK_HOURLY_USD_TAG] = rate
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(json.dumps(plan))
    capsys.readouterr()
    status = cli.main(["check", "--graph", str(path)])
    out, err = capsys.readouterr()
    assert status in (0, 1) and "inf USD" not in out + err and "Traceback" not in err, out + err


@functools.cache
def block_plan() -> str:
    """The fixture staging with its trn1.32xlarge group (elastic) in a Capacity Block at a valid price."""
    block = {"type": "capacity-block", "id": "cr-0123456789abcdef0", "azId": AZ_ID, "instanceCount": 2, "hourlyUsd": 30.0}
    return json.dumps(evaluate("staging", fixture=True, **one_group("trn1.32xlarge", capacityReservation=block)).to_json())


@GENERATED
@given(step=st.floats(MAX_GRACE_SECONDS, 1e308, exclude_min=True), workload=st.sampled_from(["bert", "torchtitan"]))
def test_a_step_longer_than_a_day_is_refused(tmp_path_factory, capsys, step, workload):
    outputs = json.loads(outputs_of("trn2.48xlarge"))
    status, err = launch_job(tmp_path_factory, capsys, outputs, "--workload", workload, "--step-seconds", repr(step))
    refused_in_one_line(status, err, "--step-seconds", str(MAX_GRACE_SECONDS))


@GENERATED
@given(path=st.sampled_from(COUNTS), value=st.integers(-(2**31), 0))
def test_a_torchtitan_count_below_one_is_refused(tmp_path_factory, capsys, path, value):
    outputs = json.loads(outputs_of("trn2.48xlarge"))
    status, err = launch_job(tmp_path_factory, capsys, outputs, "--workload", "torchtitan", "--", f"--{path}={value}")
    refused_in_one_line(status, err, f"--{path} {value}", "1 or more")


def test_a_checkpoint_interval_below_one_is_refused_by_torchtitans_own_parser(tmp_path_factory, capsys):
    outputs = json.loads(outputs_of("trn2.48xlarge"))
    status, err = launch_job(tmp_path_factory, capsys, outputs, "--workload", "torchtitan", "--", "--checkpoint.interval=0")
    refused_in_one_line(status, err, "Checkpoint interval needs to be at least 1 step")


@GENERATED
@given(data=st.data())
def test_a_checkpoint_that_takes_over_a_day_to_write_is_refused(tmp_path_factory, capsys, data):
    outputs = json.loads(outputs_of("trn2.48xlarge"))
    # the checkpoint a day's writing at the outputs' throughput holds, in GiB; a larger one cannot drain in time
    in_a_day = MAX_GRACE_SECONDS * outputs["fsxThroughputMBps"] * 1000**2 / 1024**3
    gib = data.draw(st.floats(in_a_day * 1.001, 1e308))
    status, err = launch_job(tmp_path_factory, capsys, outputs, "--workload", "torchtitan", "--checkpoint-gib", repr(gib))
    refused_in_one_line(status, err, "--checkpoint-gib", "a day")


@GENERATED
@given(throughput=st.floats(5e-324, 1e-3), instance_type=st.sampled_from(["trn1.32xlarge", "trn2.48xlarge"]))
def test_a_file_system_too_slow_to_drain_in_a_day_is_refused(tmp_path_factory, capsys, throughput, instance_type):
    outputs = json.loads(outputs_of(instance_type)) | {"fsxThroughputMBps": throughput}
    status, err = launch_job(tmp_path_factory, capsys, outputs)
    refused_in_one_line(status, err, "fsxThroughputMBps", "a day")


# ---- 3. the contract's per-group software entries


IMAGE = "111122223333.dkr.ecr.us-east-1.amazonaws.com/trainium-eks/staging/training:bert-1.0"  # a well-formed reference
NOT_AN_IMAGE = st.text(max_size=30).filter(lambda text: not names.IMAGE_REFERENCE.match(text)) | st.sampled_from(
    ["", IMAGE.replace(":bert", ":bad tag!"), IMAGE + "\n", IMAGE.rpartition(":")[0], IMAGE.upper()]
)


@GENERATED
@given(edit=st.sampled_from(["null", "image", "generation"]), image=NOT_AN_IMAGE)
def test_a_bad_software_entry_is_refused_by_the_contract_and_the_launcher(tmp_path_factory, capsys, edit, image):
    outputs = json.loads(outputs_of("trn2.48xlarge"))
    (group,) = outputs["trainiumNodeGroupSoftware"]
    PlatformContract.from_outputs(outputs)  # valid as they are
    if edit == "null":
        outputs["trainiumNodeGroupSoftware"] = None
    elif edit == "image":
        outputs["trainiumNodeGroupSoftware"][group]["trainingImage"] = image
    else:
        outputs["trainiumNodeGroupSoftware"][group]["generation"] = "trn1"
    try:
        PlatformContract.from_outputs(outputs)
    except ContractError as error:
        assert str(error).startswith("trainiumNodeGroupSoftware"), error
    else:
        raise AssertionError(f"accepted {edit}: {image!r}")
    status, err = launch_job(tmp_path_factory, capsys, outputs)
    refused_in_one_line(status, err, "trainiumNodeGroupSoftware")


# ---- 4. options after -- that contradict the workload


@GENERATED
@given(instance_type=st.sampled_from(["trn1.32xlarge", "trn2.48xlarge"]), device=st.sampled_from(["xla", "neuron", "cpu"]))
def test_a_device_other_than_the_groups_backend_is_refused(tmp_path_factory, capsys, instance_type, device):
    outputs = json.loads(outputs_of(instance_type))
    (software,) = outputs["trainiumNodeGroupSoftware"].values()
    status, err = launch_job(tmp_path_factory, capsys, outputs, "--", "--device", device)
    if device == software["backend"]:
        assert status == 0, err
    else:
        refused_in_one_line(status, err, f"--device {device}", f"--device {software['backend']}")


def _valued_options() -> list[str]:
    """TorchTitan's options that take a value, read from the parsed configuration of the trn2 recipe."""
    config = parse_titan_options(list(recipe_of_trn2().model_options))
    found = []
    for section in ("training", "dataloader", "checkpoint"):
        part = getattr(config, section)
        for field in dataclasses.fields(part):
            value = getattr(part, field.name)
            if isinstance(value, (int, float, str)) and not isinstance(value, bool):
                found.append(f"--{section}.{field.name}")
    return found


def recipe_of_trn2():
    outputs = PlatformContract.from_outputs(json.loads(outputs_of("trn2.48xlarge")))
    return recipe_of(outputs.node_groups[0])


@GENERATED
@given(data=st.data())
def test_a_dangling_torchtitan_option_is_refused(tmp_path_factory, capsys, data):
    option = data.draw(st.sampled_from(_valued_options()))
    outputs = json.loads(outputs_of("trn2.48xlarge"))
    status, err = launch_job(tmp_path_factory, capsys, outputs, "--workload", "torchtitan", "--", option)
    refused_in_one_line(status, err, "TorchTitan options", option.partition(".")[2].replace("_", "-"))


# ---- 5. a principal of another partition


OTHER_PARTITIONS = st.sampled_from(["aws-cn", "aws-us-gov", "aws-iso", "aws-iso-b", "aws-eusc"])
ROLE_NAMES = st.from_regex(r"[A-Za-z0-9+=,.@_-]{1,20}", fullmatch=True)


@GENERATED
@given(partition=OTHER_PARTITIONS, role=ROLE_NAMES, where=st.sampled_from(["team", "admin"]))
def test_a_principal_of_another_partition_is_refused_in_a_stack_file(tmp_path_factory, capsys, partition, role, where):
    arn = f"arn:{partition}:iam::111122223333:role/{role}"

    def edit(config):
        if where == "team":
            config["trainium-eks:teams"][0]["principalArns"] = [arn]
        else:
            config["trainium-eks:clusterAdminPrincipalArns"] = [arn]

    status, _, err = plan_stack(tmp_path_factory, capsys, edit)
    key = "teams[0].principalArns[0]" if where == "team" else "clusterAdminPrincipalArns[0]"
    refused_in_one_line(status, err, key, f"partition {partition}", "arn:aws:iam::")


@GENERATED
@given(partition=OTHER_PARTITIONS, role=ROLE_NAMES)
def test_a_principal_of_another_partition_is_refused_in_outputs_and_plans(partition, role):
    arn = f"arn:{partition}:iam::111122223333:role/{role}"
    outputs = json.loads(outputs_of("trn1.32xlarge"))
    outputs["teams"][0]["principalArns"] = [arn]
    try:
        PlatformContract.from_outputs(outputs)
    except ContractError as error:
        assert str(error).startswith("teams:") and partition in str(error), error
    else:
        raise AssertionError(f"accepted {arn}")
    plan = staging_plan_records()
    (entry,) = [r for r in plan if r["type"] == tokens.EKS_ACCESS_ENTRY and r["name"].endswith("nlp-member-0")]
    entry["inputs"]["principalArn"] = arn
    found = list(teams.team_access_namespaced(Graph.from_records(plan), {}))
    assert [v.urn for v in found] == [entry["urn"]] and f"partition {partition}" in found[0].message, found


def staging_plan_records() -> list[dict]:
    return plan_of("staging")["resources"]


# ---- 6. the SSM documents a session may use


PORT_FORWARDING = st.sampled_from(access_path.PORT_FORWARDING_DOCUMENTS)


@GENERATED
@given(
    document=PORT_FORWARDING,
    region=st.sampled_from(sorted(catalog.REGIONS)),
    prefix=st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True),
    account=st.from_regex(r"[0-9]{12}", fullmatch=True),
    spoil=st.sampled_from(["prefix", "account", "wildcard", "none"]),
)
def test_only_aws_port_forwarding_documents_pass(document, region, prefix, account, spoil):
    arn = {
        "prefix": f"arn:aws:ssm:{region}::document/{prefix}{document}",
        "account": f"arn:aws:ssm:{region}:{account}:document/{document}",
        "wildcard": f"arn:aws:ssm:{region}::document/*{document}",
        "none": f"arn:aws:ssm:{region}::document/{document}",
    }[spoil]
    records = plan_of("prod")["resources"]
    policy = resource({"resources": records}, tokens.IAM_POLICY, "api-access-users")
    statement = json.loads(policy["inputs"]["policy"])
    statement["Statement"][0]["Resource"] = [statement["Statement"][0]["Resource"][0], arn]
    policy["inputs"]["policy"] = json.dumps(statement)
    (node,) = [n for n in Graph.from_records(records) if n.urn == policy["urn"]]
    found = [v.message for v in access_path.session_access_scoped(node, {})]
    assert (found == []) == (spoil == "none"), (arn, found)


# ---- 7. the control-plane log group's retention


@GENERATED
@given(days=st.integers(-(10**6), 10**6) | st.sampled_from(LOG_RETENTION_DAYS) | ANY_FLOAT)
def test_a_log_retention_cloudwatch_does_not_take_is_a_violation(days):
    records = plan_of("dev")["resources"]
    (group,) = [r for r in records if r["type"] == tokens.CLOUDWATCH_LOG_GROUP and r["name"].endswith("control-plane-logs")]
    group["inputs"]["retentionInDays"] = days
    found = [v.message for v in cleanup.control_plane_log_group(Graph.from_records(records), {}) if "retention" in v.message]
    if days in LOG_RETENTION_DAYS:
        assert found == [], found
    else:
        assert len(found) == 1 and ("does not take" in found[0] or "never expire" in found[0]), found
