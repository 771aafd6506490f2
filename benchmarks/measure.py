"""What every benchmark prints its figures with: the machine (and how fast its CPU runs plain Python, since two
machines with "2 cores" may differ by more than the targets' margins), the load around the timed runs, and the wall
and CPU time of a command."""

from __future__ import annotations

import os
import platform
import resource
import statistics
import subprocess
import time
from pathlib import Path

from preflight import stackfile

ROOT = stackfile.REPO_ROOT
CALIBRATION_ADDITIONS = 10_000_000


def python_speed() -> float:
    """Seconds this interpreter takes for a loop of ten million integer additions: the CPU's speed, as the engine
    (pure Python) meets it."""
    start, total = time.perf_counter(), 0
    for number in range(CALIBRATION_ADDITIONS):
        total += number
    return time.perf_counter() - start


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")), platform.processor())
    return (
        f"machine: {platform.machine()} {model or 'CPU'}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()}; 10^7 additions in plain Python: {python_speed():.2f} s"
    )


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def timed(command: list[str], cwd: Path = ROOT, statuses: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Wall seconds and CPU-seconds (user + system, of the process and every process it waited for) of ``command``,
    which is to exit with one of ``statuses``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode not in statuses:
        raise RuntimeError(f"{' '.join(command)}: exit status {result.returncode}: {result.stderr.strip()[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def spread(figures: list[float]) -> str:
    return f"median {statistics.median(figures):.2f} s (min {min(figures):.2f}, max {max(figures):.2f})"
