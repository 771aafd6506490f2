"""The job path for real: the Volcano Job that `jobs.launch` builds from the staging stack's outputs, run as two
"nodes" (two torchrun agents, two workers each) on this machine, meeting through a real etcd cluster started
with the platform's own member flags. Training and recovery run through `python -m jobs.rehearsal`, the command
a user rehearses a job with; the rendezvous cases drive the same agents directly to kill etcd members.

What differs from the cluster, because this is a CPU (``jobs.rehearsal.local_agents.CpuOverrides``): the rendezvous
endpoint points at a loopback etcd member instead of the etcd Service; a temporary directory stands in for the
FSx mount; the training module runs ``--device cpu --model tiny`` on a generated HDF5 shard with small batches
and step counts; two workers per node instead of one per NeuronCore (``--workers-per-node 2``, a launcher
option). Everything else (backend, run id, --max-restarts, environment) is the job's own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath

import pytest
from support import evaluate, one_group, wait_for_step
from transformers import BertForPreTraining

from jobs.job_building.paths import run_directory
from jobs.job_building.torchx_component import JOB_VERSION_ANNOTATION
from jobs.local_etcd import LocalEtcd
from jobs.rehearsal.cpu_workloads import BERT_ON_CPU
from jobs.rehearsal.local_agents import TINY_CPU_TRAINING, CpuOverrides, Rehearsal, read_metrics, stage_dataset
from jobs.workloads.bert_job import DATASET
from preflight.stackfile import REPO_ROOT
from training.options import BERT_TINY
from trainium_eks.contract import PlatformContract

pytestmark = pytest.mark.minutes  # real components for minutes: scheduled first (tests/conftest.py)

STACK = "staging"
# A fixture of the shipped stack: two trn1.32xlarge nodes (the launcher's default job has two tasks) and three etcd
# members, each on a system node of its own.
FIXTURE = {
    **one_group("trn1.32xlarge"),
    "etcdMembers": 3,
    **{f"systemNode{size}Size": 3 for size in ("Min", "Desired", "Max")},
}
JOB_NAME = "berttrain"
RENDEZVOUS_KEY = "/torch/elastic/rendezvous/{run_id}"  # where torch's etcd-v2 backend keeps a run's state
UNBOUNDED_STEPS = "1000000"  # runs that the test stops itself, after watching them for long enough


@pytest.fixture(scope="module")
def plan():
    return evaluate(STACK, **FIXTURE)


@pytest.fixture
def job(plan, tmp_path) -> dict:
    """A fresh launch per test: like every submission, its own run id (a run id's rendezvous ends with its run)."""
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(plan.outputs))
    launched = subprocess.run(
        [sys.executable, "-m", "jobs.launch", "--outputs", str(outputs), "--dryrun", "--json", "--workers-per-node", "2"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(launched.stdout)


def statefulset(plan) -> dict:
    (etcd_statefulset,) = plan.find("kubernetes:apps/v1:StatefulSet")
    return etcd_statefulset.inputs


@pytest.fixture(scope="module")
def etcd_cluster(plan, tmp_path_factory):
    cluster = LocalEtcd.from_statefulset(statefulset(plan), tmp_path_factory.mktemp("etcd")).start()
    yield cluster
    cluster.stop()


def rehearse(job, plan, cluster, member, tmp_path, steps, annotations=None, **overrides) -> tuple[Rehearsal, object]:
    fsx = tmp_path / "fsx"
    stage_dataset(fsx, DATASET)
    cpu = CpuOverrides(
        etcd_endpoint=cluster.endpoint(member),
        fsx_root=fsx,
        fsx_mount_path=plan.outputs["fsxMountPath"],
        training_args={**TINY_CPU_TRAINING, "--max-steps": steps},
        **overrides,
    )
    output_dir = BERT_ON_CPU.output_dir(job, cpu)  # the launched job's own run directory, on the local volume
    logs = tmp_path / f"logs-{len(list(tmp_path.glob('logs-*')))}"
    return Rehearsal(job, cpu, logs, annotations).start(), output_dir


def rehearsal_command(plan, tmp_path, *options: str) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """``python -m jobs.rehearsal`` on the plan's outputs, as a user runs it: its exit, its outcome, its volume."""
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(plan.outputs))
    workdir = tmp_path / "rehearsal"
    command = [sys.executable, "-m", "jobs.rehearsal", "--outputs", str(outputs), "--workdir", str(workdir), "--json"]
    ran = subprocess.run([*command, *options], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    outcome = json.loads(ran.stdout) if ran.stdout.strip() else {}
    return ran, outcome, workdir / "fsx" / run_directory_on_volume(plan)


def run_directory_on_volume(plan) -> Path:
    """The default BERT job's run directory (the first node group's), relative to the shared volume's mount."""
    contract = PlatformContract.from_outputs(plan.outputs)
    directory = run_directory(contract, JOB_NAME, contract.node_groups[0])
    return Path(PurePosixPath(directory).relative_to(contract.fsx_mount_path))


def test_two_nodes_train_through_etcd_and_loss_falls(plan, tmp_path):
    ran, outcome, output = rehearsal_command(plan, tmp_path, "--steps", "40")
    assert ran.returncode == 0, ran.stderr
    assert outcome["passed"] and outcome["agents_exit"] == [0, 0]
    losses = [r["loss"] for r in read_metrics(output / "metrics.jsonl")]
    assert outcome["steps_trained"] == list(range(1, 41))
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
    assert "loss" in ran.stderr and "step 40/40" in ran.stderr  # the progress a user watches
    trained = BertForPreTraining.from_pretrained(output / "checkpoint-40")
    assert trained.config.hidden_size == BERT_TINY["hidden_size"]


def test_a_killed_worker_restarts_every_node_from_the_last_checkpoint(plan, tmp_path):
    interval = int(TINY_CPU_TRAINING["--checkpoint-every"])
    ran, outcome, output = rehearsal_command(plan, tmp_path, "--steps", "60", "--kill-at", str(2 * interval + 2))
    assert ran.returncode == 0, ran.stderr
    assert outcome["checkpoint_at_kill"] >= 2 * interval  # the kill came after a checkpoint was written
    assert outcome["resumed_from"] >= outcome["checkpoint_at_kill"]  # nothing checkpointed before the kill is lost
    assert outcome["recovery_seconds"] > 0

    records = read_metrics(output / "metrics.jsonl")
    resumed = [r for r in records if r["resumed_from"] > 0]
    start = resumed[0]["resumed_from"]
    last_before_kill = max(r["step"] for r in records if r["resumed_from"] == 0)
    assert last_before_kill >= outcome["killed_at_step"]
    assert last_before_kill - start <= interval  # at most one checkpoint interval is trained again
    assert [r["step"] for r in resumed] == list(range(start + 1, 61))  # the step counter goes on to the end
    assert BertForPreTraining.from_pretrained(output / "checkpoint-60").config.num_hidden_layers == 2


def test_a_drained_job_stops_after_a_whole_step_and_resumes_from_it_losing_none(plan, tmp_path):
    drain_at = 12  # between the checkpoints at 10 and 15: a kill here would retrain steps
    ran, outcome, output = rehearsal_command(plan, tmp_path, "--steps", "40", "--drain-at", str(drain_at))
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert outcome["passed"] and outcome["steps_lost"] == 0
    stopped = outcome["drained_at_step"]
    assert stopped >= drain_at and outcome["resumed_from"] == stopped
    assert (output / f"checkpoint-{stopped}").is_dir()  # written by the drain, whatever the checkpoint interval
    assert outcome["drains"][0]["exit_seconds"] < outcome["drains"][0]["grace_seconds"]  # within the pods' grace period
    assert outcome["drain_to_step_seconds"] > 0
    records = read_metrics(output / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(1, 41))  # every step trained once: none lost, none repeated
    assert f"SIGTERM to the 2 torchrun agents after step {outcome['drains'][0]['after_step']}" in ran.stderr


def test_a_job_that_volcano_restarts_meets_in_a_new_rendezvous_and_resumes(job, plan, etcd_cluster, tmp_path):
    member = etcd_cluster.members[0]
    first, output = rehearse(job, plan, etcd_cluster, member, tmp_path, steps="20")
    assert first.wait(timeout=300) == [0, 0], first.logs_text()  # the agents close this run's rendezvous
    # RestartJob recreates every pod with the job's version bumped; the run id follows it.
    restarted, _ = rehearse(job, plan, etcd_cluster, member, tmp_path, steps="30", annotations={JOB_VERSION_ANNOTATION: "1"})
    assert restarted.rendezvous_id() != first.rendezvous_id()
    assert restarted.wait(timeout=300) == [0, 0], restarted.logs_text()
    resumed = [r for r in read_metrics(output / "metrics.jsonl") if r["resumed_from"]]
    assert [r["step"] for r in resumed] == list(range(21, 31)) and resumed[0]["resumed_from"] == 20


def test_the_rendezvous_outlives_its_ttl(job, plan, etcd_cluster, tmp_path):
    ttl = 8  # seconds, above the agents' 5 s heartbeat; torch's default is 2 hours, longer than a test
    rehearsal, output = rehearse(
        job, plan, etcd_cluster, etcd_cluster.members[0], tmp_path, steps=UNBOUNDED_STEPS, rendezvous_ttl=ttl
    )
    client = etcd_cluster.client(etcd_cluster.members[0])
    try:
        first = wait_for_step(output / "metrics.jsonl", 1, rehearsal, timeout=180)[0]
        while time.time() < first["time"] + 3 * ttl:
            assert all(a.process.poll() is None for a in rehearsal.agents), rehearsal.logs_text()
            state = client.read(RENDEZVOUS_KEY.format(run_id=rehearsal.rendezvous_id()))  # raises EtcdKeyNotFound once expired
            assert state.ttl <= ttl  # renewed: a key left alone would have expired after one TTL
            time.sleep(1)
        records = read_metrics(output / "metrics.jsonl")
        assert records[-1]["time"] > first["time"] + 2 * ttl  # still training, with no restart
        assert all(r["resumed_from"] == 0 for r in records)
    finally:
        rehearsal.stop()


def test_losing_the_etcd_member_the_job_points_at_does_not_stop_training(job, plan, tmp_path):
    cluster = LocalEtcd.from_statefulset(statefulset(plan), tmp_path / "etcd").start()
    assert len(cluster.members) == 3
    target, survivor = cluster.members[0], cluster.members[1]
    rehearsal, output = rehearse(job, plan, cluster, target, tmp_path, steps=UNBOUNDED_STEPS)
    key = RENDEZVOUS_KEY.format(run_id=rehearsal.rendezvous_id())
    try:
        wait_for_step(output / "metrics.jsonl", 10, rehearsal, timeout=180)
        written_before = cluster.client(survivor).read(key).modifiedIndex
        cluster.kill(target)
        killed_at = time.time()
        while time.time() < killed_at + 8:  # past the agents' 1 s state cache and 5 s heartbeat
            assert all(a.process.poll() is None for a in rehearsal.agents), rehearsal.logs_text()
            time.sleep(0.5)
        records = read_metrics(output / "metrics.jsonl")
        assert records[-1]["time"] > killed_at + 5  # still training
        assert all(r["resumed_from"] == 0 for r in records)  # without a restart
        assert cluster.client(survivor).read(key).modifiedIndex > written_before  # heartbeats reached a survivor
    finally:
        rehearsal.stop()
        cluster.stop()
