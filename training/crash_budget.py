"""A run's crash budget, kept where it outlives the pods: crashes in a row, counted on the shared volume.

Volcano restarts a training job whenever one of its pods fails (``jobs.job_building.platform_job.JOB_LIFECYCLE``): a
drained pod that exits 143, one killed when its grace period ran out (137), one whose node vanished (failed by the
pod garbage collector, no exit code). A crash restarts it too, so what ends a crash loop cannot be torchrun's
``--max-restarts``, which a new pod starts afresh. Each agent whose torchrun crashed marks the job version it ran
in the run's directory (``<run directory>/crashes/version-<V>``; the agents of one version mark the same file), and
the run has spent its budget once the versions up to the current one crashed ``budget + 1`` times in a row: a
version that a drain or a lost node ended breaks the row, as does one that trained to completion. The agent then
exits ``BUDGET_SPENT_EXIT_CODE``, on which the job's lifecycle ends the job (TerminateJob).
"""

from __future__ import annotations

import os
from pathlib import Path

BUDGET_ENV = "TRAINIUM_EKS_CRASH_BUDGET"  # job restarts after crashes in a row the run may take
RUN_DIRECTORY_ENV = "TRAINIUM_EKS_RUN_DIRECTORY"  # the run's directory on the shared volume
JOB_VERSION_ENV = "VOLCANO_JOB_VERSION"  # the pod's volcano.sh/job-version annotation (jobs.job_building.torchx_component)
CRASHES = "crashes"
# No other end of the agent exits 3: torchrun's failures end it with 1, a signal with 128 + its number, Python's
# command-line errors with 2.
BUDGET_SPENT_EXIT_CODE = 3
CRASHED_EXIT_CODE = 1


def crashes_in_a_row(directory: Path, version: int) -> int:
    """How many job versions up to ``version`` crashed in a row."""
    row = 0
    while version - row >= 0 and (directory / f"version-{version - row}").exists():
        row += 1
    return row


def record_crash(environment: dict[str, str] | None = None) -> int:
    """Mark this job version crashed; the exit status the agent ends with: ``BUDGET_SPENT_EXIT_CODE`` once the run
    has crashed more than its budget in a row, else ``CRASHED_EXIT_CODE`` (the job restarts). A pod built without a
    budget (an older launcher's) exits as torchrun did."""
    env = os.environ if environment is None else environment
    if BUDGET_ENV not in env or RUN_DIRECTORY_ENV not in env or JOB_VERSION_ENV not in env:
        return CRASHED_EXIT_CODE
    directory = Path(env[RUN_DIRECTORY_ENV]) / CRASHES
    directory.mkdir(parents=True, exist_ok=True)
    version = int(env[JOB_VERSION_ENV])
    (directory / f"version-{version}").touch()
    return BUDGET_SPENT_EXIT_CODE if crashes_in_a_row(directory, version) > int(env[BUDGET_ENV]) else CRASHED_EXIT_CODE
