"""Acceptance check: an all-reduce across every worker of a multi-node job (over EFA on Trainium).

    torchrun ... -m training.allreduce_check [--device auto]

Each worker contributes its rank + 1; the sum must be world * (world + 1) / 2 everywhere. Exits non-zero otherwise;
2 for a bad option or a backend the image lacks (one line on stderr).
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from training import backend as backends
from trainium_eks.backends import EFA_ALLREDUCE
from trainium_eks.cli import OneLineParser, UsageError, one_line


def check_sum(device: torch.device) -> float:
    """In an initialised process group: the all-reduced sum of every rank's rank + 1, or SystemExit if it is wrong."""
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(value)
    expected = world * (world + 1) / 2
    total = float(value.cpu().item())
    if total != expected:
        raise SystemExit(f"rank {rank}: all-reduce gave {total}, expected {expected}")
    if rank == 0:
        print(f"all-reduce across {world} workers: {total} == {expected}", flush=True)
    return total


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m training.allreduce_check", description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=backends.device_choices(EFA_ALLREDUCE), default="auto", help="as training.pretrain_bert's")
    return p


def main(argv: list[str] | None = None) -> float:
    try:
        backend = backends.select(parser().parse_args(argv).device)
    except (UsageError, backends.MissingBackend) as error:
        print(f"error: {one_line(str(error))}", file=sys.stderr)
        raise SystemExit(2) from None
    dist.init_process_group(backend.process_group)
    try:
        return check_sum(backend.device())
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
