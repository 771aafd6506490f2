"""The training script's options and model sizes, as plain data: the launcher reads them (to know what shapes the
compiled graphs) without importing torch or transformers."""

from __future__ import annotations

import argparse
from pathlib import Path

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


def parser() -> argparse.ArgumentParser:
    """The options of ``python -m training.pretrain_bert``."""
    parser = argparse.ArgumentParser(
        prog="training.pretrain_bert", description="BERT pretraining, data parallel over torch-xla on Trainium (or gloo on CPUs)."
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="directory of HDF5 shards")
    parser.add_argument("--output-dir", type=Path, required=True, help="checkpoints and metrics of this job")
    parser.add_argument("--tensorboard-dir", type=Path, help="TensorBoard event files (default: <output-dir>/tensorboard)")
    parser.add_argument("--model", choices=tuple(CONFIGS), default="large")
    parser.add_argument("--device", choices=("auto", "xla", "cpu"), default="auto")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per worker per micro-batch")
    parser.add_argument("--grad-accum-steps", type=int, default=32)
    parser.add_argument("--max-steps", type=int, default=28125, help="optimizer steps of the whole run")
    parser.add_argument("--steps-this-run", type=int, default=-1, help="stop after this many steps (-1: run to the end)")
    parser.add_argument("--lr", type=float, default=4e-4)
    parser.add_argument("--warmup-steps", type=int, default=2000)
    parser.add_argument("--bf16", action="store_true", help="compute in bfloat16")
    parser.add_argument("--log-every", type=int, default=1)
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1234)
    return parser
