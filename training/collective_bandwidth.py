"""Acceptance check at line rate through torch.distributed: the all-reduce bus bandwidth of the process group training
uses, against the EFA line rate, judged as ``training.bus_bandwidth_check`` judges nccom-test's.

    torchrun ... -m training.collective_bandwidth --line-rate-gbps 3200 --min-fraction 0.2

nccom-test times the Neuron collectives alone; this times them as a training job calls them: ``dist.all_reduce`` on the
job's device through its process-group backend (``training/backend.py``: ``neuron`` on the native image, gloo on CPUs).
The ranks first check an all-reduce's sum (``training.allreduce_check``). Then each rank all-reduces a float32 tensor of
zeros (a sum that stays finite however often it runs) of every size from ``--min-bytes`` to ``--max-bytes``, doubling:
``--warmup`` times untimed, then ``--iterations`` times timed, and a size's time is the slowest rank's. The bandwidths
are nccl-tests' (NVIDIA/nccl-tests doc/PERFORMANCE.md): algbw = S / t, and for an all-reduce of n ranks busbw = algbw
x 2 (n - 1) / n, in GiB/s as nccom-test prints them (its two-rank example, where the factor is 1, prints busbw = algbw).
The verdict is the peak bus bandwidth over the sizes, as for nccom-test.

PyTorch/XLA is refused: its collectives run when the step's graph is cut, not when ``all_reduce`` returns, so this
timing would not measure them (trn1 groups have nccom-test's efa-bandwidth).
Exit status: 0 at or above the floor, 1 below it, 2 for a bad option or a refused backend (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.distributed as dist

from training import backend as backends
from training.allreduce_check import check_sum
from training.bus_bandwidth_check import GIB, Measurement, fraction, judge, positive_number
from trainium_eks.backends import COLLECTIVE_BANDWIDTH
from trainium_eks.cli import OneLineParser, UsageError, one_line

FLOAT32_BYTES = 4
MiB = 2**20


def byte_count(text: str) -> int:
    """A message size: a whole number of bytes holding whole float32 elements."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < FLOAT32_BYTES or value % FLOAT32_BYTES:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes, a multiple of {FLOAT32_BYTES}")
    return value


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return value


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m training.collective_bandwidth", description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=backends.device_choices(COLLECTIVE_BANDWIDTH), default="auto")
    p.add_argument("--line-rate-gbps", type=positive_number, required=True, help="EFA bandwidth of one node, in Gbps")
    p.add_argument("--min-fraction", type=fraction, required=True, help="the floor, as a fraction of the line rate")
    # nccom-test's sizes in jobs/acceptance/bandwidth.py start at 64 MiB too: large enough to reach the fabric's plateau.
    p.add_argument("--min-bytes", type=byte_count, default=64 * MiB, help="smallest message (default 64 MiB)")
    p.add_argument("--max-bytes", type=byte_count, default=1024 * MiB, help="largest message (default 1 GiB)")
    p.add_argument("--iterations", type=count, default=20, help="timed all-reduces per size")
    p.add_argument("--warmup", type=count, default=5, help="untimed all-reduces per size before them")
    return p


def synchronize() -> None:
    """Wait for the device's queued work (TorchNeuron's collectives may return before they finish); CPUs have none."""
    if torch.accelerator.is_available():
        torch.accelerator.synchronize()


def sizes(smallest: int, largest: int) -> list[int]:
    found, size = [], smallest
    while size <= largest:
        found.append(size)
        size *= 2
    return found


def measure(size: int, device: torch.device, iterations: int, warmup: int) -> Measurement:
    """The bus bandwidth of ``iterations`` all-reduces of ``size`` bytes, timed on the slowest rank."""
    tensor = torch.zeros(size // FLOAT32_BYTES, dtype=torch.float32, device=device)
    for _ in range(warmup):
        dist.all_reduce(tensor)
    synchronize()
    started = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    synchronize()
    elapsed = torch.tensor([time.perf_counter() - started], dtype=torch.float32, device=device)  # the tensors' dtype
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # every rank judges the same figure
    seconds = float(elapsed.cpu().item()) / iterations
    world = dist.get_world_size()
    algorithm = size / seconds / GIB
    return Measurement(size, algorithm * 2 * (world - 1) / world)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        if args.min_bytes > args.max_bytes:
            raise UsageError(f"--min-bytes {args.min_bytes}: more than --max-bytes {args.max_bytes}; swap them")
        backend = backends.select(args.device)
        if not backend.eager_collectives:
            raise UsageError(
                "--device auto: this image computes with PyTorch/XLA, whose collectives run when the graph is cut, so "
                "all_reduce cannot be timed here; check its groups with nccom-test (jobs.acceptance efa-bandwidth)"
            )
    except (UsageError, backends.MissingBackend) as error:
        print(f"error: {one_line(str(error))}", file=sys.stderr)
        return 2
    device = backend.device()
    dist.init_process_group(backend.process_group)
    try:
        check_sum(device)
        rows = [measure(size, device, args.iterations, args.warmup) for size in sizes(args.min_bytes, args.max_bytes)]
        rank, world = dist.get_rank(), dist.get_world_size()
    finally:
        dist.destroy_process_group()
    verdict = judge(rows, args.line_rate_gbps, args.min_fraction)
    if rank == 0:
        for row in rows:
            print(f"{row.size_bytes} bytes: bus bandwidth {row.bus_gib_per_s:.2f} GiB/s", flush=True)
        print(f"torch.distributed all_reduce, {world} ranks on {backend.process_group}: {verdict.report()}", flush=True)
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
