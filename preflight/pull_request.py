"""The pull-request gate: one change report for every stack a pull request touches, and the check's verdict.

    python -m preflight.pull_request --base COMMIT [--label NAME]... [--output FILE]

It compares the working tree (in CI, the pull request's merge commit) with ``--base`` (the pull request's base
commit), runs ``python -m preflight diff STACK --against BASE`` for each stack the change touches, prints the whole
report (markdown) and writes the comment body, the same report bounded to what GitHub takes, to ``--output``.

Which stacks a change touches, from the repository's layout:

- ``<stackConfigDir>/Pulumi.<s>.yaml`` (Pulumi.yaml's stackConfigDir) and ``policies/config/<s>.json`` (the policy
  config the workflows pass to each pack for stack ``s``) touch ``s``;
- the program touches every stack: Pulumi.yaml, requirements.txt and constraints.txt (the runtime the Pulumi CLI
  installs, with its pins), ``__main__.py``, each policy pack's directory (a directory with a PulumiPolicy.yaml),
  and every top-level package of the repository that the program's or a pack's ``__main__.py`` imports, directly
  or through other such packages (today components/, trainium_eks/ and policies/);
- anything else (docs, tests, jobs/, training/, the engine in preflight/) touches none.

Exit status: 0 the check passes; 1 it fails: a stack is REFUSED BY EKS, loses data (DATA LOSS) without the
``data-loss-approved`` label, or cannot be evaluated; 2 bad input (one line on stderr).
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from preflight import baseline, stackfile
from trainium_eks.cli import OneLineParser, UsageError, one_line

MARKER = "<!-- trainium-eks change report -->"  # the workflow finds its own comment by this line
APPROVAL_LABEL = "data-loss-approved"
DATA_LOSS, REFUSED = 3, 4  # `preflight diff`'s exit statuses (preflight/cli.py)
REFUSED_LINE = "REFUSED BY EKS"  # diff reports DATA LOSS first (exit 3) when a change also has a refusal
# GitHub refuses a longer comment: "body is too long (maximum is 65536 characters)" (REST API, danger/danger#424).
COMMENT_LIMIT = 65_536
SHOWN_PATHS = 3  # changed files named per stack in the summary table
PROGRAM_FILES = ("Pulumi.yaml", "requirements.txt", "constraints.txt", "__main__.py")
PACK_FILE = "PulumiPolicy.yaml"
POLICY_CONFIG_DIR = "policies/config/"


class Request(BaseModel):
    """The command line, parsed."""

    model_config = ConfigDict(frozen=True)
    base: str
    labels: tuple[Annotated[str, StringConstraints(min_length=1, pattern=r"^[^\x00-\x1f\x7f]+$")], ...]
    output: Path | None

    @property
    def data_loss_approved(self) -> bool:
        return APPROVAL_LABEL in self.labels


@dataclass(frozen=True)
class StackReport:
    stack: str
    verdict: str  # applies, DATA LOSS, REFUSED BY EKS, new, removed, or why it could not be evaluated
    passes: bool
    paths: tuple[str, ...]  # the changed files that touch it
    body: str  # its section of the report, heading included: the diff's markdown, or what stands in for it

    @property
    def heading(self) -> str:
        return f"### {self.stack}: {self.verdict}"

    def section(self, summary_only: bool) -> str:
        if summary_only:
            return f"{self.heading}\n\nThe full report is in this run's job summary (too long for one comment)."
        return self.body


def _git(root: Path, *args: str) -> str:
    result = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"git {args[0]} failed in {root} ({reason}); run in a git checkout with the base's history")
    return result.stdout


def resolve_base(root: Path, base: str) -> str:
    baseline.check_ref(base)
    result = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", "--end-of-options", f"{base}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise UsageError(f"--base {base!r}: no such commit here; fetch the history (actions/checkout fetch-depth: 0)")
    return result.stdout.strip()


def _local_imports(root: Path, entries: list[Path]) -> set[str]:
    """The repository's top-level packages the ``entries`` import, directly or through each other."""
    found: set[str] = set()
    pending = list(entries)
    while pending:
        try:
            tree = ast.parse(pending.pop().read_bytes())
        except (SyntaxError, ValueError):  # a module that cannot be read: its diff says so, its imports stay unknown
            continue
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for top in {name.split(".")[0] for name in names} - found:
                if (root / top / "__init__.py").is_file():
                    found.add(top)
                    pending += sorted((root / top).rglob("*.py"))
    return found


def program_prefixes(root: Path) -> tuple[str, ...]:
    """The files, and the directories (ending in /), whose change touches every stack."""
    packs = [PurePosixPath(p).parent for p in _git(root, "ls-files", "--", f"*{PACK_FILE}").splitlines()]
    entries = [root / "__main__.py", *(root / pack / "__main__.py" for pack in packs)]
    packages = _local_imports(root, [entry for entry in entries if entry.is_file()])
    return (*PROGRAM_FILES, *(f"{pack}/" for pack in packs), *sorted(f"{package}/" for package in packages))


def touched_stacks(root: Path, paths: list[str], stacks: set[str]) -> dict[str, tuple[str, ...]]:
    """Each stack the changed ``paths`` touch, with the paths that touch it."""
    stack_dir = PurePosixPath(stackfile.read_project(root).stack_config_dir).as_posix()
    stack_file = re.compile(rf"{re.escape('' if stack_dir == '.' else stack_dir + '/')}Pulumi\.(?P<stack>[^/]+)\.yaml")
    policy_config = re.compile(rf"{re.escape(POLICY_CONFIG_DIR)}(?P<stack>[^/]+)\.json")
    everywhere = program_prefixes(root)
    touched: dict[str, list[str]] = {}
    for path in paths:
        if match := stack_file.fullmatch(path) or policy_config.fullmatch(path):
            names = {match["stack"]} & stacks
        elif any(path == prefix or (prefix.endswith("/") and path.startswith(prefix)) for prefix in everywhere):
            names = stacks
        else:
            continue
        for name in names:
            touched.setdefault(name, []).append(path)
    return {name: tuple(touched[name]) for name in sorted(touched)}


def _stack_names(root: Path, commit: str | None) -> set[str]:
    """The stacks with a settings file in the working tree (``commit`` None) or at ``commit``."""
    stack_dir = root / stackfile.read_project(root).stack_config_dir
    if commit is None:
        return {p.name[len("Pulumi.") : -len(".yaml")] for p in stack_dir.glob("Pulumi.*.yaml")}
    listed = _git(root, "ls-tree", "--name-only", commit, "--", f"{stack_dir.relative_to(root).as_posix()}/")
    names = [PurePosixPath(path).name for path in listed.splitlines()]
    return {name[len("Pulumi.") : -len(".yaml")] for name in names if name.startswith("Pulumi.") and name.endswith(".yaml")}


def diff_stack(root: Path, stack: str, base: str, paths: tuple[str, ...], approved: bool) -> StackReport:
    """``preflight diff --format markdown`` of one stack against ``base``, run as the command it is, and its verdict
    for the gate."""
    environment = {k: v for k, v in os.environ.items() if k != stackfile.STACK_DIR_VARIABLE}
    result = subprocess.run(
        [sys.executable, "-m", "preflight", "diff", "--against", base, "--format", "markdown", "--", stack],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
    )
    refused = result.returncode == REFUSED or (result.returncode == DATA_LOSS and REFUSED_LINE in result.stdout)
    if result.returncode == 0:
        verdict = "applies"
    elif result.returncode in (DATA_LOSS, REFUSED):
        approval = "approved by the" if approved else "not approved: no"
        loss = f"DATA LOSS ({approval} `{APPROVAL_LABEL}` label)" if result.returncode == DATA_LOSS else ""
        verdict = " and ".join(part for part in (loss, REFUSED_LINE if refused else "") if part)
    else:
        error = one_line((result.stderr.strip().splitlines() or ["no output"])[-1])
        return stand_in(stack, f"cannot be evaluated (exit {result.returncode})", False, paths, f"`{error}`")
    passes = not refused and (result.returncode != DATA_LOSS or approved)
    return StackReport(stack, verdict, passes, paths, result.stdout.strip())  # the report has its own heading


def stand_in(stack: str, verdict: str, passes: bool, paths: tuple[str, ...], text: str) -> StackReport:
    """The report of a stack with no diff to show: under its heading, why."""
    report = StackReport(stack, verdict, passes, paths, "")
    return dataclasses.replace(report, body=f"{report.heading}\n\n{text}")


def stack_reports(root: Path, base: str, approved: bool) -> tuple[list[StackReport], int]:
    """The report of each stack the change from ``base`` to the working tree touches, and how many files changed."""
    paths = _git(root, "diff", "--name-only", "--no-renames", "-z", base, "--").split("\0")
    paths = [path for path in paths if path]
    current, before = _stack_names(root, None), _stack_names(root, base)
    reports = []
    for stack, touching in touched_stacks(root, paths, current | before).items():
        if stack not in current:
            text = "Its stack file is removed: nothing to evaluate. Its resources stay until `pulumi destroy` of it."
            reports.append(stand_in(stack, "removed", True, touching, text))
        elif stack not in before:
            text = f"No baseline: `python -m preflight plan {stack}` lists what its first `pulumi up` creates."
            reports.append(stand_in(stack, "new", True, touching, text))
        else:
            reports.append(diff_stack(root, stack, base, touching, approved))
    return reports, len(paths)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(base: str, reports: list[StackReport], changed_files: int, *, summary_only: bool = False) -> str:
    """The report as markdown; ``summary_only``: each stack's diff replaced by a pointer to the job summary."""
    failing = [r for r in reports if not r.passes]
    if failing:
        gate = "**The check fails**: " + "; ".join(f"{r.stack}: {r.verdict}" for r in failing) + "."
    else:
        gate = "**The check passes.**"
    lines = [MARKER, "## trainium-eks change report", "", f"{gate} Against base `{base[:12]}`.", ""]
    if not reports:
        lines.append(
            f"No stack touched: the {changed_files} changed files are outside the program, the policy packs, their "
            "configs and the stack files."
        )
        return "\n".join(lines) + "\n"
    lines += ["| Stack | Verdict | Changed files that touch it |", "|---|---|---|"]
    for r in reports:
        shown = ", ".join(f"`{_cell(path)}`" for path in r.paths[:SHOWN_PATHS])
        more = f" and {len(r.paths) - SHOWN_PATHS} more" if len(r.paths) > SHOWN_PATHS else ""
        lines.append(f"| {r.stack} | {_cell(r.verdict)} | {shown}{more} |")
    if any("DATA LOSS" in r.verdict for r in reports):
        lines += ["", f"DATA LOSS passes the check only with the `{APPROVAL_LABEL}` label, which a maintainer adds."]
    for r in reports:
        lines += ["", r.section(summary_only)]
    return "\n".join(lines) + "\n"


def comment(full_report: str, base: str, reports: list[StackReport], changed_files: int) -> str:
    """The one pull-request comment: the whole report when GitHub takes it, else its summary."""
    return full_report if len(full_report) <= COMMENT_LIMIT else markdown(base, reports, changed_files, summary_only=True)


def parse(argv: list[str] | None) -> Request:
    parser = OneLineParser(prog="python -m preflight.pull_request", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the pull request's base commit")
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        dest="labels",
        help=f"a label of the pull request; {APPROVAL_LABEL} lets DATA LOSS pass",
    )
    parser.add_argument("--output", type=Path, help="write the comment body (bounded to what GitHub takes) here")
    args = parser.parse_args(argv)
    try:
        return Request(base=args.base, labels=tuple(args.labels), output=args.output)
    except ValidationError:
        raise UsageError("--label: a label is a non-empty name without control characters; pass it as GitHub shows it") from None


def main(argv: list[str] | None = None) -> int:
    root = stackfile.REPO_ROOT
    try:
        request = parse(argv)
        base = resolve_base(root, request.base)
        reports, changed_files = stack_reports(root, base, request.data_loss_approved)
    except (UsageError, baseline.RefError, stackfile.StackFileError) as error:
        print(f"error: {one_line(str(error))}", file=sys.stderr)
        return 2
    full_report = markdown(base, reports, changed_files)
    print(full_report, end="")
    if request.output is not None:
        try:
            request.output.write_text(comment(full_report, base, reports, changed_files))
        except OSError as error:
            print(f"error: --output {request.output}: {error.strerror}; pass a writable path", file=sys.stderr)
            return 2
    return 0 if all(r.passes for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
