"""Fixtures shared by the tests; the helpers they build on are in ``support.py``."""

from __future__ import annotations

import pytest
from support import STACKS, cached_plan

from preflight import engine


@pytest.fixture(params=STACKS)
def stack_plan(request) -> engine.Plan:
    """Each shipped stack, evaluated once per test session (plans are plain data)."""
    return cached_plan(request.param, False)


@pytest.fixture
def plans() -> dict[str, engine.Plan]:
    return {stack: cached_plan(stack, False) for stack in STACKS}
