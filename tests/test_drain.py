"""Drains that lose no step (`training/drain.py`): on SIGTERM the training script finishes its step, every worker stops
after the same step, rank 0 checkpoints it and all exit 0; the resumed run goes on from the next step exactly as an
uninterrupted run would. Real processes: the script alone, and under torchrun with SIGTERM to one worker only (a
drained node's workers get it, the other nodes' do not). `jobs.rehearsal --drain-at` is in test_distributed_training.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import wait_for_step

from jobs.rehearsal.local_agents import read_metrics
from preflight.stackfile import REPO_ROOT
from training import checkpoint, pretrain_bert

MAX_STEPS = 1000  # more than any of these runs trains: the SIGTERM comes first
DRAINED = re.compile(r"DRAIN stopped after step (\d+) on SIGTERM")


def options(shards: Path, output: Path) -> list[str]:
    return ["--data-dir", str(shards), "--output-dir", str(output), "--model", "tiny", "--device", "cpu", "--batch-size", "4",
            "--grad-accum-steps", "1", "--lr", "2e-3", "--warmup-steps", "2", "--checkpoint-every", "100",
            "--max-steps", str(MAX_STEPS)]  # fmt: skip


def start(command: list[str], log: Path) -> subprocess.Popen:
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(command, cwd=REPO_ROOT, env=environment, stdout=log.open("w"), stderr=subprocess.STDOUT)


def test_sigterm_finishes_the_step_checkpoints_it_exits_0_and_the_resume_loses_nothing(shards, tmp_path):
    output, log = tmp_path / "drained", tmp_path / "drained.log"
    run = start([sys.executable, "-m", "training.pretrain_bert", *options(shards, output)], log)
    wait_for_step(output / "metrics.jsonl", 3, run)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=120) == 0, log.read_text()[-3000:]

    trained = [record["step"] for record in read_metrics(output / "metrics.jsonl")]
    last = trained[-1]
    assert trained == list(range(1, last + 1)) and last < MAX_STEPS
    assert checkpoint.latest(output) == output / f"checkpoint-{last}"  # the step it stopped after, not a periodic one
    assert DRAINED.search(log.read_text()).group(1) == str(last)

    resumed = pretrain_bert.main([*options(shards, output), "--steps-this-run", "3"])
    straight = pretrain_bert.main([*options(shards, tmp_path / "straight"), "--steps-this-run", str(last + 3)])
    assert [r["step"] for r in resumed["history"]] == [last + 1, last + 2, last + 3]  # no step lost, none repeated
    assert [r["loss"] for r in resumed["history"]] == pytest.approx([r["loss"] for r in straight["history"][last:]], rel=1e-4)


def worker_ranks(agent: subprocess.Popen, count: int, timeout: float = 120) -> dict[int, int]:
    """The agent's worker processes by rank (their RANK variable), once it has started ``count`` of them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = Path(f"/proc/{agent.pid}/task/{agent.pid}/children").read_text().split()
        ranks = {}
        for pid in children:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            rank = next((v.split(b"=", 1)[1] for v in environ if v.startswith(b"RANK=")), None)
            if rank is not None:
                ranks[int(rank)] = int(pid)
        if len(ranks) == count:
            return ranks
        time.sleep(0.1)
    raise TimeoutError(f"torchrun started no {count} workers")


def test_a_sigterm_to_one_worker_stops_every_worker_after_the_same_step(shards, tmp_path):
    """Rank 1 alone gets SIGTERM; rank 0 is never signalled, yet stops after the same step and checkpoints it. Had the
    ranks stopped at different steps, the other would wait in DDP's all-reduce and torchrun would not exit."""
    output, log = tmp_path / "run", tmp_path / "torchrun.log"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "-m", "training.pretrain_bert", *options(shards, output)]  # fmt: skip
    agent = start(command, log)
    ranks = worker_ranks(agent, 2)
    wait_for_step(output / "metrics.jsonl", 3, agent)
    os.kill(ranks[1], signal.SIGTERM)
    assert agent.wait(timeout=120) == 0, log.read_text()[-3000:]  # every worker exited 0

    last = read_metrics(output / "metrics.jsonl")[-1]["step"]
    assert last < MAX_STEPS
    assert DRAINED.search(log.read_text()).group(1) == str(last)  # printed by rank 0, which was not signalled
    assert checkpoint.latest(output) == output / f"checkpoint-{last}"
