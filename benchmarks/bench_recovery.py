"""Job-path timings on this machine: from launch to the first training step, from a killed worker to the first step
trained again after the restart, and from a drain's SIGTERM to the first step after the resume, with the steps lost.

The staging stack's default job (two nodes) runs through `jobs.rehearsal`, the command a user rehearses a job with:
two torchrun agents with two workers each on the CPU, against a real three-member etcd started with the platform's
flags. Prints figures; asserts nothing. Run with `make bench` (or `python -m benchmarks.bench_recovery`).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from benchmarks.measure import machine
from jobs.rehearsal import rehearsal_job, rehearse
from jobs.rehearsal.report import Outcome, RehearsalRequest
from preflight import engine, stackfile
from trainium_eks.contract import PlatformContract

STACK = "staging"
RUNS = 3
REQUEST = RehearsalRequest(steps=30, kill_at=12, etcd_members=3)  # killed at step 12, after the checkpoint at step 10
DRAIN = RehearsalRequest(steps=30, drain_at=12, etcd_members=3)  # drained at step 12, between two checkpoints


def main() -> None:
    contract = PlatformContract.from_outputs(engine.evaluate(stackfile.load(STACK)).outputs)
    print(machine())
    kills = runs(contract, REQUEST)
    drains = runs(contract, DRAIN)
    starts = [o.first_step_seconds for o in kills + drains]
    recoveries = [o.recovery_seconds for o in kills]
    resumes = [o.drain_to_step_seconds for o in drains]
    lost = [o.steps_lost for o in drains]
    shape = f"{REQUEST.nodes} nodes x {REQUEST.workers_per_node} workers, {REQUEST.etcd_members}-member etcd"
    print(f"{STACK} job, {shape}, {RUNS} runs each")
    print(f"  launch -> first step:           median {statistics.median(starts):5.1f} s  (max {max(starts):.1f})")
    print(f"  killed worker -> resumed step:  median {statistics.median(recoveries):5.1f} s  (max {max(recoveries):.1f})")
    print(f"  drain SIGTERM -> resumed step:  median {statistics.median(resumes):5.1f} s  (max {max(resumes):.1f})")
    print(f"  steps lost to a drain:          {', '.join(str(n) for n in lost)}")


def runs(contract: PlatformContract, request: RehearsalRequest) -> list[Outcome]:
    outcomes = []
    for run in range(RUNS):
        with tempfile.TemporaryDirectory() as scratch:
            result = rehearse(contract, request, rehearsal_job(contract, request), Path(scratch), say=lambda line: None)
        if result.problem is not None and result.steps_lost is None:  # steps lost: a figure here, shown, not judged
            raise RuntimeError(f"run {run}: {result.problem}")
        outcomes.append(result)
    return outcomes


if __name__ == "__main__":
    main()
