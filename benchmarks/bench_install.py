"""What `make preview` costs on a machine with an empty pip cache: the infrastructure set (requirements-infra.txt, pinned
by constraints.txt) installed into a throwaway virtualenv as the Makefile installs it, but with `--no-cache-dir`; its
size on disk and its largest distributions; and the first plan in it.

The editable install is of a clone of this repository's HEAD (an editable install writes its metadata into the source
tree), so committed requirements are what is timed. Downloads dominate: the figures depend on the network, and the
load average is printed with them. Prints figures; asserts nothing. Run with `make bench` (or
`python -m benchmarks.bench_install`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.measure import ROOT, load, machine

PIP = ("-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-cache-dir")
LARGEST = 8  # distributions listed by size


def disk_bytes(path: Path) -> int:
    """What ``du -s`` counts: allocated blocks, each hard-linked file once."""
    seen, total = set(), 0
    for directory, _, files in os.walk(path):
        for name in files:
            status = os.lstat(os.path.join(directory, name))
            if (status.st_dev, status.st_ino) not in seen:
                seen.add((status.st_dev, status.st_ino))
                total += status.st_blocks * 512
    return total


def step(what: str, command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    # pip's warnings (an unreachable extra index, say) are shown only when the step fails
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit status {result.returncode}\n{result.stderr[-4000:]}")
    print(f"  {what:<58} {seconds:6.1f} s", flush=True)
    return seconds


def largest(site_packages: Path) -> list[tuple[int, str]]:
    """The installed top-level directories of site-packages, by size on disk."""
    sizes = [(disk_bytes(entry), entry.name) for entry in site_packages.iterdir() if entry.is_dir()]
    return sorted(sizes, reverse=True)[:LARGEST]


def main() -> None:
    print(machine())
    # "An empty pip cache" still downloads from wherever pip is configured to look: its indexes and find-links.
    config = subprocess.run([sys.executable, *PIP[:2], "config", "list"], capture_output=True, text=True).stdout
    sources = [line for line in config.splitlines() if "index-url=" in line or "find-links=" in line]
    default = [] if any(".index-url=" in line for line in sources) else ["PyPI"]
    print("pip's sources:", "; ".join(default + sources))
    print(f"before: {load()}")
    with tempfile.TemporaryDirectory(prefix="bench-install-") as scratch:
        clone, venv = Path(scratch) / "clone", Path(scratch) / "venv"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        python = str(venv / "bin" / "python")
        print("infrastructure set into a fresh virtualenv, pip cache not used:")
        seconds = step("python -m venv", [sys.executable, "-m", "venv", str(venv)], clone)
        seconds += step(
            "pip install -r requirements-infra.txt -c constraints.txt",
            [python, *PIP, "-r", "requirements-infra.txt", "-c", "constraints.txt"],
            clone,
        )
        seconds += step("pip install --no-deps --editable .", [python, *PIP, "--no-deps", "--editable", "."], clone)
        print(f"  {'total (what make preview spends before it plans)':<58} {seconds:6.1f} s")
        step("first python -m preflight plan dev", [python, "-m", "preflight", "plan", "dev"], clone)
        print(f"after:  {load()}")
        (site_packages,) = venv.glob("lib/python*/site-packages")
        size = disk_bytes(venv)
        print(f"size on disk: {size / 1e6:.0f} MB ({size / 2**20:.0f} MiB, as du -sm counts), largest in site-packages:")
        for size, name in largest(site_packages):
            print(f"  {size / 1e6:7.1f} MB  {name}")


if __name__ == "__main__":
    main()
