"""TorchTitan as a platform workload: the job `jobs.torchtitan_job` builds for a trn2 group, and that job rehearsed for
real on this machine's CPUs by `python -m jobs.rehearsal --workload torchtitan` (TorchTitan 0.2.2 from the package
index, FSDP2 on gloo, two torchrun agents meeting through a real etcd): a worker killed mid-run resumes from the newest
DCP checkpoint, and a drain (SIGTERM to the torchrun agents, as the kubelet sends it) stops every worker after a whole,
checkpointed step, from which the restarted job goes on with no step lost."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
from support import evaluate, one_group

from jobs.capacity import LaunchError
from jobs.platform_job import JobRequest
from jobs.rehearsal_report import CHECKPOINT_EVERY
from jobs.rehearsal_workloads import WORKLOADS, complete_checkpoints
from jobs.torchtitan_job import PARALLELISM_ANNOTATION, RECIPES, titan_job
from preflight.stackfile import REPO_ROOT
from training import titan_assets
from trainium_eks import layout
from trainium_eks.contract import PlatformContract

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
    assert command[command.index("-m") + 1] == "training.titan_train"
    assert f"--nproc_per_node={group.neuron_cores_per_node}" in command
    assert f"--rdzv_endpoint={contract.etcd_endpoint}" in command
    assert container(job)["image"] == contract.software(group).training_image
    assert job["spec"]["queue"] == contract.queues[0]
    limits = container(job)["resources"]["limits"]
    assert int(limits[layout.EFA_RESOURCE]) == group.efa_interfaces_per_node
    recipe = RECIPES[group.instance_type]
    assert " ".join(recipe.model_options) in " ".join(command)
    ranks = group.neuron_cores_per_node
    parallelism = job["metadata"]["annotations"][PARALLELISM_ANNOTATION]
    assert f"tensor parallel {recipe.tensor_parallel} x FSDP {ranks // recipe.tensor_parallel}" in parallelism
    assert option(command, "--job.dump_folder") == f"{contract.checkpoints_path}/qwen3train"
    assert option(command, "--model.hf_assets_path").startswith(f"{contract.datasets_path}/")
    assert option(command, "--training.dataset_path").startswith(f"{contract.datasets_path}/")


def test_a_trn1_group_is_refused_in_one_line():
    contract = contract_with("trn1.32xlarge")
    with pytest.raises(LaunchError, match="TorchNeuron, which trains Trn2 and Trn3 only") as refused:
        titan_job(contract, JobRequest(name="qwen3train"))
    assert "\n" not in str(refused.value)


def test_an_option_after_the_separator_replaces_the_launchers_but_not_off_the_shared_volume():
    contract = contract_with("trn2.48xlarge")
    given = JobRequest(name="qwen3train", nodes=1, training_args=("--training.steps", "50"))
    assert option(container(titan_job(contract, given))["command"], "--training.steps") == "50"
    elsewhere = JobRequest(name="qwen3train", nodes=1, training_args=("--job.dump_folder=/tmp/run",))
    with pytest.raises(LaunchError, match="--job.dump_folder /tmp/run after --: not on the shared volume"):
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
    return workdir / "fsx" / checkpoints / WORKLOADS["torchtitan"].job_name / "checkpoint"


@pytest.fixture(scope="module")
def drained(tmp_path_factory) -> tuple[dict, str, Path]:
    """One rehearsal of the TorchTitan job on CPUs, drained between two checkpoints."""
    return rehearse(tmp_path_factory, "--drain-at", str(CHECKPOINT_EVERY + 1))


def test_a_killed_worker_resumes_from_the_newest_checkpoint(tmp_path_factory):
    kill_at = CHECKPOINT_EVERY + 2
    report, progress, _ = rehearse(tmp_path_factory, "--kill-at", str(kill_at))
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


def test_the_rehearsal_recipe_trains(drained):
    report, _, _ = drained
    assert report["first_loss"] == report["first_loss"] and report["last_loss"] < report["first_loss"]  # no NaN, learns


def test_the_generated_assets_are_the_same_every_time(tmp_path):
    first, second = (titan_assets.write_assets(tmp_path / name) for name in ("a", "b"))
    for part in ("tokenizer/tokenizer.json", "text/data.json"):
        assert (first / part).read_bytes() == (second / part).read_bytes()
    assert json.loads((first / "tokenizer/tokenizer_config.json").read_text())["eos_token"] == titan_assets.EOS
