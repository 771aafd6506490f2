"""The baseline of `preflight diff --against REF`: the stack evaluated with the program and stack file as committed
at a git ref, in a separate process on an extracted copy of that commit.

``start`` sets that process going and returns at once, so that the caller can evaluate the working tree's side
meanwhile (the two take about as long, and a machine with two cores runs them side by side); its ``plan`` waits."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from preflight import stackfile


class RefError(Exception):
    """A git ref that cannot be read; the message is one line."""


# What git refuses in a ref name (git check-ref-format), so that no such text reaches git. The revision
# suffixes ~N, ^N and @{...} stay allowed: `--against HEAD~1` is the common case.
REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f:?*\[\\]|\.\.")


def check_ref(ref: str) -> str:
    """``ref``, when git could read it as a revision and never as an option."""
    if ref.startswith("-"):
        why = "it starts with '-'"
    elif not ref or REF_FORBIDDEN.search(ref):
        why = "it is empty or has a space, control character, ':', '?', '*', '[', '\\' or '..'"
    else:
        return ref
    raise RefError(f"--against {ref!r}: not a stack file, nor a git ref ({why}); pass a stack file, branch, tag or commit")


def _git(repo: Path, ref: str, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    except OSError as error:
        raise RefError(f"--against {ref}: cannot run git ({error.strerror}); install git or pass a stack file") from None


def _last_line(output: bytes | str, default: str) -> str:
    text = output.decode(errors="replace") if isinstance(output, bytes) else output
    return (text.strip().splitlines() or [default])[-1]


class RefEvaluation:
    """``stack`` being evaluated at git ``ref`` in a separate process; ``plan`` waits for its plan. Leaving the
    ``with`` block stops the process if it still runs and removes the extracted commit."""

    def __init__(self, ref: str, stack: str, directory: tempfile.TemporaryDirectory, process: subprocess.Popen):
        self.ref, self.stack, self.directory, self.process = ref, stack, directory, process

    def plan(self) -> dict:
        """The plan as `plan --json` prints it at the ref."""
        self.process.wait()
        # The output goes to files, not pipes: a pipe the caller does not read while it evaluates its own side
        # would stop the process at its first 64 KiB of JSON.
        output = Path(self.directory.name)
        if self.process.returncode != 0:
            stderr = (output / "stderr").read_text(errors="replace")
            raise RefError(f"--against {self.ref}: evaluating {self.stack} there failed: {_last_line(stderr, 'no output')}")
        try:
            return json.loads((output / "stdout").read_text())
        except ValueError:
            raise RefError(
                f"--against {self.ref}: evaluating {self.stack} there printed no plan; is it a version of this project?"
            ) from None

    def __enter__(self) -> RefEvaluation:
        return self

    def __exit__(self, *exc_info) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.directory.cleanup()


def start(repo: Path, ref: str, stack: str) -> RefEvaluation:
    """Start evaluating ``stack`` with the program and stack file as they are at git ``ref``; a ref that names no
    commit fails here, an evaluation that fails at the ref in ``plan``."""
    resolved = _git(repo, check_ref(ref), "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if resolved.returncode != 0:
        reason = _last_line(resolved.stderr, "no such commit")
        raise RefError(f"--against {ref}: not a stack file, nor a git ref of {repo} ({reason})")
    commit = resolved.stdout.decode().strip()
    archive = _git(repo, ref, "archive", "--format=tar", "--end-of-options", commit)
    if archive.returncode != 0:
        raise RefError(f"--against {ref}: git archive of {commit} failed ({_last_line(archive.stderr, 'no output')})")
    directory = tempfile.TemporaryDirectory(prefix="preflight-diff-")
    try:
        output, tree = Path(directory.name), Path(directory.name) / "tree"
        with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
            tar.extractall(tree, filter="data")
        # the stack file as committed, not a directory of stack files this process was pointed at
        environment = {k: v for k, v in os.environ.items() if k != stackfile.STACK_DIR_VARIABLE}
        with open(output / "stdout", "wb") as stdout, open(output / "stderr", "wb") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "preflight", "plan", "--json", "--", stack],
                cwd=tree,
                env=environment,
                stdout=stdout,
                stderr=stderr,
            )
    except BaseException:
        directory.cleanup()
        raise
    return RefEvaluation(ref, stack, directory, process)
