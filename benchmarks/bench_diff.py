"""`preflight diff STACK --against REF` for each shipped stack, against HEAD and (when the history has one) HEAD~1.

Each run is the command as a user runs it, in a fresh process: the working tree's side evaluated in that process, the
baseline evaluated in another on the commit git-archives (preflight/baseline.py). Against HEAD~1 the baseline is
the previous commit's code, whatever it imports. Prints wall and CPU-seconds (user + system of the command and the
processes it waited for); asserts nothing. Target: at most 15 s per stack on a 2-core machine. Run with `make bench`
(or `python -m benchmarks.bench_diff`).
"""

from __future__ import annotations

import os
import subprocess
import sys

from benchmarks.bench_preflight import RUNS
from benchmarks.measure import ROOT, load, machine, spread, timed
from preflight import cli, stackfile

# The working tree may hold a change that loses data or that EKS refuses: the diff says so and is timed all the same.
DIFF_STATUSES = (0, cli.DATA_LOSS, cli.REFUSED)


def refs() -> list[str]:
    """HEAD, and HEAD~1 when HEAD has a parent (a shallow clone may not)."""
    parent = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", "HEAD~1"], capture_output=True)
    return ["HEAD", "HEAD~1"] if parent.returncode == 0 else ["HEAD"]


def describe(ref: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h %cs", ref], capture_output=True, text=True, check=True
    ).stdout.strip()


def main() -> None:
    print(machine())
    edited = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True, check=True)
    print(f"working tree: {len(edited.stdout.splitlines())} paths differ from HEAD ({describe('HEAD')})")
    print(f"before: {load()}")
    for ref in refs():
        print(f"diff STACK --against {ref} ({describe(ref)}), {RUNS} runs each:")
        for stack in stackfile.stack_names():
            command = [sys.executable, "-m", "preflight", "diff", stack, "--against", ref, "--json"]
            walls, cpus = zip(*(timed(command, statuses=DIFF_STATUSES) for _ in range(RUNS)), strict=True)
            print(f"  {stack:<8} wall {spread(walls)}; CPU {spread(cpus)}; 1-min load now {os.getloadavg()[0]:.2f}")
    print(f"after:  {load()}")


if __name__ == "__main__":
    main()
