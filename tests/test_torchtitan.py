"""TorchTitan as a platform workload: the job `jobs.workloads.torchtitan_job` builds for a trn2 group, and that job rehearsed for
real on this machine's CPUs by `python -m jobs.rehearsal --workload torchtitan` (TorchTitan 0.3.0 from the package
index, its ``--module``/``--config`` API, FSDP2 on gloo, two torchrun agents meeting through a real etcd): a worker
killed mid-run resumes from the newest
DCP checkpoint, and a drain (SIGTERM to the torchrun agents, as the kubelet sends it) stops every worker after a whole,
checkpointed step, from which the restarted job goes on with no step lost."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
from support import evaluate, one_group

from jobs.errors import LaunchError
from jobs.job_building.platform_job import COMPILE_CACHE_ANNOTATION, JobRequest
from jobs.launch import main as launch
from jobs.rehearsal.cpu_workloads import TORCHTITAN_ON_CPU, complete_checkpoints
from jobs.rehearsal.local_agents import CpuOverrides, read_metrics
from jobs.rehearsal.report import CHECKPOINT_EVERY, RehearsalRequest
from jobs.workloads import registry
from jobs.workloads.titan_config import parse_titan_options
from jobs.workloads.titan_recipes import recipe_for
from jobs.workloads.torchtitan_job import MODULE, PARALLELISM_ANNOTATION, titan_job
from preflight.stackfile import REPO_ROOT
from training import run_record, titan_assets
from training.titan_configs import STAND_INS
from trainium_eks import layout
from trainium_eks.contract import PlatformContract

pytestmark = pytest.mark.minutes  # real components for minutes: scheduled first (tests/conftest.py)

STEPS = 2 * CHECKPOINT_EVERY  # the rehearsal's runs: a checkpoint before the kill and the drain, and steps after them


@functools.cache
def contract_with(instance_type: str) -> PlatformContract:
    """The platform of a stack with one group of ``instance_type``, whatever the shipped stacks hold."""
    return PlatformContract.from_outputs(evaluate("staging", **one_group(instance_type)).outputs)


def container(job: dict, task: int = 0) -> dict:
    (only,) = job["spec"]["tasks"][task]["template"]["spec"]["containers"]
    return only


def option(command: list[str], flag: str) -> str:
    return command[len(command) - 1 - command[::-1].index(flag) + 1]  # its last value, as TorchTitan takes it


def test_a_trn2_job_runs_the_tutorial_configuration_on_every_neuron_core_of_the_native_image():
    contract = contract_with("trn2.48xlarge")
    (group,) = contract.node_groups
    job = titan_job(contract, JobRequest(name="qwen3train", nodes=1))
    command = container(job)["command"]
    assert command[command.index(MODULE) - 1] == "-m"  # torchrun runs the training module
    assert f"--nproc_per_node={group.neuron_cores_per_node}" in command
    assert f"--rdzv_endpoint={contract.etcd_endpoint}" in command
    assert container(job)["image"] == contract.software(group).training_image
    assert job["spec"]["queue"] == contract.queues[0]
    limits = container(job)["resources"]["limits"]
    assert int(limits[layout.EFA_RESOURCE]) == group.efa_interfaces_per_node
    recipe = recipe_for(group.instance_type)
    assert " ".join(recipe.model_options) in " ".join(command)
    ranks = group.neuron_cores_per_node
    parallelism = job["metadata"]["annotations"][PARALLELISM_ANNOTATION]
    assert f"tensor parallel {recipe.tensor_parallel} x FSDP {ranks // recipe.tensor_parallel}" in parallelism
    assert option(command, "--dump_folder") == f"{contract.checkpoints_path}/qwen3train/{group.name}"  # the run's own
    assert option(command, "--hf_assets_path").startswith(f"{contract.datasets_path}/")
    assert option(command, "--dataloader.dataset_path").startswith(f"{contract.datasets_path}/")


def titan_arguments(job: dict) -> list[str]:
    """The options TorchTitan parses: the script's, without the launcher's ``--device`` (training.titan_train takes it)."""
    command = container(job)["command"]
    script = command[command.index(MODULE) + 1 :]
    device = script.index("--device")
    return script[:device] + script[device + 2 :]


def test_the_trn2_command_line_is_accepted_by_torchtitans_parser_option_by_option():
    """Every option of the trn2 job, parsed by the installed TorchTitan (0.3.0), lands in its configuration with
    the value given. TorchTitan Neuron cannot be installed here: upstream's qwen3 recipe stands in for
    ``torchtitan_neuron.models.qwen3`` (training.titan_configs.STAND_INS), a configuration of the same classes."""
    assert "torchtitan_neuron.models.qwen3" in STAND_INS
    args = titan_arguments(titan_job(contract_with("trn2.48xlarge"), JobRequest(name="qwen3train", nodes=1)))
    config = parse_titan_options(args)
    assert type(config).__name__ == "Config" and type(config)._owner.__name__ == "DrainingTrainer"
    position, checked = 0, []
    while position < len(args):
        flag = args[position]
        takes_value = position + 1 < len(args) and not args[position + 1].startswith("--")
        if flag in ("--module", "--config"):
            position += 2
            continue
        value = getattr_path(config, flag.removeprefix("--"))
        if takes_value:
            assert str(value) == args[position + 1], flag
            position += 2
        else:
            assert value is True, flag
            position += 1
        checked.append(flag)
    assert {"--dump_folder", "--hf_assets_path", "--dataloader.dataset", "--dataloader.dataset_path", "--debug.seed"} <= set(
        checked
    )


def getattr_path(config, path: str):
    for name in path.split("."):
        config = getattr(config, name)
    return config


def test_an_unknown_torchtitan_option_is_refused_in_one_line(tmp_path, capsys):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(evaluate("staging", **one_group("trn2.48xlarge")).outputs))
    status = launch(["--outputs", str(outputs), "--workload", "torchtitan", "--nodes", "1", "--dryrun", "--",
                     "--training.stepz", "5"])  # fmt: skip
    error = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in error
    assert "--training.stepz" in error and "--training.steps" in error


def cache_of(*given: str) -> str:
    job = titan_job(contract_with("trn2.48xlarge"), JobRequest(name="qwen3train", nodes=1, training_args=given))
    return job["metadata"]["annotations"][COMPILE_CACHE_ANNOTATION]


def test_steps_intervals_and_paths_keep_the_compile_cache_and_a_sequence_length_changes_it():
    contract = contract_with("trn2.48xlarge")
    plain = cache_of()
    assert cache_of("--training.steps", "1000") == plain
    assert cache_of("--checkpoint.interval", "100") == plain
    assert cache_of("--metrics.save_tb_folder", f"{contract.tensorboard_log_path}/elsewhere") == plain
    assert cache_of("--training.seq_len", "8192") != plain


def test_a_trn1_group_is_refused_in_one_line():
    contract = contract_with("trn1.32xlarge")
    with pytest.raises(LaunchError, match=re.escape(registry.workloads()["torchtitan"].runs_on())) as refused:
        titan_job(contract, JobRequest(name="qwen3train"))
    assert "\n" not in str(refused.value)


def test_an_option_after_the_separator_replaces_the_launchers_but_not_off_the_shared_volume():
    contract = contract_with("trn2.48xlarge")
    given = JobRequest(name="qwen3train", nodes=1, training_args=("--training.steps", "50"))
    assert option(container(titan_job(contract, given))["command"], "--training.steps") == "50"
    elsewhere = JobRequest(name="qwen3train", nodes=1, training_args=("--dump_folder=/tmp/run",))
    with pytest.raises(LaunchError, match="--dump_folder /tmp/run: not on the shared volume"):
        titan_job(contract, elsewhere)


def rehearse(tmp_path_factory, *interruption: str) -> tuple[dict, str, Path]:
    """`python -m jobs.rehearsal --workload torchtitan` on a trn2 group's outputs: its report, its progress lines and
    its kept work directory."""
    scratch = tmp_path_factory.mktemp("titan")
    outputs = scratch / "outputs.json"
    outputs.write_text(json.dumps(evaluate("staging", **one_group("trn2.48xlarge")).outputs))
    workdir = scratch / "work"
    ran = subprocess.run(
        [sys.executable, "-m", "jobs.rehearsal", "--outputs", str(outputs), "--workload", "torchtitan", "--workdir",
         str(workdir), "--json", "--steps", str(STEPS), *interruption],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    return json.loads(ran.stdout), ran.stderr, workdir


def checkpoint_folder(workdir: Path) -> Path:
    """Where the rehearsed job's DCP checkpoints are, on the rehearsal's local volume."""
    contract = contract_with("trn2.48xlarge")
    checkpoints = PurePosixPath(contract.checkpoints_path).relative_to(contract.fsx_mount_path)
    (group,) = contract.node_groups
    return workdir / "fsx" / checkpoints / TORCHTITAN_ON_CPU.job_name / group.name / "checkpoint"


@pytest.fixture(scope="module")
def drained(tmp_path_factory) -> tuple[dict, str, Path]:
    """One rehearsal of the TorchTitan job on CPUs, drained between two checkpoints."""
    return rehearse(tmp_path_factory, "--drain-at", str(CHECKPOINT_EVERY + 1))


KILL_AT = CHECKPOINT_EVERY + 2


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> tuple[dict, str, Path]:
    """One rehearsal of the TorchTitan job on CPUs, a worker killed after a checkpoint."""
    return rehearse(tmp_path_factory, "--kill-at", str(KILL_AT))


def test_a_killed_worker_resumes_from_the_newest_checkpoint(killed):
    kill_at = KILL_AT
    report, progress, _ = killed
    assert report["passed"] and report["killed_at_step"] == kill_at
    assert report["resumed_from"] == report["checkpoint_at_kill"] == CHECKPOINT_EVERY
    assert report["steps_retrained"] == list(range(CHECKPOINT_EVERY + 1, kill_at + 1))
    assert f"killing worker rank 1 after step {kill_at}" in progress


def test_a_drain_checkpoints_the_last_step_and_the_next_run_loses_none(drained):
    report, progress, workdir = drained
    assert report["passed"], report["problem"]
    last_trained = report["drained_at_step"]
    assert CHECKPOINT_EVERY < last_trained < STEPS, "the drain did not come between two checkpoints"
    assert last_trained in complete_checkpoints(checkpoint_folder(workdir))  # the step the workers stopped after, in full
    drained_logs = "".join(log.read_text() for log in (workdir / "logs").glob("*.log"))
    assert drained_logs.count("DRAIN rank") == 2  # every worker stopped there, each agent's
    assert report["resumed_from"] == last_trained and report["steps_lost"] == 0
    steps = report["steps_trained"]
    assert steps[steps.index(last_trained) + 1 :] == list(range(last_trained + 1, STEPS + 1))
    assert report["agents_exit"] == [0, 0] and "SIGTERM to the 2 torchrun agents" in progress


def test_a_resume_by_another_world_size_is_refused_in_one_line(drained):
    """The rehearsal's own TorchTitan command line, run by one worker (torchrun, standalone) in the dump folder the
    drained rehearsal's two workers wrote: rank 0's one line names the world sizes, the worker exits with status 2
    before a step, and the first run's record and steps stay as they were."""
    _, _, workdir = drained
    dump_folder = checkpoint_folder(workdir).parent
    recorded, trained = (dump_folder / run_record.RECORD).read_text(), read_metrics(dump_folder / "metrics.jsonl")
    assert trained and '"world_size": 2' in recorded  # the drained run's two workers trained and recorded there
    contract = contract_with("trn2.48xlarge")
    workload = TORCHTITAN_ON_CPU
    job = workload.job(contract, RehearsalRequest(workload="torchtitan", nodes=1, workers_per_node=1))
    local = CpuOverrides(etcd_endpoint="", fsx_root=workdir / "fsx", fsx_mount_path=contract.fsx_mount_path)
    options = [local.localise(argument) for argument in titan_arguments(job)]
    assert options[options.index("--dump_folder") + 1] == str(dump_folder)  # the drained run's, not a new one
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", "--max-restarts",
               "0", "-m", MODULE, *options]  # fmt: skip
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    ran = subprocess.run(command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=300)
    log = ran.stdout + ran.stderr
    assert ran.returncode != 0, log[-3000:]
    refusals = [line for line in log.splitlines() if "holds the checkpoints of a run with" in line]
    assert len(refusals) == 1 and "world_size 2, not 1" in refusals[0], log[-3000:]
    assert re.search(r"Root Cause.*?exitcode  : 2 ", log, re.DOTALL), log[-3000:]  # a refusal, not a crash
    assert (dump_folder / run_record.RECORD).read_text() == recorded
    assert read_metrics(dump_folder / "metrics.jsonl") == trained  # no step trained on another run's state


def test_the_rehearsal_recipe_trains(drained):
    report, _, _ = drained
    assert report["first_loss"] == report["first_loss"] and report["last_loss"] < report["first_loss"]  # no NaN, learns


def test_runs_are_seeded_the_first_step_has_the_same_loss_run_to_run(drained, killed):
    (first_run, *_), (second_run, *_) = drained, killed
    assert first_run["first_loss"] == second_run["first_loss"]


def test_the_rehearsal_prints_no_blank_line(drained):
    _, progress, _ = drained
    assert "" not in progress.splitlines()


def test_the_generated_assets_are_the_same_every_time(tmp_path):
    first, second = (titan_assets.write_assets(tmp_path / name) for name in ("a", "b"))
    for part in ("tokenizer/tokenizer.json", "text/data.json"):
        assert (first / part).read_bytes() == (second / part).read_bytes()
    assert json.loads((first / "tokenizer/tokenizer_config.json").read_text())["eos_token"] == titan_assets.EOS
