"""Command lines of the platform's tools: a usage error is one line (never argparse's usage block), exit 2."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """A command line the tool cannot run; the message is one line naming the option and the fix."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage block and exit itself
        raise UsageError(f"{self.prog}: {message} (see --help)")
