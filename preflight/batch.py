"""Check several stacks at once: the provider SDKs are imported once, then each stack is evaluated and checked
in a worker process forked from that warm interpreter (the Pulumi runtime is process-global state, so stacks
cannot share one process concurrently)."""

from __future__ import annotations

import gc
import multiprocessing
import threading
from pathlib import Path

import pulumi

from preflight import check, engine, stackfile

ONE_LINE_ERRORS = (stackfile.StackFileError, check.PolicyConfigError, pulumi.RunError)


class StackError(Exception):
    """A stack of the batch failed with a config error; the message is its one line."""


def check_stack(stack: str, stack_file: Path | None = None, preview: bool = False) -> tuple[dict, check.CheckResult]:
    plan = engine.evaluate(stackfile.load(stack, stack_file), preview=preview).to_json()
    return plan, check.check_plan(plan, check.load_policy_config(stack), f"policies/config/{stack}.json")


def _worker(job: tuple[str, Path | None, bool]):
    try:
        return check_stack(*job)
    except ONE_LINE_ERRORS as error:  # exceptions with custom constructors do not survive pickling
        return StackError(str(error).splitlines()[0])


def check_stacks(stacks: list[str], stack_file: Path | None, preview: bool) -> list[tuple[dict, check.CheckResult]]:
    jobs = [(stack, stack_file, preview) for stack in stacks]
    # Forking is only safe while this process has no other thread (an evaluation leaves the SDK's behind).
    if len(jobs) == 1 or threading.active_count() > 1 or "fork" not in multiprocessing.get_all_start_methods():
        outcomes = [_worker(job) for job in jobs]
    else:
        engine.preload()
        stackfile.read_project()  # parsed once here, for every worker
        gc.freeze()  # workers then neither scan nor copy-on-write the inherited SDK objects when they collect
        # A worker evaluates one stack and exits: it runs without the collector (an evaluation still collects once,
        # at its end: engine.py).
        with multiprocessing.get_context("fork").Pool(len(jobs), initializer=gc.disable) as pool:
            outcomes = pool.map(_worker, jobs)
    for outcome in outcomes:
        if isinstance(outcome, StackError):
            raise outcome
    return outcomes
