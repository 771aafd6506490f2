"""`jobs.job_building.grace_period`: a training pod's terminationGracePeriodSeconds from its checkpoint's size, the file system's
throughput and a step's time. The checkpoint's size is checked against one the training script writes."""

from __future__ import annotations

import math

import pytest
import torch
from support import evaluate, one_group
from transformers import BertConfig, BertForPreTraining

from jobs.job_building import grace_period
from jobs.job_building.platform_job import JobRequest
from jobs.workloads.bert_job import volcano_job
from training import pretrain_bert
from training.data import write_synthetic_shard
from training.options import BERT_TINY, CONFIGS
from trainium_eks import fsx_throughput
from trainium_eks.contract import PlatformContract
from trainium_eks.fsx_throughput import SCRATCH_WRITE_MBPS_PER_TIB

# The formula counts tensor bytes; the files add a fixed cost per tensor (torch.save's zip entry for each optimizer
# state tensor, safetensors' JSON header, config.json). The tiny model's tensors are a few kilobytes each, so that
# cost is a visible share of its checkpoint, at most this fraction; BERT-large's 4 GB of tensors make it negligible.
FILE_OVERHEAD = 0.25


@pytest.mark.parametrize("model", CONFIGS)
def test_the_parameter_count_is_the_models_own(model):
    with torch.device("meta"):  # the model's shapes without its memory (BERT-large is 1.3 GB)
        network = BertForPreTraining(BertConfig(**CONFIGS[model]))
    assert grace_period.parameter_count(CONFIGS[model]) == sum(p.numel() for p in network.parameters())


def test_the_checkpoint_the_script_writes_is_the_size_the_formula_gives(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_synthetic_shard(data / "shard.hdf5", samples=8, seq_len=32, vocab_size=BERT_TINY["vocab_size"], max_predictions=5)
    output = tmp_path / "run"
    pretrain_bert.main(
        ["--data-dir", str(data), "--output-dir", str(output), "--model", "tiny", "--device", "cpu",
         "--batch-size", "4", "--grad-accum-steps", "1", "--max-steps", "2", "--warmup-steps", "1"]
    )  # fmt: skip
    written = sum(path.stat().st_size for path in (output / "checkpoint-2").iterdir())
    expected = grace_period.checkpoint_bytes("tiny")
    assert expected <= written <= expected * (1 + FILE_OVERHEAD), (written, expected)


def test_the_grace_period_is_a_step_a_write_and_the_default_grace_period():
    gigabyte, mb_s = 4 * 1000**3, 200.0
    seconds = grace_period.grace_period_seconds(gigabyte, mb_s, step_seconds=5.0)
    assert seconds == math.ceil(5.0 + gigabyte / (mb_s * 1000**2) + grace_period.KUBERNETES_DEFAULT_GRACE_SECONDS)
    assert grace_period.grace_period_seconds(0, mb_s, 0.0) == grace_period.KUBERNETES_DEFAULT_GRACE_SECONDS
    assert grace_period.grace_period_seconds(gigabyte, 2 * mb_s, 5.0) < seconds  # a faster file system writes sooner
    assert grace_period.grace_period_seconds(2 * gigabyte, mb_s, 5.0) > seconds
    assert grace_period.grace_period_seconds(gigabyte, mb_s, 60.0) == seconds + 55


@pytest.mark.parametrize(
    ("deployment", "capacity_gib", "per_tib", "mb_s"),
    [
        ("PERSISTENT_1", 1200, 200, 1200 / 1024 * 200),
        ("PERSISTENT_2", 2400, 1000, 2400 / 1024 * 1000),
        ("SCRATCH_2", 2400, None, 2400 / 1024 * SCRATCH_WRITE_MBPS_PER_TIB),
    ],
)
def test_the_file_systems_throughput_is_its_capacity_times_its_throughput_per_tib(deployment, capacity_gib, per_tib, mb_s):
    assert fsx_throughput.write_mb_s(deployment, capacity_gib, per_tib) == pytest.approx(mb_s)


def test_a_persistent_file_system_without_throughput_is_refused():
    with pytest.raises(ValueError, match="PERSISTENT_1"):
        fsx_throughput.write_mb_s("PERSISTENT_1", 1200, None)


def test_the_tutorial_job_takes_its_measured_step_and_others_leave_it_out_until_given():
    measured = grace_period.job_grace_period("large", "trn1.32xlarge", batch_size=16, grad_accum_steps=32, throughput_mb_s=234)
    # the tutorial's 2 x 32 workers at batch 16 x 32 micro-batches logged about 6450 sequences/s: some 5 s a step
    assert 4 < measured.step_seconds < 6
    assert measured.checkpoint_bytes == grace_period.checkpoint_bytes("large")
    assert measured.pod_spec() == {"terminationGracePeriodSeconds": measured.seconds}
    assert measured.environment() == {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(measured.seconds)}
    assert f"{measured.seconds} s" in measured.describe()
    halved = grace_period.job_grace_period("large", "trn1.32xlarge", batch_size=16, grad_accum_steps=16, throughput_mb_s=234)
    assert halved.step_seconds == pytest.approx(measured.step_seconds / 2)  # half the sequences per worker
    unknown = grace_period.job_grace_period("large", "trn2.48xlarge", batch_size=16, grad_accum_steps=32, throughput_mb_s=234)
    assert unknown.step_seconds is None and "--step-seconds" in unknown.describe()
    assert unknown.seconds == grace_period.grace_period_seconds(unknown.checkpoint_bytes, 234, None) < measured.seconds
    given = grace_period.job_grace_period("large", "trn2.48xlarge", 16, 32, throughput_mb_s=234, step_seconds=3.0)
    assert given.step_seconds == 3.0


def test_a_grace_period_longer_than_a_capacity_blocks_notice_is_flagged():
    long_write = grace_period.GracePeriod(checkpoint_bytes=10**12, throughput_mb_s=100, step_seconds=5)
    assert long_write.seconds > grace_period.CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS and not long_write.fits_capacity_block_window
    assert grace_period.GracePeriod(4 * 1000**3, 234, 5).fits_capacity_block_window


def test_the_rehearsal_gives_the_pods_own_grace_period_or_kubernetes_default():
    contract = PlatformContract.from_outputs(evaluate("staging", **one_group("trn1.32xlarge")).outputs)
    job = volcano_job(contract, JobRequest(name="berttrain", nodes=1, workers_per_node=1))
    declared = {task["template"]["spec"].get("terminationGracePeriodSeconds") for task in job["spec"]["tasks"]}
    (expected,) = {grace_period.KUBERNETES_DEFAULT_GRACE_SECONDS if value is None else value for value in declared}
    assert grace_period.pod_grace_seconds(job) == expected
    for task in job["spec"]["tasks"]:
        task["template"]["spec"]["terminationGracePeriodSeconds"] = 95
    assert grace_period.pod_grace_seconds(job) == 95
