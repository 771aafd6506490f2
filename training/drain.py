"""Drains that lose no step: on SIGTERM a worker finishes its optimizer step, every worker agrees to stop after that
same step, rank 0 writes its checkpoint and all exit 0.

Where SIGTERM comes from: the kubelet sends it to a terminating container's PID 1, which in a training pod is
``torchrun``. The agent turns it into ``SignalException`` (torch 2.14.1: ``torch/distributed/elastic/multiprocessing/
api.py`` lines 76-86, registered at 536-547 for TORCHELASTIC_SIGNALS_TO_HANDLE, default "SIGTERM,SIGINT,SIGHUP,
SIGQUIT") and shuts its workers down (``elastic/agent/server/api.py`` 752-756, ``local_elastic_agent.py`` 527-537):
``SubprocessContext._close`` (``multiprocessing/api.py`` 1023-1053) sends each worker the same SIGTERM, waits up to
the agent's shutdown timeout for them, then SIGKILLs the rest. That timeout is ``--shutdown-timeout`` or
TORCH_ELASTIC_SHUTDOWN_TIMEOUT, 30 s by default (``launcher/api.py`` 148-152): a drain longer than that needs the
launcher to raise it with the pod's grace period (``jobs.job_building.grace_period``). The agent then re-raises the signal and
exits non-zero without closing the rendezvous (``launcher/api.py`` 391-397); the restarted job meets under its new
run id.

Why the workers agree: a drained node's workers get SIGTERM, the others' do not (and those that do get it at slightly
different moments). Each step ends with one tiny all-reduce of "was I signalled?", so every worker stops after the
same step, the first step at whose end any of them had been signalled.
"""

from __future__ import annotations

import signal
from collections.abc import Callable


class Drain:
    """SIGTERM, remembered until the end of the current step (while in a ``with`` block; the previous handler after)."""

    def __init__(self) -> None:
        self.signalled = False
        self._previous = None

    def __enter__(self) -> Drain:
        self._previous = signal.signal(signal.SIGTERM, self._signalled)
        return self

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGTERM, self._previous)

    def _signalled(self, signum, frame) -> None:
        self.signalled = True

    def agreed(self, agree: Callable[[bool], bool]) -> bool:
        """Whether every worker stops after this step: ``agree`` tells whether any worker was signalled (a
        collective: every worker calls it once per step)."""
        return agree(self.signalled)
