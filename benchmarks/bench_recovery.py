"""Job-path timings on this machine: from launch to the first training step, and from a killed worker to the
first step trained again after the restart.

The staging stack's default job (two nodes) runs as two torchrun agents with two workers each on the CPU,
against a real three-member etcd started from the staging plan (as in tests/test_distributed_training.py).
Prints figures; asserts nothing. Run with `make bench` (or `python -m benchmarks.bench_recovery`).
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jobs.launch import DATASET
from jobs.local_etcd import LocalEtcd
from jobs.rehearsal import REPO_ROOT, TINY_CPU_TRAINING, CpuOverrides, Rehearsal, read_metrics, stage_dataset, wait_for_step
from preflight import engine, stackfile

STACK = "staging"
RUNS = 3
KILL_AT_STEP = 12  # after the checkpoint at step 10


def launch(outputs: dict, workdir: Path) -> dict:
    path = workdir / "outputs.json"
    path.write_text(json.dumps(outputs))
    command = [sys.executable, "-m", "jobs.launch", "--outputs", str(path), "--dryrun", "--json", "--workers-per-node", "2"]
    return json.loads(subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout)


def one_run(plan: engine.Plan, cluster: LocalEtcd, workdir: Path) -> tuple[float, float]:
    """Seconds from starting the agents to the first step, and from the kill to the first resumed step."""
    fsx = workdir / "fsx"
    stage_dataset(fsx, DATASET)
    job = launch(plan.outputs, workdir)
    overrides = CpuOverrides(
        etcd_endpoint=cluster.endpoint(cluster.members[0]),
        fsx_root=fsx,
        fsx_mount_path=plan.outputs["fsxMountPath"],
        training_args={**TINY_CPU_TRAINING, "--max-steps": "30"},
    )
    metrics = fsx / "checkpoints" / "berttrain" / "metrics.jsonl"
    rehearsal = Rehearsal(job, overrides, workdir / "logs").start()
    try:
        first = wait_for_step(metrics, 1, rehearsal, timeout=300)[0]
        wait_for_step(metrics, KILL_AT_STEP, rehearsal, timeout=300)
        rehearsal.kill_worker(job["spec"]["tasks"][-1]["name"])
        killed_at = time.time()
        if rehearsal.wait(timeout=300) != [0, 0]:
            raise RuntimeError(rehearsal.logs_text())
    finally:
        rehearsal.stop()
    resumed = next(r for r in read_metrics(metrics) if r["resumed_from"] > 0)
    return first["time"] - rehearsal.started_at, resumed["time"] - killed_at


def main() -> None:
    plan = engine.evaluate(stackfile.load(STACK))
    (statefulset,) = plan.find("kubernetes:apps/v1:StatefulSet")
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as scratch:
        cluster = LocalEtcd(statefulset.inputs, Path(scratch) / "etcd").start()
        try:
            figures = [one_run(plan, cluster, Path(scratch) / f"run-{i}") for i in range(RUNS)]
        finally:
            cluster.stop()
    starts, recoveries = zip(*figures, strict=True)
    print(f"{STACK} job, 2 nodes x 2 workers, {len(cluster.members)}-member etcd, {RUNS} runs")
    print(f"  launch -> first step:           median {statistics.median(starts):5.1f} s  (max {max(starts):.1f})")
    print(f"  killed worker -> resumed step:  median {statistics.median(recoveries):5.1f} s  (max {max(recoveries):.1f})")


if __name__ == "__main__":
    main()
