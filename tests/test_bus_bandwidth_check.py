"""The line-rate acceptance check: nccom-test's results table read by its column names, GiB/s against Gbps.

The samples below are constructed by hand in the format the NCCOM-TEST User Guide documents (aws-neuron-sdk
tools/neuron-sys-tools/nccom-test.rst): its multi-instance all-reduce example with the ``time(us)`` column of older
releases, the ``time:avg(us)`` column and optional ``algorithm`` column of current ones, and its failure output.
The figures are invented; only the layout follows the guide.
"""

from __future__ import annotations

import pytest

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


def test_the_line_rate_is_converted_from_gigabits_to_gibibytes_exactly():
    assert check.gib_per_s(LINE_RATE_GBPS) * check.GIB * 8 == pytest.approx(LINE_RATE_GBPS * 1e9)
    assert check.gib_per_s(LINE_RATE_GBPS) < LINE_RATE_GBPS / 8  # a GiB is more than a GB


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
