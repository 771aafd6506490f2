"""The baseline at a git ref as it runs beside the caller (preflight/baseline.py ``start``): what it leaves behind when
the caller stops early, and where each failure surfaces. What it evaluates is tests/test_diff.py's."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from preflight import baseline, stackfile

ROOT = stackfile.REPO_ROOT


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """The directory the extracted commits go to."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_leaving_early_stops_the_evaluation_and_removes_the_commit(scratch):
    with baseline.start(ROOT, "HEAD", "dev") as evaluation:
        assert (Path(evaluation.directory.name) / "tree" / "__main__.py").is_file()
    assert evaluation.process.returncode is not None
    assert not any(scratch.iterdir())


def test_a_ref_that_names_no_commit_fails_before_anything_runs(scratch):
    with pytest.raises(baseline.RefError, match="not a stack file, nor a git ref"):
        baseline.start(ROOT, "no-such-ref-anywhere", "dev")
    assert not any(scratch.iterdir())


def test_an_evaluation_that_fails_at_the_ref_fails_when_its_plan_is_read(scratch):
    failed = r"^--against HEAD: evaluating no-such-stack there failed: .*no-such-stack"
    with baseline.start(ROOT, "HEAD", "no-such-stack") as evaluation, pytest.raises(baseline.RefError, match=failed):
        evaluation.plan()
    assert not any(scratch.iterdir())
