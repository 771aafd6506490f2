"""Acceptance check: one BERT training step on the image's backend, end to end (``jobs.acceptance train-step``).

    torchrun --nproc_per_node=<NeuronCores> -m training.smoke_step [--device auto] [--bf16] [--workdir /tmp/one-step]

``training.pretrain_bert`` itself, on the tiny model and a synthetic shard each rank writes under ``--workdir`` (the
same seeded bytes on every rank): the device and process group the image provides (XLA on trn1, ``neuron`` on trn2,
gloo on CPUs), DDP, compilation, bf16, the optimizer step and rank 0's checkpoint. It needs no dataset on the shared
volume, so it runs on a fresh cluster. Exit status: 0 when the step trained to a finite loss and its checkpoint was
written, 1 otherwise, 2 for a bad option (one line on stderr).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from training import backend as backends
from training import checkpoint, options, pretrain_bert
from training.data import write_synthetic_shard
from trainium_eks.backends import TRAIN_STEP
from trainium_eks.cli import OneLineParser, UsageError, one_line

BATCH_SIZE = 2  # sequences per rank: the shard holds one batch for every rank
SEQUENCE_LENGTH = 32  # within the tiny model's 64 positions
MASKED_POSITIONS = 5


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m training.smoke_step", description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=backends.device_choices(TRAIN_STEP), default="auto", help="as training.pretrain_bert's")
    p.add_argument("--bf16", action="store_true", help="compute in bfloat16, as a training job does")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/one-step"), help="a fresh directory for the shard and checkpoint")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except UsageError as error:
        print(f"error: {one_line(str(error))}", file=sys.stderr)
        return 2
    try:
        backend = backends.select(args.device)
    except backends.MissingBackend as missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    output = args.workdir / "output"
    if output.is_dir() and checkpoint.latest(output) is not None:
        print(
            f"error: --workdir {args.workdir}: holds a checkpoint, which the step would resume from; give a fresh one",
            file=sys.stderr,
        )
        return 2
    data = args.workdir / f"data-{rank}"
    data.mkdir(parents=True, exist_ok=True)
    vocabulary = options.BERT_TINY["vocab_size"]
    write_synthetic_shard(data / "shard.hdf5", world * BATCH_SIZE, SEQUENCE_LENGTH, vocabulary, MASKED_POSITIONS)
    # fmt: off
    result = pretrain_bert.main([
        "--data-dir", str(data), "--output-dir", str(output), "--model", "tiny", "--device", backend.name,
        "--batch-size", str(BATCH_SIZE), "--grad-accum-steps", "1", "--max-steps", "1", "--warmup-steps", "0",
        *(["--bf16"] if args.bf16 else []),
    ])
    # fmt: on
    if rank != 0:
        return 0
    trained, saved = result["history"], checkpoint.latest(output)
    if result["steps"] != 1 or not trained or saved is None:
        print(f"one training step: trained {result['steps']} step(s), checkpoint {saved or 'missing'}", file=sys.stderr)
        return 1
    loss = trained[-1]["loss"]
    print(
        f"one BERT training step, {world} workers on the {backend.name} backend: loss {loss:.4f}, {saved.name} written",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
