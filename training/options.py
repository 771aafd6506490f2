"""The training script's options and model sizes, as plain data: the launcher reads them (to lay the options given
after `--` over its own, and to know what shapes the compiled graphs) without importing torch or transformers."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainium_eks import backends  # the training image ships trainium_eks/backends.py and cli.py
from trainium_eks.cli import OneLineParser

# BERT-large, uncased: the values of google-bert/bert-large-uncased's config.json on the Hugging Face Hub, the
# model the reference tutorial pretrains (its vocabulary of 30522 WordPiece tokens is the dataset's).
BERT_LARGE = {
    "vocab_size": 30522,
    "hidden_size": 1024,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-12,
}
# A model small enough to train a few dozen steps on a CPU in seconds, for tests and smoke runs.
BERT_TINY = {
    "vocab_size": 128,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
CONFIGS = {"large": BERT_LARGE, "tiny": BERT_TINY}


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of ``minimum`` or more (argparse reports a bad one in one line)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text}: give a whole number of {minimum} or more")
        return value

    return parse


def steps_or_all(text: str) -> int:
    """``--steps-this-run``: 1 or more, or -1 for the whole run."""
    return -1 if text.strip() == "-1" else whole_number(1)(text)


def learning_rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text}: give a positive number")
    return value


@dataclass(frozen=True)
class Option:
    """One option of ``training.pretrain_bert``; ``kind`` None is a switch (it takes no value)."""

    flag: str
    help: str
    kind: Callable[[str], Any] | None = str
    default: Any = None
    choices: tuple[str, ...] | None = None
    required: bool = False

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


OPTIONS = (
    Option("--data-dir", "directory of HDF5 shards", Path, required=True),
    Option("--output-dir", "checkpoints and metrics of this job", Path, required=True),
    Option("--tensorboard-dir", "TensorBoard event files (default: <output-dir>/tensorboard)", Path),
    Option("--model", "model size", default="large", choices=tuple(CONFIGS)),
    Option(
        "--device",
        "where to compute: auto takes what the image provides (torch-xla: xla; TorchNeuron: neuron; else cpu)",
        default="auto",
        choices=("auto", *backends.BACKENDS),  # BERT's workload declares each (jobs/workloads/bert.py; a test checks)
    ),
    Option("--batch-size", "sequences per worker per micro-batch", whole_number(1), 16),
    Option("--grad-accum-steps", "micro-batches per optimizer step", whole_number(1), 32),
    Option("--max-steps", "optimizer steps of the whole run", whole_number(1), 28125),
    Option("--steps-this-run", "stop after this many steps (-1: run to the end)", steps_or_all, -1),
    Option("--lr", "peak learning rate", learning_rate, 4e-4),
    Option("--warmup-steps", "steps of linear warm-up", whole_number(0), 2000),
    Option("--bf16", "compute in bfloat16", None, False),
    Option("--log-every", "log every this many steps", whole_number(1), 1),
    Option("--checkpoint-every", "write a checkpoint every this many steps", whole_number(1), 100),
    Option("--seed", "random seed", int, 1234),
    Option(
        "--fail-at-step",
        "rehearse a failure (`jobs.rehearsal --kill-at`): once every worker has trained this step, the last worker "
        "kills itself with SIGKILL, as an OOM kill would; only in a run that did not resume from a checkpoint",
        whole_number(1),
    ),
)
DEFAULTS: Mapping[str, Any] = {option.dest: option.default for option in OPTIONS}
DESCRIPTION = "BERT pretraining, data parallel on Trainium (PyTorch/XLA or TorchNeuron) or on CPUs (gloo)."


def _add(parser: argparse.ArgumentParser, option: Option, given_only: bool) -> None:
    settings: dict[str, Any] = {"help": option.help}
    if option.kind is None:
        settings["action"] = "store_true"
    else:
        settings.update(type=option.kind, choices=option.choices)
    if not given_only:
        settings.update(required=option.required, default=option.default)
    parser.add_argument(option.flag, **settings)


def parser() -> argparse.ArgumentParser:
    """The options of ``python -m training.pretrain_bert``."""
    p = argparse.ArgumentParser(prog="training.pretrain_bert", description=DESCRIPTION)
    for option in OPTIONS:
        _add(p, option, given_only=False)
    return p


def given(argv: Sequence[str]) -> dict[str, Any]:
    """The options ``argv`` gives, by ``dest``, as the script reads them: none required or defaulted, so that they
    can be laid over another command line's one by one. A bad one raises ``UsageError`` (one line)."""
    p = OneLineParser(prog="python -m training.pretrain_bert", argument_default=argparse.SUPPRESS)
    for option in OPTIONS:
        _add(p, option, given_only=True)
    return vars(p.parse_args(list(argv)))


def command_line(values: Mapping[str, Any]) -> list[str]:
    """``values`` (by ``dest``) as the script's arguments, in the order of ``OPTIONS``; None and a switch that is
    off are left out."""
    args: list[str] = []
    for option in OPTIONS:
        value = values.get(option.dest)
        if value is None or value is False:
            continue
        args += [option.flag] if option.kind is None else [option.flag, str(value)]
    return args
