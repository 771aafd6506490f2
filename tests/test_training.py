"""The training script runs end to end on a CPU with a tiny Hugging Face BERT and a generated shard."""

from __future__ import annotations

import json
import math
import re
import socket

import dockerfiles
import pytest
import torch
from transformers import BertForPreTraining

from training import allreduce_check, checkpoint, pretrain_bert
from training.data import IGNORED_LABEL, ShardDataset, model_inputs, write_synthetic_shard
from training.options import BERT_TINY
from trainium_eks import versions

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
    assert allreduce_check.main(["--device", "cpu"]) == 1.0


def test_metrics_lines_are_json(shards, tmp_path):
    train(shards, tmp_path / "m", "--max-steps", "2")
    records = [json.loads(line) for line in (tmp_path / "m" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]


# The Ubuntu packages training/Dockerfile.native installs from the Ubuntu 26.04 archive, which serves them with its
# security updates: no source states their versions (the Dockerfile says so). Any other package must be pinned.
UBUNTU_ARCHIVE_PACKAGES = {
    "ca-certificates": "the HTTPS downloads",
    "curl": "the Neuron key and the EFA installer",
    "gnupg": "checking the Neuron repository's and the EFA installer's signatures",
    "python3": "the training scripts",
    "python3-venv": "the virtual environment pip installs into",
    "git": "cloning TorchTitan Neuron, as its setup guide does",
    "openssh-client": "mpirun's connections from nccom-test's launcher (acceptance efa-bandwidth)",
    "openssh-server": "the sshd of nccom-test's nodes (acceptance efa-bandwidth)",
}
# What the native image installs from TorchTitan Neuron's source tree, which it fetches: the fork's own requirements
# file and the fork, under requirements-native.txt as constraints (no tag of its release is published; the Dockerfile
# records the commit it built).
FETCHED_SOURCE_REQUIREMENTS = {"-r requirements.txt", "-e ."}
# A tag naming one build: a full version (2.9.0-...-sdk2.30.0) or a dated build (resolute-20260811.1), never a tag
# that moves with the next build (latest, 26.04, resolute).
ONE_BUILD_TAG = re.compile(r"\d+\.\d+\.\d+|\d{8}")
REQUIREMENT_PIN = re.compile(r"[A-Za-z0-9._-]+==[0-9][0-9A-Za-z.*+!-]*")
TRAINING_DOCKERFILES = sorted({stack.dockerfile for stack in versions.TRAINING_STACKS.values()})


@pytest.mark.parametrize("dockerfile", TRAINING_DOCKERFILES)
def test_training_image_is_pinned(dockerfile):
    bases = dockerfiles.base_images(dockerfile)
    assert bases
    for base in bases:
        tag = base.rsplit("/", 1)[-1].partition(":")[2]
        assert ONE_BUILD_TAG.search(tag), base
    for package in dockerfiles.apt_packages(dockerfile):
        assert "=" in package or package in UBUNTU_ARCHIVE_PACKAGES, package
    requirements = dockerfiles.pip_requirements(dockerfile)
    assert requirements and all(REQUIREMENT_PIN.fullmatch(r) or r in FETCHED_SOURCE_REQUIREMENTS for r in requirements), (
        requirements
    )
    assert any(r.startswith("python-etcd==") for r in requirements)
    downloads = [word for words in dockerfiles.commands(dockerfile) for word in words if "://" in word]
    assert not [url for url in downloads if "latest" in url]  # a download names its version


@pytest.mark.parametrize("stack", versions.TRAINING_STACKS.values(), ids=lambda stack: stack.name)
def test_each_image_ships_the_neuron_runtime_its_stack_records(stack):
    """The driver checks trust trainium_eks/versions.py's runtime of a stack: its image must ship that runtime, from
    its base image's Neuron SDK or from a pinned aws-neuronx-runtime-lib."""
    packages = dockerfiles.apt_packages(stack.dockerfile)
    pinned = [p.partition("=")[2].rstrip("*").split(".") for p in packages if p.startswith("aws-neuronx-runtime-lib=")]
    library = stack.runtime.library.split(".")
    assert all(version[: len(library)] == library for version in pinned), pinned
    from_base = any(f"sdk{stack.runtime.sdk}-" in base for base in dockerfiles.base_images(stack.dockerfile))
    assert pinned or from_base
