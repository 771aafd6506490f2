"""The launcher knows when a group's Capacity Blocks end: it reads the group's active blocks (tagged for the group, or
named by the stack) from EC2 or a saved `describe-capacity-reservations` output, prints and annotates how long a job
can run before the last one ends, and refuses in one line a job that cannot write its first checkpoint by then."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from support import evaluate, one_group

from jobs import launch
from jobs.job_building.capacity_blocks import RUNS_UNTIL_BEFORE_END, duration, moment
from training import options

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
STEP_SECONDS = 60  # a slow step: the interval's steps take well over an hour, the drain still fits its window
CHECKPOINT_EVERY = options.parser().get_default("checkpoint_every")
TO_FIRST_CHECKPOINT = timedelta(seconds=CHECKPOINT_EVERY * STEP_SECONDS)  # the start and the write come on top


@pytest.fixture(scope="module")
def outputs() -> dict:
    """The outputs of a stack whose trn2 group runs in Capacity Blocks, selected by tag and by the id it names."""
    return evaluate("staging", fixture=True, **one_group("trn2.48xlarge")).outputs


@pytest.fixture(scope="module")
def group(outputs) -> dict:
    (only,) = outputs["trainiumNodeGroups"]
    return only


def block(group: dict, ends_in: timedelta, *, reservation_id: str = "cr-0123456789abcdef0", tagged: bool = True, **more):
    """One reservation as `aws ec2 describe-capacity-reservations --output json` prints it."""
    tag = group["capacityBlockTag"]
    return {
        "CapacityReservationId": reservation_id,
        "InstanceType": group["instanceType"],
        "AvailabilityZoneId": "use2-az3",
        "State": "active",
        "ReservationType": "capacity-block",
        "StartDate": (NOW - timedelta(hours=1)).isoformat(),
        "EndDate": (NOW + ends_in).isoformat(),
        "TotalInstanceCount": 2,
        "Tags": [{"Key": tag["key"], "Value": tag["value"]}] if tagged else [],
        **more,
    }


def launched(
    tmp_path, outputs: dict, blocks: list[dict] | str | None, *args: str, capsys, dryrun=True, step_seconds=STEP_SECONDS
):
    """`jobs.launch` (a BERT job unless ``args`` say otherwise) on the group at ``NOW``: exit status, stdout, stderr."""
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    chosen = ["--outputs", str(tmp_path / "outputs.json"), "--step-seconds", str(step_seconds)]
    if blocks is not None:
        path = tmp_path / "blocks.json"
        path.write_text(blocks if isinstance(blocks, str) else json.dumps({"CapacityReservations": blocks}))
        chosen += ["--capacity-blocks", str(path)]
    status = launch.main([*chosen, *(("--dryrun", "--json") if dryrun else ()), *args], now=NOW)
    printed = capsys.readouterr()
    return status, printed.out, printed.err


def test_a_job_stops_forty_minutes_before_its_block_ends():
    """EC2 begins terminating a block's instances 30 minutes before its end (EC2 User Guide, "Work with Capacity
    Blocks"); its warning event, 40 minutes before, says they "will begin to terminate in 10 minutes" ("Monitor
    Capacity Blocks using EventBridge"), and Karpenter drains 10 minutes before EC2 reclaims them."""
    assert timedelta(minutes=40) == RUNS_UNTIL_BEFORE_END


def test_a_block_ending_in_ten_hours_admits_the_job_and_the_launcher_prints_the_time_left(tmp_path, outputs, group, capsys):
    status, out, err = launched(tmp_path, outputs, [block(group, timedelta(hours=10))], capsys=capsys)
    assert status == 0
    runs_until = NOW + timedelta(hours=10) - RUNS_UNTIL_BEFORE_END
    (line,) = [line for line in err.splitlines() if line.startswith("Capacity Block end: ")]
    assert f"Capacity Block cr-0123456789abcdef0 ends {moment(NOW + timedelta(hours=10))}" in line
    assert f"a job can run {duration((runs_until - NOW).total_seconds())}, until {moment(runs_until)}" in line
    # `kubectl describe vcjob` shows the same
    assert json.loads(out)["metadata"]["annotations"][launch.CAPACITY_BLOCK_END_ANNOTATION] == line.split(": ", 1)[1]


def test_a_block_ending_before_the_first_checkpoint_refuses_the_job_in_one_line(tmp_path, outputs, group, capsys):
    too_soon = RUNS_UNTIL_BEFORE_END + TO_FIRST_CHECKPOINT - timedelta(minutes=1)
    status, out, err = launched(tmp_path, outputs, [block(group, too_soon)], capsys=capsys)
    assert status == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: --node-group trn2-48xl: ")
    assert f"Capacity Block cr-0123456789abcdef0 ends {moment(NOW + too_soon)}" in err
    assert f"{CHECKPOINT_EVERY} steps x {STEP_SECONDS} s" in err
    assert "later block" in err and "-- --checkpoint-every" in err and "-- --steps-this-run" in err
    # a shorter interval brings the first checkpoint within the block
    shorter = launched(tmp_path, outputs, [block(group, too_soon)], "--", "--checkpoint-every", "10", capsys=capsys)
    assert shorter[0] == 0, shorter[2]
    # and the block need end only the interval's steps, the start and the write later: ten minutes cover those two
    enough = RUNS_UNTIL_BEFORE_END + TO_FIRST_CHECKPOINT + timedelta(minutes=10)
    assert launched(tmp_path, outputs, [block(group, enough)], capsys=capsys)[0] == 0


def test_a_second_tagged_block_ending_later_is_used_without_a_stack_edit(tmp_path, outputs, group, capsys):
    ending = block(group, timedelta(minutes=50))  # too soon on its own
    bought_later = block(group, timedelta(hours=30), reservation_id="cr-0fedcba9876543210")
    assert launched(tmp_path, outputs, [ending], capsys=capsys)[0] == 2
    status, _, err = launched(tmp_path, outputs, [ending, bought_later], capsys=capsys)
    assert status == 0 and "Capacity Block cr-0fedcba9876543210 ends" in err


def test_only_the_groups_active_blocks_count(tmp_path, outputs, group, capsys):
    ending = block(group, timedelta(minutes=50))
    others = [
        block(group, timedelta(hours=30), reservation_id="cr-0aaaaaaaaaaaaaaa1", tagged=False),  # another group's
        block(group, timedelta(hours=30), reservation_id="cr-0aaaaaaaaaaaaaaa2", State="scheduled"),  # not begun
        block(group, timedelta(hours=30), reservation_id="cr-0aaaaaaaaaaaaaaa3", InstanceType="trn1.32xlarge"),
    ]
    status, _, err = launched(tmp_path, outputs, [ending, *others], capsys=capsys)
    assert status == 2 and "Capacity Block cr-0123456789abcdef0 ends" in err
    # the block the stack names by id counts untagged
    named = block(group, timedelta(hours=30), reservation_id=group["capacityBlockId"], tagged=False)
    status, _, err = launched(tmp_path, outputs, [ending, named], capsys=capsys)
    assert status == 0 and f"Capacity Block {group['capacityBlockId']} ends" in err


def test_no_active_block_refuses_the_job_naming_the_tag_to_put_on_one(tmp_path, outputs, group, capsys):
    status, _, err = launched(tmp_path, outputs, [], capsys=capsys)
    tag = group["capacityBlockTag"]
    assert status == 2 and err.count("\n") == 1
    assert f"no active Capacity Block of trn2.48xlarge tagged {tag['key']}={tag['value']}" in err and "tag it" in err
    assert tag["value"] == f"{outputs['clusterName']}/{group['name']}"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{not json", "invalid JSON"),
        ('{"Reservations": []}', "CapacityReservations: field required"),
        ("TOTAL", "TotalInstanceCount: input should be a valid integer"),
        ("NAIVE", "EndDate: input should have timezone info"),
    ],
)
def test_a_bad_blocks_file_is_refused_in_one_line(tmp_path, outputs, group, capsys, text, named):
    reservation = block(group, timedelta(hours=10))
    if text == "TOTAL":
        text = json.dumps({"CapacityReservations": [{**reservation, "TotalInstanceCount": "2"}]})
    elif text == "NAIVE":
        naive = (NOW + timedelta(hours=10)).replace(tzinfo=None).isoformat()
        text = json.dumps({"CapacityReservations": [{**reservation, "EndDate": naive}]})
    status, out, err = launched(tmp_path, outputs, text, capsys=capsys)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"error: --capacity-blocks {tmp_path / 'blocks.json'}: ") and named.lower() in err.lower()


def test_without_the_aws_cli_a_submission_is_refused_naming_the_offline_way(tmp_path, outputs, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `aws` here
    status, _, err = launched(tmp_path, outputs, None, capsys=capsys, dryrun=False)
    assert status == 2 and err.count("\n") == 1 and "no AWS CLI on PATH" in err and "--capacity-blocks FILE" in err


def test_a_failing_aws_cli_is_refused_in_one_line_with_its_reason(tmp_path, outputs, capsys, monkeypatch):
    """The real AWS CLI, with no credentials to find: its own last line, and the offline way."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    status, _, err = launched(tmp_path, outputs, None, capsys=capsys, dryrun=False)
    assert status == 2 and err.count("\n") == 1
    assert "error: Capacity Blocks of trn2-48xl: the AWS CLI failed (" in err and "--capacity-blocks FILE" in err
    # botocore's NoCredentialsError: the CLI took the launcher's command line and got as far as signing the request
    assert "Unable to locate credentials" in err


def test_a_dryrun_without_the_file_says_the_end_was_not_read(tmp_path, outputs, capsys):
    status, out, err = launched(tmp_path, outputs, None, capsys=capsys)
    assert status == 0 and "Capacity Block end: not read" in err and "--capacity-blocks FILE" in err


def test_torchtitan_counts_the_steps_torchtitan_takes_to_its_first_checkpoint(tmp_path, outputs, group, capsys):
    """TorchTitan writes at its interval or its last step, whichever comes first (its own parser reads both)."""
    blocks = [block(group, RUNS_UNTIL_BEFORE_END + timedelta(hours=2))]

    def titan(interval: int, steps: int) -> tuple[int, str]:
        chosen = ("--workload", "torchtitan", "--", "--checkpoint.interval", str(interval), "--training.steps", str(steps))
        status, _, err = launched(tmp_path, outputs, blocks, *chosen, capsys=capsys, step_seconds=5)
        return status, err

    status, err = titan(300, 1000)
    assert status == 0 and "300 steps x 5 s" in err
    status, err = titan(3000, 200)  # the run ends, and checkpoints, first
    assert status == 0 and "200 steps x 5 s" in err
    status, err = titan(2000, 5000)  # 2000 steps of 5 s: over two hours
    assert status == 2 and "2000 steps x 5 s" in err and "-- --checkpoint.interval" in err and "-- --training.steps" in err


def test_a_platform_that_publishes_neither_tag_nor_id_still_launches_and_says_the_end_was_not_read(
    tmp_path, outputs, group, capsys
):
    older = {key: value for key, value in group.items() if key not in ("capacityBlockTag", "capacityBlockId")}
    status, _, err = launched(tmp_path, {**outputs, "trainiumNodeGroups": [older]}, None, capsys=capsys)
    assert status == 0 and "Capacity Block end: not read (the platform publishes no capacityBlockTag or capacityBlockId" in err


def test_blocks_for_a_group_in_no_block_are_refused(tmp_path, group, capsys):
    both = evaluate("staging").outputs  # trn1-32xl on demand beside the trn2 group
    (on_demand,) = [g for g in both["trainiumNodeGroups"] if "capacityBlockTag" not in g and "capacityBlockId" not in g]
    chosen = ("--node-group", on_demand["name"])
    status, _, err = launched(tmp_path, both, [block(group, timedelta(hours=10))], *chosen, capsys=capsys)
    assert (
        status == 2
        and err == f"error: --capacity-blocks: node group {on_demand['name']} runs in no Capacity Block; drop the option\n"
    )
