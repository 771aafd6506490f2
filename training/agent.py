"""The training pods' entrypoint: torchrun, run in this process, whose exit status tells a drain from a crash.

    python -m training.agent <torchrun options> -m <training module> <its options>

Volcano restarts a job by the exit code of its failed pod's container (``jobs.job_building.platform_job.JOB_LIFECYCLE``), but
torchrun exits 1 both when it gives up after ``--max-restarts`` (``ChildFailedError``) and when SIGTERM stops it: the
agent turns the signal into ``SignalException`` (torch 2.14.1 ``torch/distributed/elastic/multiprocessing/api.py``
lines 65-86), shuts its workers down and re-raises it (``torch/distributed/launcher/api.py`` lines 394-400), and an
uncaught exception ends Python with status 1 (``torchrun`` is ``torch.distributed.run:main``, its entry point).
Here the signal ends the process with 128 + its number (143 for SIGTERM), as a container a signal ended reports
(129-255: Tencent Kubernetes Engine docs, "Use Exit Code to Identify Pod Exceptions"), so a drained pod's end is told
apart from a crash. A crash (torchrun gave up after its ``--max-restarts``, or could not start) is counted in the
run's directory, and the agent exits 1, on which Volcano restarts the job, or, once the run has crashed past its
budget in a row, 3, on which the job ends (``training.crash_budget``).
"""

from __future__ import annotations

import sys

from torch.distributed.elastic.multiprocessing import SignalException
from torch.distributed.run import main as torchrun

from training import crash_budget

SIGNALLED_EXIT_BASE = 128


def main(argv: list[str] | None = None) -> int:
    """torchrun with ``argv`` (the command line's, by default); 0 when its workers succeeded, 128 + the signal that
    stopped it, and after a crash the crash budget's verdict (``training.crash_budget.record_crash``)."""
    try:
        torchrun(argv)
    except SignalException as stopped:
        status = SIGNALLED_EXIT_BASE + stopped.sigval
        print(f"torchrun stopped by {stopped.sigval.name}; exiting {status}", file=sys.stderr, flush=True)
        return status
    except SystemExit as ended:  # torchrun's own command-line errors
        if ended.code in (0, None):
            return 0
        return _crashed(f"torchrun exited {ended.code}")
    except Exception as failure:  # noqa: BLE001  whatever ended torchrun but a signal is a crash of this run
        return _crashed(f"torchrun failed: {type(failure).__name__}: {failure}")
    return 0


def _crashed(why: str) -> int:
    status = crash_budget.record_crash()
    spent = "; the run's crash budget is spent" if status == crash_budget.BUDGET_SPENT_EXIT_CODE else ""
    print(f"{why}{spent}; exiting {status}", file=sys.stderr, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
