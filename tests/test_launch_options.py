"""The training options of `jobs.launch`: what is given after `--` replaces the launcher's option of the same name and
nothing else, the compile cache follows the options the job runs with, bad ones are one line; and a queue that cannot
hold one node of the group gets no job of no node."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import PurePosixPath

import pytest
import yaml
from support import evaluate, one_group

from jobs import launch
from jobs.errors import LaunchError
from jobs.workloads import bert_job
from preflight.stackfile import REPO_ROOT
from training import options
from trainium_eks import layout
from trainium_eks.contract import PlatformContract

# The launcher's own options, each with another value a user might give (paths under the mount path).
OWN = {
    "--data-dir": "{mount}/datasets/other_seqlen512",
    "--output-dir": "{mount}/checkpoints/elsewhere",
    "--tensorboard-dir": "{mount}/tensorboard/elsewhere",
    "--batch-size": "8",
    "--grad-accum-steps": "4",
}
# The ones that shape the compiled graphs (the dataset fixes the sequence length).
SHAPING = {"--data-dir", "--batch-size", "--grad-accum-steps"}


@functools.cache
def fixture_outputs() -> str:
    """A fixture stack of one elastic trn1.32xlarge group and no team, whatever the shipped stacks hold."""
    return json.dumps(evaluate("staging", fixture=True, **one_group("trn1.32xlarge")).outputs)


def contract() -> PlatformContract:
    return PlatformContract.from_outputs(json.loads(fixture_outputs()))


def job(*training_args: str, **request) -> dict:
    return bert_job.volcano_job(contract(), launch.JobRequest(name="berttrain", training_args=training_args, **request))


def training_command(built: dict) -> list[str]:
    (container,) = built["spec"]["tasks"][0]["template"]["spec"]["containers"]
    command = container["command"]
    return command[command.index("training.pretrain_bert") + 1 :]


def flag_values(command: list[str]) -> dict[str, str | None]:
    """``--flag value`` pairs (None for a switch); a flag given twice would be lost here, so it is counted too."""
    pairs, index = {}, 0
    while index < len(command):
        flag = command[index]
        value = command[index + 1] if index + 1 < len(command) and not command[index + 1].startswith("--") else None
        assert flag not in pairs, f"{flag} given twice: {command}"
        pairs[flag] = value
        index += 1 if value is None else 2
    return pairs


def cache(built: dict) -> str:
    return built["metadata"]["annotations"][launch.COMPILE_CACHE_ANNOTATION]


def test_an_option_after_the_separator_keeps_every_other_default_and_the_cache():
    default = job()
    given = job("--checkpoint-every", "50")
    assert flag_values(training_command(given)) == {**flag_values(training_command(default)), "--checkpoint-every": "50"}
    assert cache(given) == cache(default)  # the precompiled graphs are found


@pytest.mark.parametrize("flag", OWN)
def test_each_of_the_launchers_options_is_replaced_alone(flag):
    value = OWN[flag].format(mount=contract().fsx_mount_path)
    default, given = job(), job(flag, value)
    assert flag_values(training_command(given)) == {**flag_values(training_command(default)), flag: value}
    assert (cache(given) != cache(default)) == (flag in SHAPING)
    script = options.parser().parse_args(training_command(given))  # what the training script reads
    assert str(getattr(script, flag.removeprefix("--").replace("-", "_"))) == value


def test_the_same_option_spelt_another_way_builds_the_same_job():
    expected = training_command(job("--checkpoint-every", "50"))
    for spelling in (("--checkpoint-every=50",), ("--checkpoint", "50"), ("--checkpoint-every", "7", "--checkpoint-every", "50")):
        assert training_command(job(*spelling)) == expected, spelling


def test_a_precompile_runs_a_few_steps_unless_told_and_shares_the_training_cache():
    precompile = flag_values(training_command(job(precompile=True)))
    assert int(precompile["--steps-this-run"]) > 0
    assert flag_values(training_command(job("--steps-this-run", "3", precompile=True)))["--steps-this-run"] == "3"
    assert cache(job("--batch-size", "8", precompile=True)) == cache(job("--batch-size", "8"))


def test_the_compile_cache_key_reads_the_options_the_job_runs_with():
    built = job("--model", "tiny", "--batch-size", "8")
    inputs = built["metadata"]["annotations"][launch.COMPILE_CACHE_INPUTS]
    assert "model tiny" in inputs and "batchSize 8" in inputs
    assert cache(built).rsplit("/", 1)[1].startswith("bert-tiny-")


@pytest.mark.parametrize(
    ("given", "words"),
    [
        (("--batch-size", "0"), "argument --batch-size: 0: give a whole number of 1 or more"),
        (("--checkpoint-every", "ten"), "argument --checkpoint-every: 'ten' is not a whole number"),
        (("--lr", "nan"), "argument --lr: nan: give a positive number"),
        (("--model", "huge"), "argument --model: invalid choice: 'huge'"),
        (("--frobnicate",), "unrecognized arguments: --frobnicate"),
        (("--bf16",), "--bf16 after --: the launcher passes it itself"),
        (("--output-dir", "/tmp/x"), "--output-dir /tmp/x after --: not on the shared volume"),
        (("--data-dir", "{mount}/../etc"), "--data-dir {mount}/../etc after --: not on the shared volume"),
        (("--tensorboard-dir", "runs"), "--tensorboard-dir runs after --: not on the shared volume"),
    ],
)
def test_a_bad_training_option_is_refused_in_one_line(given, words):
    mount = contract().fsx_mount_path
    with pytest.raises(LaunchError) as refused:
        job(*(part.format(mount=mount) for part in given))
    assert words.format(mount=mount) in str(refused.value) and "\n" not in str(refused.value)


def run_module(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_the_issues_command_line_prints_the_job_with_the_options_given(tmp_path):
    path = tmp_path / "outputs.json"
    path.write_text(fixture_outputs())
    result = run_module("jobs.launch", "--outputs", str(path), "--dryrun", "--json", "--", "--checkpoint-every", "50")
    assert result.returncode == 0, result.stderr
    command = flag_values(training_command(json.loads(result.stdout)))
    assert command["--checkpoint-every"] == "50" and command == {**flag_values(training_command(job())), **command}


def with_small_queue(outputs: dict, team: bool) -> str:
    """The outputs with the platform's queue, or a team's, admitting one Neuron device less than a node has."""
    group = outputs["trainiumNodeGroups"][0]
    devices = {layout.NEURON_DEVICE_RESOURCE: group["neuronDevicesPerNode"] - 1}
    if not team:
        outputs["volcanoQueues"][0]["capability"] = devices
        return outputs["volcanoQueues"][0]["name"]
    mount = PurePosixPath(outputs["fsxMountPath"])
    outputs["teams"] = [
        {
            "name": "small",
            "namespace": "team-small",
            "queue": "team-small",
            "weight": 1.0,
            "quota": devices,
            "claimName": outputs["fsxClaimName"],
            "fileSystemPath": str(mount.parent / "teams" / "small"),
            "principalArns": ["arn:aws:iam::111122223333:role/small"],
        }
    ]
    return "team-small"


@pytest.mark.parametrize("team", [False, True], ids=["platform-queue", "team-queue"])
def test_a_queue_that_cannot_hold_one_node_gets_no_job_of_no_node(tmp_path, team):
    outputs = json.loads(fixture_outputs())
    queue = with_small_queue(outputs, team)
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs))
    workspace = ["--team", "small"] if team else []
    for module, args in (("jobs.launch", []), ("jobs.acceptance", ["neuron-devices"])):
        result = run_module(module, *args, "--outputs", str(path), "--dryrun", *workspace)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, (module, result.stdout, result.stderr)
        # a team's quota is checked first: the API server refuses the pods before Volcano sees them
        bound = "team small's quota" if team else f"queue {queue}"
        assert f"{bound} admits" in result.stderr and "neuronShare" in result.stderr, result.stderr
    every = run_module("jobs.acceptance", "all", "--outputs", str(path), "--dryrun", *workspace)
    assert every.returncode == 0 and "neuron-devices: skipped" in every.stderr, every.stderr
    built = [manifest for manifest in yaml.safe_load_all(every.stdout) if manifest]
    assert all(manifest["spec"].get("completions", 1) > 0 for manifest in built)  # no Job of `completions: 0`
    # fsx-shared's pods ask for no Neuron device, which no queue bounds: it still runs
    assert "acceptance-fsx-shared" in {manifest["metadata"]["name"] for manifest in built}
