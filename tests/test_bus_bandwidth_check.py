"""The line-rate acceptance check: nccom-test's results table read by its column names, GiB/s against Gbps.

The samples below are constructed by hand in the format the NCCOM-TEST User Guide documents (aws-neuron-sdk
tools/neuron-sys-tools/nccom-test.rst): its multi-instance all-reduce example with the ``time(us)`` column of older
releases, the ``time:avg(us)`` column and optional ``algorithm`` column of current ones, and its failure output.
The figures are invented; only the layout follows the guide.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from preflight.stackfile import REPO_ROOT
from training import bus_bandwidth_check as check

CURRENT = """\
    size(B)    count(elems)    type    time:avg(us)    algbw(GB/s)    busbw(GB/s)    algorithm
   67108864        16777216    fp32         1850.42          33.78          66.50    kangaring
  134217728        33554432    fp32         3402.10          36.74          72.34    kangaring
  268435456        67108864    fp32         6580.77          37.99          74.80    kangaring
  536870912       134217728    fp32        13108.35          38.14          75.10    kangaring
 1073741824       268435456    fp32        26250.03          38.10          75.01    kangaring
Avg bus bandwidth:\t72.7500GB/s
"""
OLDER = """\
       size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)
      67108864        16777216    fp32        3963          15.77          31.05
     536870912       134217728    fp32       21803          22.93          45.15
    1073741824       268435456    fp32       41806          23.92          47.09
Avg bus bandwidth:      41.0967GB/s
"""
FAILED = """\
     size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)
    33554432    Failure running neuron-bench - log file /tmp/nccom_test_log_7pqpdfjf.log
1 errors found - test failed
"""
LINE_RATE_GBPS = 800.0  # trn1.32xlarge's EFA bandwidth


def test_rows_are_read_by_column_name_whatever_the_columns():
    current = check.parse_results(CURRENT)
    assert [row.size_bytes for row in current] == [2**26, 2**27, 2**28, 2**29, 2**30]
    assert current[-1].bus_gib_per_s == 75.01  # busbw, not algbw, and the algorithm column does not shift it
    assert [row.bus_gib_per_s for row in check.parse_results(OLDER)] == [31.05, 45.15, 47.09]


@pytest.mark.parametrize(("gbps", "gib_per_s"), [(800, 93.1323), (1600, 186.2645)])
def test_the_line_rate_is_converted_from_gigabits_to_gibibytes(gbps, gib_per_s):
    # Worked by hand: 800 Gbps = 800e9 bits/s = 100e9 bytes/s, and a GiB is 2**30 = 1,073,741,824 bytes, so
    # 100e9 / 1,073,741,824 = 93.1323 GiB/s (the README's line rate); 1,600 Gbps is twice that.
    assert check.gib_per_s(gbps) == pytest.approx(gib_per_s, abs=1e-4)


def test_the_peak_over_message_sizes_is_judged_not_the_average():
    verdict = check.judge(check.parse_results(CURRENT), LINE_RATE_GBPS, 0.3)
    assert verdict.achieved.size_bytes == 2**29 and verdict.achieved.bus_gib_per_s == 75.10
    assert verdict.fraction == pytest.approx(75.10 / check.gib_per_s(LINE_RATE_GBPS))


@pytest.mark.parametrize(("floor", "passed"), [(0.5, True), (0.506, False)])
def test_the_verdict_turns_at_the_floor(floor, passed):
    # 47.09 GiB/s is 50.56 % of 800 Gbps.
    verdict = check.judge(check.parse_results(OLDER), LINE_RATE_GBPS, floor)
    assert verdict.passed is passed
    assert verdict.report().endswith("pass" if passed else "FAIL")


def test_the_report_names_achieved_and_line_rate_in_one_unit():
    report = check.judge(check.parse_results(OLDER), LINE_RATE_GBPS, 0.3).report()
    assert report.startswith("achieved 47.09 GiB/s / line rate 93.13 GiB/s (50.6 %)"), report
    assert "800 Gbps" in report


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (FAILED, "Failure running neuron-bench"),
        ("Neuron DKMS Driver is not running!\n", "no results table"),
        (OLDER.splitlines()[0] + "\nAvg bus bandwidth:      0.0000GB/s\n", "no rows"),
        (OLDER.replace("47.09", "n/a"), "unreadable bus bandwidth"),
    ],
)
def test_output_without_a_result_is_an_error(text, words):
    with pytest.raises(check.BenchmarkError, match=words):
        check.parse_results(text)


def test_the_command_exits_by_the_verdict(tmp_path, capsys):
    results = tmp_path / "nccom-test.txt"
    results.write_text(OLDER)
    assert check.main([str(results), "--line-rate-gbps", "800", "--min-fraction", "0.3"]) == 0
    assert "achieved 47.09 GiB/s" in capsys.readouterr().out
    assert check.main([str(results), "--line-rate-gbps", "1600", "--min-fraction", "0.3"]) == 1  # 25.3 % of 1600
    results.write_text(FAILED)
    assert check.main([str(results), "--line-rate-gbps", "800", "--min-fraction", "0.3"]) == 2
    assert "error: nccom-test reported a failure" in capsys.readouterr().err


def run_check(*args, stdin=b""):
    return subprocess.run(
        [sys.executable, "-m", "training.bus_bandwidth_check", *args],
        cwd=REPO_ROOT,
        input=stdin,
        capture_output=True,
        timeout=60,
    )


def test_results_on_standard_input_are_judged():
    result = run_check("--line-rate-gbps", "800", "--min-fraction", "0.3", stdin=OLDER.encode())
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().startswith("achieved 47.09 GiB/s")


@pytest.mark.parametrize(
    ("results", "options", "words"),
    [
        ("missing", ("800", "0.3"), "not found"),
        ("latin1", ("800", "0.3"), "not UTF-8 text"),
        ("directory", ("800", "0.3"), "is a directory"),
        ("good", ("0", "0.3"), "--line-rate-gbps: '0' is not a finite number above 0"),
        ("good", ("-800", "0.3"), "--line-rate-gbps: '-800' is not a finite number above 0"),
        ("good", ("inf", "0.3"), "--line-rate-gbps: 'inf' is not a finite number"),
        ("good", ("fast", "0.3"), "--line-rate-gbps: 'fast' is not a finite number"),
        ("good", ("800", "nan"), "--min-fraction: 'nan' is not a finite number"),
        ("good", ("800", "0"), "--min-fraction: '0' is not a finite number above 0"),
        ("good", ("800", "-0.3"), "--min-fraction: '-0.3' is not a finite number above 0"),
        ("good", ("800", "30"), "--min-fraction: '30' is more than 1"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, results, options, words):
    path = tmp_path / results
    if results == "latin1":
        path.write_bytes(OLDER.replace("busbw(GB/s)", "busbw(GB/s) d\xe9bit").encode("latin-1"))
    elif results == "directory":
        path.mkdir()
    elif results == "good":
        path.write_text(OLDER)
    line_rate, floor = options
    result = run_check(str(path), "--line-rate-gbps", line_rate, "--min-fraction", floor)
    stderr = result.stderr.decode()
    assert result.returncode == 2, (result.stdout, stderr)
    assert stderr.count("\n") == 1 and words in stderr and "Traceback" not in stderr, stderr
    assert result.stdout == b""


def test_the_image_ships_every_platform_module_the_training_package_imports():
    imported = set()
    for source in (REPO_ROOT / "training").glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "trainium_eks":
                modules = [node.module] if node.module != "trainium_eks" else [f"trainium_eks.{a.name}" for a in node.names]
                imported.update(modules)
    assert "trainium_eks.cli" in imported  # the check's one-line usage errors
    copied = {
        path.removesuffix(".py").replace("/", ".")
        for line in (REPO_ROOT / "training" / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ") and "trainium_eks/" in line
        for path in line.split()[1:-1]
    }
    allowed = {line[1:] for line in (REPO_ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    for module in imported:
        path = module.replace(".", "/") + ".py"
        assert module in copied and path in allowed, f"{module} is imported by training/ but not in the image"
    assert "trainium_eks.__init__" in copied and "trainium_eks/__init__.py" in allowed


# training.collective_bandwidth: the same judgement of a bus bandwidth torch.distributed measures itself, run here for
# real on two processes and gloo (on a trn2 group: 128 ranks on the neuron backend, jobs.acceptance collective-bandwidth).
SMALL_SIZES = ("--min-bytes", str(2**20), "--max-bytes", str(2**22), "--iterations", "3", "--warmup", "1")


def torchrun_bandwidth(*args):
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
        + ["-m", "training.collective_bandwidth", "--device", "cpu", *SMALL_SIZES, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_all_reduce_bus_bandwidth_of_two_processes_is_measured_and_judged():
    # A line rate far below what loopback carries passes; one far above fails. The figures are measured, not given.
    slow = torchrun_bandwidth("--line-rate-gbps", "0.001", "--min-fraction", "0.5")
    assert slow.returncode == 0, slow.stderr
    lines = slow.stdout.splitlines()
    assert "all-reduce across 2 workers: 3.0 == 3.0" in lines  # the sum is checked before anything is timed
    rows = [line for line in lines if " bytes: bus bandwidth " in line]
    assert [int(row.split()[0]) for row in rows] == [2**20, 2**21, 2**22]
    (verdict,) = [line for line in lines if line.startswith("torch.distributed all_reduce, 2 ranks on gloo: achieved ")]
    assert verdict.endswith("floor 50 %: pass") and "0.001 Gbps of EFA" in verdict
    fast = torchrun_bandwidth("--line-rate-gbps", "1e9", "--min-fraction", "1")
    assert fast.returncode != 0 and fast.stdout.rstrip().endswith(": FAIL"), (fast.stdout, fast.stderr)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--device", "neuron"), "--device neuron needs TorchNeuron"),
        (("--device", "xla"), "argument --device: invalid choice: 'xla'"),  # its collectives cannot be timed call by call
        (("--min-bytes", "4096", "--max-bytes", "1024"), "--min-bytes 4096: more than --max-bytes 1024"),
        (("--min-bytes", "1023"), "'1023' is not a whole number of bytes, a multiple of 4"),
        (("--iterations", "0"), "--iterations: '0' is not a whole number of 1 or more"),
    ],
)
def test_the_collective_check_refuses_bad_options_in_one_line(args, words, capsys):
    from training import collective_bandwidth

    assert collective_bandwidth.main(["--line-rate-gbps", "800", "--min-fraction", "0.3", *args]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and words in captured.err, captured.err
    assert captured.out == ""
