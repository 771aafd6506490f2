"""Acceptance check at line rate: the all-reduce bus bandwidth nccom-test measured, against the EFA line rate.

    nccom-test ... allr | tee results.txt
    python -m training.bus_bandwidth_check --line-rate-gbps 800 --min-fraction 0.3 results.txt

nccom-test prints a header naming its columns (``size(B)``, ``count(elems)``, ``type``, one or more ``time``
columns, ``algbw(GB/s)``, ``busbw(GB/s)``, optionally ``algorithm``), one row per message size and a closing
``Avg bus bandwidth`` line; a size that failed prints ``Failure running neuron-bench`` and the run ends with
``N errors found - test failed`` (NCCOM-TEST User Guide, aws-neuron-sdk tools/neuron-sys-tools/nccom-test.rst).
Its "GB/s" are gibibytes per second (the guide: "1GiB = 1,073,741,824 bytes"), and the line rate is in gigabits
per second (10**9 bits), so this converts exactly and prints GiB/s.

The achieved figure is the peak bus bandwidth over the sizes measured: large messages reach the plateau the
fabric allows, small ones measure latency, so the average nccom-test prints says nothing about line rate.
Exit status: 0 at or above the floor, 1 below it, 2 when the output holds no result (or reports an error), the
file cannot be read or an option is not a number in range (one line on stderr).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from trainium_eks import files  # the image ships trainium_eks/cli.py and files.py with the training package
from trainium_eks.cli import OneLineParser, UsageError, one_line

GIB = 2**30
MAX_RESULTS_BYTES = 16 * 2**20  # nccom-test prints a line per message size: kilobytes
SIZE_COLUMN = "size(B)"
BUS_BANDWIDTH_COLUMN = "busbw(GB/s)"  # GiB/s
FAILURE_MARKERS = ("Failure running", "errors found")


class BenchmarkError(Exception):
    """nccom-test's output holds no usable result."""


@dataclass(frozen=True)
class Measurement:
    size_bytes: int
    bus_gib_per_s: float


def parse_results(text: str) -> list[Measurement]:
    """The rows of nccom-test's results table, read by the header's column names."""
    lines = text.splitlines()
    failure = next((line for line in lines if any(marker in line for marker in FAILURE_MARKERS)), None)
    if failure is not None:
        raise BenchmarkError(f"nccom-test reported a failure: {failure.strip()}")
    header_at = next((i for i, line in enumerate(lines) if {SIZE_COLUMN, BUS_BANDWIDTH_COLUMN} <= set(line.split())), None)
    if header_at is None:
        raise BenchmarkError(f"no results table (no header with {SIZE_COLUMN} and {BUS_BANDWIDTH_COLUMN})")
    header = lines[header_at].split()
    size_at, bus_at = header.index(SIZE_COLUMN), header.index(BUS_BANDWIDTH_COLUMN)
    rows = []
    for line in lines[header_at + 1 :]:
        fields = line.split()
        if len(fields) != len(header) or not fields[size_at].isdigit():
            continue  # the closing average, a blank line, anything that is not a row
        try:
            rows.append(Measurement(int(fields[size_at]), float(fields[bus_at])))
        except ValueError:
            raise BenchmarkError(f"unreadable bus bandwidth in row: {line.strip()}") from None
    if not rows:
        raise BenchmarkError("the results table has no rows")
    return rows


def gib_per_s(gigabits_per_s: float) -> float:
    return gigabits_per_s * 1e9 / 8 / GIB


@dataclass(frozen=True)
class Verdict:
    achieved: Measurement
    line_rate_gbps: float
    min_fraction: float

    @property
    def line_rate_gib_per_s(self) -> float:
        return gib_per_s(self.line_rate_gbps)

    @property
    def fraction(self) -> float:
        return self.achieved.bus_gib_per_s / self.line_rate_gib_per_s

    @property
    def passed(self) -> bool:
        return self.fraction >= self.min_fraction

    def report(self) -> str:
        return (
            f"achieved {self.achieved.bus_gib_per_s:.2f} GiB/s / line rate {self.line_rate_gib_per_s:.2f} GiB/s "
            f"({100 * self.fraction:.1f} %): all-reduce bus bandwidth at {self.achieved.size_bytes} bytes against "
            f"{self.line_rate_gbps:g} Gbps of EFA; floor {100 * self.min_fraction:.0f} %: " + ("pass" if self.passed else "FAIL")
        )


def judge(rows: list[Measurement], line_rate_gbps: float, min_fraction: float) -> Verdict:
    return Verdict(max(rows, key=lambda row: row.bus_gib_per_s), line_rate_gbps, min_fraction)


def positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number above 0")
    return value


def fraction(text: str) -> float:
    value = positive_number(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{text!r} is more than 1; give the floor as a fraction in (0, 1], e.g. 0.3")
    return value


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m training.bus_bandwidth_check", description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="?", type=Path, default=Path("/dev/stdin"), help="nccom-test's output (default: stdin)")
    p.add_argument("--line-rate-gbps", type=positive_number, required=True, help="EFA bandwidth of one node, in Gbps")
    p.add_argument("--min-fraction", type=fraction, required=True, help="the floor, as a fraction of the line rate")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        text = files.read_text(args.results, MAX_RESULTS_BYTES, "pass the output of nccom-test")
        verdict = judge(parse_results(text), args.line_rate_gbps, args.min_fraction)
    except (UsageError, files.UnreadableFile, BenchmarkError) as error:
        print(f"error: {one_line(str(error))}", file=sys.stderr)
        return 2
    print(verdict.report(), flush=True)
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
