"""`make test` from a fresh clone of this repository's HEAD, the command CI and the README's Quick start run: first the
virtualenvs and Mermaid's parser it builds (.venv with the full set, .venv-checkov, tests/mermaid/node_modules; pip
and npm use their caches as they would on a developer's machine), then the lint and the test suite, each timed.

Slow (as long as the suite: README, "Engine speed"), so `make bench` runs it only with BENCH_MAKE_TEST=1. Prints
figures; asserts nothing. Run with `python -m benchmarks.bench_make_test`.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.measure import ROOT, load, machine

# What `make test` builds before it lints and tests (its prerequisites in the Makefile)
PREREQUISITES = (".venv/.installed", ".venv-checkov/.installed", "tests/mermaid/node_modules/.installed")
SHOWN_LINES = 40  # of the log, when a phase fails


def phase(what: str, command: list[str], clone: Path, log: Path) -> float:
    print(f"  {what} ... (log: {log})", flush=True)
    start = time.perf_counter()
    with log.open("w") as output:
        result = subprocess.run(command, cwd=clone, stdout=output, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        print("\n".join(log.read_text(errors="replace").splitlines()[-SHOWN_LINES:]))
        raise SystemExit(f"{' '.join(command)}: exit status {result.returncode} after {seconds:.0f} s")
    print(f"  {what}: {seconds / 60:.1f} min; {load()}", flush=True)
    return seconds


def main() -> None:
    print(machine())
    commit = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %cs"], capture_output=True, text=True)
    print(f"make test from a fresh clone of HEAD ({commit.stdout.strip()}); before: {load()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-make-test-") as scratch:
        clone = Path(scratch) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        build = ["make", *PREREQUISITES]
        built = phase(f"build ({' '.join(build)})", build, clone, Path(scratch) / "build.log")
        tested = phase("make test (lint, then the suite)", ["make", "test"], clone, Path(scratch) / "test.log")
    print(f"make test from a fresh clone: {(built + tested) / 60:.1f} min in all")


if __name__ == "__main__":
    main()
