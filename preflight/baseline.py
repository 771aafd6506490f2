"""The baseline of `preflight diff --against REF`: the stack evaluated with the program and stack file as committed
at a git ref, in a separate process on an extracted copy of that commit."""

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


def plan_at_ref(repo: Path, ref: str, stack: str) -> dict:
    """Evaluate ``stack`` with the program and stack file as they are at git ``ref``, in a separate process."""
    resolved = _git(repo, check_ref(ref), "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if resolved.returncode != 0:
        reason = _last_line(resolved.stderr, "no such commit")
        raise RefError(f"--against {ref}: not a stack file, nor a git ref of {repo} ({reason})")
    commit = resolved.stdout.decode().strip()
    archive = _git(repo, ref, "archive", "--format=tar", "--end-of-options", commit)
    if archive.returncode != 0:
        raise RefError(f"--against {ref}: git archive of {commit} failed ({_last_line(archive.stderr, 'no output')})")
    with tempfile.TemporaryDirectory(prefix="preflight-diff-") as tree:
        with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
            tar.extractall(tree, filter="data")
        # the stack file as committed, not a directory of stack files this process was pointed at
        environment = {k: v for k, v in os.environ.items() if k != stackfile.STACK_DIR_VARIABLE}
        result = subprocess.run(
            [sys.executable, "-m", "preflight", "plan", "--json", "--", stack],
            cwd=tree,
            env=environment,
            capture_output=True,
            text=True,
        )
    if result.returncode != 0:
        raise RefError(f"--against {ref}: evaluating {stack} there failed: {_last_line(result.stderr, 'no output')}")
    try:
        return json.loads(result.stdout)
    except ValueError:
        raise RefError(f"--against {ref}: evaluating {stack} there printed no plan; is it a version of this project?") from None
