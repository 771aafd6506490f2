"""Acceptance check: an all-reduce across every worker of a multi-node job (over EFA on Trainium).

Each worker contributes its rank + 1; the sum must be world * (world + 1) / 2 everywhere. Exits non-zero otherwise.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from training import backend as backends


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


def main() -> float:
    backend = backends.select(os.environ.get("ALLREDUCE_DEVICE", "auto"))
    dist.init_process_group(backend.process_group)
    try:
        return check_sum(backend.device())
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
