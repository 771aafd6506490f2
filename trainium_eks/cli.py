"""Command lines of the platform's tools: a usage error is one line (never argparse's usage block), exit 2."""

from __future__ import annotations

import argparse

MAX_SHOWN = 300  # characters of a message: a long value is cut, not wrapped


def one_line(message: str) -> str:
    """``message`` as one printable line: control and line-break characters are shown escaped, and it is cut."""
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in message)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def description(doc: str) -> str:
    """A tool's ``--help`` description: its module docstring's first paragraph, whole (its first line alone would
    stop mid-sentence where the paragraph wraps)."""
    paragraph = doc.strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in paragraph.splitlines()).replace("`", "")  # reST quoting, not help text


class UsageError(Exception):
    """A command line the tool cannot run; the message is one line naming the option and the fix."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage block and exit itself
        raise UsageError(f"{self.prog}: {message} (see --help)")
