"""Fixtures shared by the tests; the helpers they build on are in ``support.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
import support
from support import STACKS, cached_plan

from preflight import engine
from training.data import write_synthetic_shard
from training.options import BERT_TINY


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules marked ``minutes`` first, the rest in their order: `make test` has pytest-xdist hand out whole files
    in collection order (``--no-loadscope-reorder``; by default it sends the files with the most tests first, which
    leaves these few long tests to the end, one worker running them while the other is idle)."""
    items.sort(key=lambda item: item.get_closest_marker("minutes") is None)


@pytest.fixture(autouse=True)
def fresh_plans_under_monkeypatch(request):
    """A test that monkeypatches (a release table, a version) evaluates its stacks afresh and remembers none of them
    (``support.evaluate``): a plan remembered before the patch would not show it."""
    if "monkeypatch" not in request.fixturenames:
        yield
        return
    support.REMEMBER["plans"] = False
    try:
        yield
    finally:
        support.REMEMBER["plans"] = True


@pytest.fixture(params=STACKS)
def stack_plan(request) -> engine.Plan:
    """Each shipped stack, evaluated once per test session (plans are plain data)."""
    return cached_plan(request.param, False)


@pytest.fixture
def plans() -> dict[str, engine.Plan]:
    return {stack: cached_plan(stack, False) for stack in STACKS}


@pytest.fixture
def shards(tmp_path) -> Path:
    """A data directory of one synthetic shard the tiny BERT trains on: the real training script, small and fast."""
    directory = tmp_path / "data"
    directory.mkdir()
    write_synthetic_shard(directory / "shard.hdf5", samples=64, seq_len=32, vocab_size=BERT_TINY["vocab_size"], max_predictions=5)
    return directory
