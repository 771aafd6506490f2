"""The training script runs end to end on a CPU with a tiny Hugging Face BERT and a generated shard."""

from __future__ import annotations

import json
import math
import socket

import pytest
import torch
from transformers import BertForPreTraining

from training import allreduce_check, checkpoint, pretrain_bert
from training.data import IGNORED_LABEL, ShardDataset, model_inputs, write_synthetic_shard
from training.options import BERT_TINY

VOCAB = BERT_TINY["vocab_size"]


@pytest.fixture
def shards(tmp_path):
    directory = tmp_path / "data"
    directory.mkdir()
    write_synthetic_shard(directory / "shard-0.hdf5", samples=16, seq_len=32, vocab_size=VOCAB, max_predictions=5)
    write_synthetic_shard(directory / "shard-1.hdf5", samples=8, seq_len=32, vocab_size=VOCAB, max_predictions=5, seed=1)
    return directory


def train(shards, output, *extra):
    return pretrain_bert.main(
        [
            "--data-dir",
            str(shards),
            "--output-dir",
            str(output),
            "--model",
            "tiny",
            "--device",
            "cpu",
            "--batch-size",
            "8",
            "--grad-accum-steps",
            "2",
            "--warmup-steps",
            "2",
            "--lr",
            "2e-3",
            "--checkpoint-every",
            "10",
            *extra,
        ]
    )


def test_dataset_reads_every_sample_of_every_shard_as_model_inputs(shards):
    dataset = ShardDataset(shards)
    assert len(dataset) == 24
    sample = dataset[20]
    assert set(sample) == {"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"}
    assert sample["input_ids"].shape == sample["labels"].shape == (32,)
    assert (sample["labels"] != IGNORED_LABEL).sum() == 5


def test_masked_lm_labels_hold_the_masked_tokens_up_to_the_position_padding():
    sample = {
        "input_ids": torch.tensor([2, 7, 8, 9, 3, 0]),
        "segment_ids": torch.zeros(6, dtype=torch.long),
        "input_mask": torch.tensor([1, 1, 1, 1, 1, 0]),
        "masked_lm_positions": torch.tensor([1, 3, 0, 0]),
        "masked_lm_ids": torch.tensor([17, 19, 0, 0]),
        "next_sentence_labels": torch.tensor(1),
    }
    inputs = model_inputs(sample)
    assert inputs["labels"].tolist() == [IGNORED_LABEL, 17, IGNORED_LABEL, 19, IGNORED_LABEL, IGNORED_LABEL]
    assert inputs["token_type_ids"] is sample["segment_ids"] and inputs["attention_mask"] is sample["input_mask"]


def test_a_few_steps_learn_and_leave_checkpoints_metrics_and_tensorboard(shards, tmp_path):
    output = tmp_path / "run"
    result = train(shards, output, "--max-steps", "25")
    losses = [r["loss"] for r in result["history"]]
    assert result["steps"] == 25 and len(losses) == 25
    assert all(math.isfinite(loss) for loss in losses)
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5  # it learns the shard
    assert all(r["sequences_per_second"] > 0 for r in result["history"])
    assert sorted(p.name for p in output.glob("checkpoint-*")) == ["checkpoint-10", "checkpoint-20", "checkpoint-25"]
    assert len((output / "metrics.jsonl").read_text().splitlines()) == 25
    assert list((output / "tensorboard").glob("events.out.tfevents.*"))


def test_a_checkpoint_loads_with_from_pretrained(shards, tmp_path):
    output = tmp_path / "run"
    train(shards, output, "--max-steps", "3")
    model = BertForPreTraining.from_pretrained(output / "checkpoint-3")
    assert model.config.hidden_size == BERT_TINY["hidden_size"]
    sample = ShardDataset(shards)[0]
    with torch.no_grad():
        out = model(**{k: v.unsqueeze(0) for k, v in sample.items()})
    assert out.prediction_logits.shape == (1, 32, VOCAB) and math.isfinite(out.loss.item())


def test_a_restarted_job_resumes_from_its_newest_checkpoint(shards, tmp_path):
    output = tmp_path / "run"
    train(shards, output, "--max-steps", "30", "--steps-this-run", "10")
    resumed = train(shards, output, "--max-steps", "30", "--steps-this-run", "5")
    assert resumed["steps"] == 15
    assert [r["step"] for r in resumed["history"]] == [11, 12, 13, 14, 15]


def test_a_resumed_run_trains_exactly_as_an_uninterrupted_one(shards, tmp_path):
    straight = train(shards, tmp_path / "straight", "--max-steps", "12")
    train(shards, tmp_path / "split", "--max-steps", "12", "--steps-this-run", "7", "--checkpoint-every", "7")
    resumed = train(shards, tmp_path / "split", "--max-steps", "12")
    # The same weights, optimizer state, schedule and place in the data: the same losses after the restart.
    assert [r["loss"] for r in resumed["history"]] == pytest.approx([r["loss"] for r in straight["history"][7:]], rel=1e-4)


def test_a_half_written_checkpoint_is_never_resumed_from(shards, tmp_path):
    output = tmp_path / "run"
    train(shards, output, "--max-steps", "10", "--checkpoint-every", "5")
    (output / "checkpoint-12").mkdir()  # a directory without its training state, as a kill mid-rename would not leave
    (output / ".checkpoint-15.partial").mkdir()
    assert checkpoint.latest(output) == output / "checkpoint-10"


def test_bf16_runs_on_cpu(shards, tmp_path):
    result = train(shards, tmp_path / "bf16", "--max-steps", "3", "--bf16")
    assert all(math.isfinite(r["loss"]) for r in result["history"])


def test_learning_rate_warms_up_then_decays():
    factors = [pretrain_bert.learning_rate(step, warmup=10, total=100) for step in range(100)]
    assert factors[9] == 1.0 and factors[0] == pytest.approx(0.1)
    assert factors[10] > factors[50] > factors[99] >= 0


def test_allreduce_check_sums_ranks(monkeypatch):
    with socket.socket() as probe:  # a free loopback port for the single-process group
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("ALLREDUCE_DEVICE", "cpu")
    assert allreduce_check.main() == 1.0


def test_metrics_lines_are_json(shards, tmp_path):
    train(shards, tmp_path / "m", "--max-steps", "2")
    records = [json.loads(line) for line in (tmp_path / "m" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]


def test_training_image_is_pinned():
    from preflight.stackfile import REPO_ROOT

    dockerfile = (REPO_ROOT / "training" / "Dockerfile").read_text()
    froms = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM ")]
    bases = [f for f in froms if f != "base"]  # later stages build on the first
    assert bases and all(":" in b.rsplit("/", 1)[-1] and not b.endswith(":latest") for b in bases)
    requirements = [line.split("#")[0].strip() for line in (REPO_ROOT / "training" / "requirements.txt").read_text().splitlines()]
    pins = [r for r in requirements if r]
    assert pins and all("==" in r for r in pins)
    assert any(r.startswith("python-etcd==") for r in pins)
