"""The job tools' one error: bad input to a command, worded as one line naming the option and the fix, which each
command's ``report_bad_input`` prints with exit status 2 (``jobs.cluster_access.outputs``)."""

from __future__ import annotations


class LaunchError(Exception):
    """Bad input to the launcher, the rehearsal or the acceptance checks; the message is one line naming the option
    and the fix."""
