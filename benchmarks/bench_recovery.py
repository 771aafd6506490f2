"""Job-path timings on this machine: from launch to the first training step, and from a killed worker to the
first step trained again after the restart.

The staging stack's default job (two nodes) runs through `jobs.rehearsal`, the command a user rehearses a job with:
two torchrun agents with two workers each on the CPU, against a real three-member etcd started with the platform's
flags. Prints figures; asserts nothing. Run with `make bench` (or `python -m benchmarks.bench_recovery`).
"""

from __future__ import annotations

import platform
import statistics
import tempfile
from pathlib import Path

from jobs.rehearsal import RehearsalRequest, rehearsal_job, rehearse
from preflight import engine, stackfile
from trainium_eks.contract import PlatformContract

STACK = "staging"
RUNS = 3
REQUEST = RehearsalRequest(steps=30, kill_at=12, etcd_members=3)  # killed at step 12, after the checkpoint at step 10


def main() -> None:
    contract = PlatformContract.from_outputs(engine.evaluate(stackfile.load(STACK)).outputs)
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    outcomes = []
    for run in range(RUNS):
        with tempfile.TemporaryDirectory() as scratch:
            result = rehearse(contract, REQUEST, rehearsal_job(contract, REQUEST), Path(scratch), say=lambda line: None)
        if not result.passed:
            raise RuntimeError(f"run {run}: {result.problem}")
        outcomes.append(result)
    starts = [o.first_step_seconds for o in outcomes]
    recoveries = [o.recovery_seconds for o in outcomes]
    shape = f"{REQUEST.nodes} nodes x {REQUEST.workers_per_node} workers, {REQUEST.etcd_members}-member etcd"
    print(f"{STACK} job, {shape}, {RUNS} runs")
    print(f"  launch -> first step:           median {statistics.median(starts):5.1f} s  (max {max(starts):.1f})")
    print(f"  killed worker -> resumed step:  median {statistics.median(recoveries):5.1f} s  (max {max(recoveries):.1f})")


if __name__ == "__main__":
    main()
