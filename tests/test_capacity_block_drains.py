"""A drain on a Capacity Block's node has ten minutes before EC2 reclaims it: the launcher refuses, in one line, a job
whose drain (a step, the checkpoint at the file system's throughput, the exit) cannot end in that window, naming the
throughput (and, where the step is counted, the step) that would fit; `preflight plan` prints each Capacity Block
group's default jobs against the window, worded as the launcher words it."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from support import FIXTURE_STACKS, evaluate, one_group, run_preflight, settings

from jobs import launch
from jobs.job_building.grace_period import CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS, GracePeriod
from jobs.workloads import registry
from preflight import analysis
from trainium_eks.config import ConfigError, parse
from trainium_eks.wording import counted, span

# PERSISTENT_1's lowest throughput per TiB on the fixture's 1.2 TiB: some 59 MB/s, too slow for Qwen3-8B's checkpoint.
SLOW_FILE_SYSTEM = {"fsxThroughputPerTiB": 50}
TITAN = ("--workload", "torchtitan")


@pytest.fixture(scope="module")
def trn2_outputs() -> dict[str, dict]:
    """The outputs of a trn2 group in a Capacity Block, on the fixture's file system and on a slow one."""
    return {
        "fixture": evaluate("staging", fixture=True, **one_group("trn2.48xlarge")).outputs,
        "slow": evaluate("staging", fixture=True, **one_group("trn2.48xlarge"), **SLOW_FILE_SYSTEM).outputs,
    }


def launch_dryrun(tmp_path, outputs: dict, *args: str, capsys) -> tuple[int, str]:
    """`jobs.launch --dryrun --json` on ``outputs``: its exit status and what it says on stderr."""
    status, _, stderr = launched(tmp_path, outputs, *args, capsys=capsys)
    return status, stderr


def launched(tmp_path, outputs: dict, *args: str, capsys) -> tuple[int, str, str]:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs))
    status = launch.main(["--outputs", str(path), "--dryrun", "--json", *args])
    printed = capsys.readouterr()
    return status, printed.out, printed.err


def needed(stderr: str, what: str) -> int:
    """The figure the refusal names for ``what``: the throughput ("fsxThroughputMBps >= N") or the step."""
    pattern = {"throughput": r"fsxThroughputMBps >= (\d+) MB/s", "step": r"a step <= (\d+) s"}[what]
    return int(re.search(pattern, stderr).group(1))


def test_a_torchtitan_job_whose_drain_cannot_fit_is_refused_with_the_throughput_that_would_fit(tmp_path, trn2_outputs, capsys):
    slow = trn2_outputs["slow"]
    status, stderr = launch_dryrun(tmp_path, slow, *TITAN, capsys=capsys)
    assert status == 2 and stderr.count("\n") == 1 and stderr.startswith("error: --node-group trn2-48xl: ")
    assert f"over a Capacity Block's {CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS} s drain window" in stderr
    assert "step not counted" in stderr and "more for the step" in stderr  # the known terms alone do not fit
    throughput = needed(stderr, "throughput")
    assert throughput > slow["fsxThroughputMBps"]
    # the throughput it names is the least that fits
    status, stderr = launch_dryrun(tmp_path, {**slow, "fsxThroughputMBps": throughput}, *TITAN, capsys=capsys)
    assert status == 0 and "within a Capacity Block's" in stderr and "the step, not counted, must take under" in stderr
    status, _ = launch_dryrun(tmp_path, {**slow, "fsxThroughputMBps": throughput - 1}, *TITAN, capsys=capsys)
    assert status == 2


def test_with_its_step_counted_the_refusal_names_the_longest_step_that_fits(tmp_path, trn2_outputs, capsys):
    fixture = trn2_outputs["fixture"]
    status, stderr = launch_dryrun(tmp_path, fixture, *TITAN, "--step-seconds", "300", capsys=capsys)
    assert status == 2 and "300 s step" in stderr
    longest = needed(stderr, "step")
    assert 0 < longest < 300
    assert launch_dryrun(tmp_path, fixture, *TITAN, "--step-seconds", str(longest), capsys=capsys)[0] == 0
    assert launch_dryrun(tmp_path, fixture, *TITAN, "--step-seconds", str(longest + 1), capsys=capsys)[0] == 2
    faster = {**fixture, "fsxThroughputMBps": needed(stderr, "throughput")}  # or a file system that writes in time
    assert launch_dryrun(tmp_path, faster, *TITAN, "--step-seconds", "300", capsys=capsys)[0] == 0


def test_a_torchtitan_job_that_fits_is_accepted_and_its_pods_get_the_whole_grace_period(tmp_path, trn2_outputs, capsys):
    status, stdout, stderr = launched(tmp_path, trn2_outputs["fixture"], *TITAN, "--step-seconds", "10", capsys=capsys)
    assert status == 0, stderr
    verdict = next(line for line in stderr.splitlines() if line.startswith("Capacity Block: "))
    grace = int(re.search(r"a drain takes (\d+) s", verdict).group(1))
    assert grace <= CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS and "to spare" in verdict and "not counted" not in verdict
    pods = {task["template"]["spec"]["terminationGracePeriodSeconds"] for task in json.loads(stdout)["spec"]["tasks"]}
    assert pods == {grace}  # the pods get the drain the verdict weighed


def test_bert_on_a_capacity_block_group_is_held_to_the_same_window(tmp_path, trn2_outputs, capsys):
    slow = trn2_outputs["slow"]
    status, stderr = launch_dryrun(tmp_path, slow, capsys=capsys)  # BERT-large's 4 GB checkpoint writes in time
    assert status == 0 and "within a Capacity Block's" in stderr and "the step, not counted" in stderr
    status, stderr = launch_dryrun(tmp_path, slow, "--step-seconds", "590", capsys=capsys)
    assert status == 2 and stderr.count("\n") == 1
    longest = needed(stderr, "step")
    assert launch_dryrun(tmp_path, slow, "--step-seconds", str(longest), capsys=capsys)[0] == 0


def test_a_group_sold_on_demand_is_not_held_to_a_blocks_window(tmp_path, capsys):
    outputs = evaluate("staging", fixture=True, **one_group("trn1.32xlarge"), **SLOW_FILE_SYSTEM).outputs
    status, stderr = launch_dryrun(tmp_path, outputs, "--step-seconds", "900", capsys=capsys)
    assert status == 0 and "Capacity Block" not in stderr, stderr


def test_what_would_fit_is_the_least_that_does():
    slow = GracePeriod(checkpoint_bytes=98 * 1000**3, throughput_mb_s=59, step_seconds=60)
    assert not slow.fits_capacity_block_window
    throughput, step = slow.throughput_to_fit(), slow.step_to_fit()
    assert GracePeriod(slow.checkpoint_bytes, throughput, 60).fits_capacity_block_window
    assert not GracePeriod(slow.checkpoint_bytes, throughput - 1, 60).fits_capacity_block_window
    assert step is None  # the write alone takes longer than the window: no step fits on this file system
    small = GracePeriod(checkpoint_bytes=4 * 1000**3, throughput_mb_s=59, step_seconds=700)
    assert small.throughput_to_fit() is None  # the step alone takes longer: no file system is fast enough
    assert GracePeriod(small.checkpoint_bytes, 59, small.step_to_fit()).fits_capacity_block_window
    assert not GracePeriod(small.checkpoint_bytes, 59, small.step_to_fit() + 1).fits_capacity_block_window


def test_plan_prints_each_capacity_block_groups_drains_against_the_window_as_its_json_says(tmp_path):
    document = yaml.safe_load((FIXTURE_STACKS / "Pulumi.staging.yaml").read_text())
    overrides = {**one_group("trn2.48xlarge"), **SLOW_FILE_SYSTEM}
    document["config"].update({key if ":" in key else f"trainium-eks:{key}": value for key, value in overrides.items()})
    stack = tmp_path / "Pulumi.staging.yaml"
    stack.write_text(yaml.safe_dump(document))
    as_json = run_preflight("plan", "staging", "--stack-file", str(stack), "--json")
    as_text = run_preflight("plan", "staging", "--stack-file", str(stack))
    assert as_json.returncode == as_text.returncode == 0, as_json.stderr + as_text.stderr
    drains = json.loads(as_json.stdout)["capacityBlockDrains"]
    assert drains["windowSeconds"] == CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS
    ((group),) = drains["groups"]
    assert group["group"] == "trn2-48xl" and group["launcherChecks"]
    by_workload = {drain["workload"]: drain for drain in group["drains"]}
    assert set(by_workload) == set(registry.workloads())
    # Qwen3-8B's checkpoint on the slow file system does not fit; BERT-large's does
    assert not by_workload["torchtitan"]["fits"] and by_workload["bert"]["fits"]
    text = as_text.stdout.splitlines()
    heading = text.index(next(line for line in text if line.startswith("Drains on Capacity Block group trn2-48xl")))
    after = text[heading + 1 :]
    section = after[: next(i for i, line in enumerate(after + [""]) if not line.startswith("    "))]  # the group's lines
    shown = dict(line.strip().split(" ", 1) for line in section if not line.startswith("        "))
    for workload, drain in by_workload.items():
        verdict = "over a Capacity Block's" if not drain["fits"] else "within a Capacity Block's"
        assert verdict in shown[workload] and f"a drain takes {drain['graceSeconds']} s" in shown[workload]
    # a drain that fits is followed by what each way a node goes does to it; one that does not, by nothing
    summaries = [line.strip() for line in section if line.startswith("        ")]
    assert summaries == [f"a {by_workload['bert']['graceSeconds']} s drain loses no step on " + summaries[0].split(" on ", 1)[1]]
    assert f"fsxThroughputMBps >= {by_workload['torchtitan']['throughputToFitMBps']} MB/s" in shown["torchtitan"]


def test_counts_of_one_and_ranges_whose_ends_meet_read_as_a_sentence():
    assert [counted(1, "node"), counted(2, "node"), counted(1200, "instance")] == ["1 node", "2 nodes", "1,200 instances"]
    assert [span(200, 200), span(200, 500)] == ["200", "200 to 500"]


def test_a_reservation_of_one_instance_is_one_instance():
    pool = {"name": "trn1-32xl", "instanceType": "trn1.32xlarge", "provisioning": "karpenter", "maxSize": 2}
    az = settings("staging", fixture=True).config["trainium-eks:trainiumAzId"]
    reservation = {"type": "odcr", "id": "cr-0123456789abcdef0", "azId": az, "instanceCount": 1}
    config = settings("staging", fixture=True, trainiumNodeGroups=[{**pool, "capacityReservation": reservation}]).config
    with pytest.raises(ConfigError) as caught:
        parse(config, stack="staging")
    assert "the reservation's 1 instance;" in str(caught.value) and "1 instances" not in str(caught.value)


def test_the_launchers_help_gives_its_whole_description(capsys):
    with pytest.raises(SystemExit):
        launch.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps it to the terminal
    # the sentence the first line of the module's docstring cut, whole, without its reST quoting
    assert "alone: one of the registered workloads (jobs.workloads.registry): BERT pretraining" in shown
    assert "or LLM pre-training with TorchTitan (--workload torchtitan, on the groups that train on TorchNeuron)." in shown


def test_the_plan_counts_one_node_as_one_and_gives_a_range_whose_ends_meet_as_one_number():
    plan = analysis.annotate(evaluate("staging", fixture=True, **one_group("trn2.48xlarge", maxSize=1)).to_json())
    text = analysis.summary(plan)
    assert "first training step on trainium-trn2-48xl-nodepool (1 node):" in text and "1 node share " in text
    # a trn2 node takes as many addresses crowded as running: its addresses at maxSize are one number
    (addresses,) = [line for line in text.splitlines() if "private IPs:" in line]
    assert re.search(r"; [\d,]+ at maxSize 1 ", addresses), addresses
    assert not re.search(r"\b1 nodes\b|\b([\d,]+) to \1\b", text)
