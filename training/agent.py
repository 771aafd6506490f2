"""The training pods' entrypoint: torchrun, run in this process, whose exit status tells a drain from a crash.

    python -m training.agent <torchrun options> -m <training module> <its options>

Volcano restarts a job by the exit code of its failed pod's container (``jobs.job_building.platform_job.JOB_LIFECYCLE``), but
torchrun exits 1 both when it gives up after ``--max-restarts`` (``ChildFailedError``) and when SIGTERM stops it: the
agent turns the signal into ``SignalException`` (torch 2.14.1 ``torch/distributed/elastic/multiprocessing/api.py``
lines 65-86), shuts its workers down and re-raises it (``torch/distributed/launcher/api.py`` lines 394-400), and an
uncaught exception ends Python with status 1 (``torchrun`` is ``torch.distributed.run:main``, its entry point).
Here the signal ends the process with 128 + its number (143 for SIGTERM), as a container a signal ended reports
(129-255: Tencent Kubernetes Engine docs, "Use Exit Code to Identify Pod Exceptions"), so a drained pod's end is told
apart from a crash budget spent.
"""

from __future__ import annotations

import sys

from torch.distributed.elastic.multiprocessing import SignalException
from torch.distributed.run import main as torchrun

SIGNALLED_EXIT_BASE = 128


def main(argv: list[str] | None = None) -> int:
    """torchrun with ``argv`` (the command line's, by default); 0 when its workers succeeded, 128 + the signal that
    stopped it. Its other failures (the workers' crash budget spent, a closed rendezvous) propagate as torchrun's do."""
    try:
        torchrun(argv)
    except SignalException as stopped:
        status = SIGNALLED_EXIT_BASE + stopped.sigval
        print(f"torchrun stopped by {stopped.sigval.name}; exiting {status}", file=sys.stderr, flush=True)
        return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
