"""The deploy path's reachability rule, checked over the repository's own files: every workflow job that runs
`pulumi preview` or `pulumi up` of a stack must run where that stack's Kubernetes API answers.

A private endpoint answers only inside the VPC, so such a stack needs its in-VPC runner (``ciRunner*`` keys,
``components/deploy_runner.py``) and its jobs must run on that runner's label; a stack that has a runner is
deployed from it too (its public endpoint admits only the CIDRs in its stack file, none of them CI's).

The workflows (``*.yml`` and ``*.yaml``) are parsed into small frozen models. Each job runs once per combination of
its matrix; a job that calls a local reusable workflow passes its resolved ``with:`` values to the called jobs as
``inputs``. Pulumi runs are the ``pulumi/actions`` steps and the ``pulumi up|update|preview|pre`` commands of
``run:`` scripts. The check fails closed: a run whose stack does not resolve to one of the repository's stacks, or
whose ``runs-on`` cannot be shown to carry the stack's runner label, is a finding.
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainium_eks import files
from trainium_eks.config import PlatformConfig

PULUMI_ACTION = "pulumi/actions@"
LOCAL_WORKFLOW = "./.github/workflows/"
# `up` is also `update`, `preview` also `pre` (the CLI's command aliases, pulumi/pulumi pkg/cmd/pulumi).
DEPLOY_COMMANDS = frozenset({"up", "update", "preview", "pre"})
# The CLI's global flags that take a value (`pulumi --help`): the word after one may be its value or the command.
VALUE_FLAGS = frozenset({"-C", "--cwd", "--color", "--memprofilerate", "--profiling", "--tracing", "-v", "--verbose"})
STACK_FLAGS = ("-s", "--stack")
MAX_WORKFLOW_BYTES = 2**20  # the shipped workflows are a few KiB; this only bounds the read
# `${{ matrix.x }}` and `${{ inputs.x }}`: the only expressions a stack's name or runner is resolved through.
EXPRESSION = re.compile(r"\$\{\{\s*(matrix|inputs)\.([A-Za-z0-9_-]+)\s*\}\}")
ANY_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
SHELL_OPERATOR = re.compile(r"[();<>|&]+")


class WorkflowError(Exception):
    """A workflow this check cannot read, or a call it cannot follow: one line naming the file and the fix."""


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Step(Model):
    uses: str = ""
    run: str = ""
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")


class Matrix(Model):
    """``strategy.matrix``: its axes are the keys other than ``include``/``exclude``."""

    model_config = ConfigDict(extra="allow", frozen=True)
    include: list[dict[str, Any]] | str = Field(default_factory=list)
    exclude: list[dict[str, Any]] | str = Field(default_factory=list)

    def combinations(self) -> list[dict[str, Any]]:
        """GitHub's expansion (docs.github.com, "Running variations of jobs in a workflow"): the product of the axes
        minus every combination an ``exclude`` entry matches; then each ``include`` entry is added to every such
        combination whose axis values it leaves alone, or else becomes a combination of its own. An ``include``
        computed at run time (an expression) is one combination with nothing known; an ``exclude`` computed at run
        time removes nothing, so every combination it might remove is still checked."""
        axes = {key: value if isinstance(value, list) else [value] for key, value in (self.model_extra or {}).items()}
        base = [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())] if axes else []
        if isinstance(self.exclude, list):
            base = [c for c in base if not any(entry.items() <= c.items() for entry in self.exclude)]
        added = []
        for entry in self.include if isinstance(self.include, list) else [{}]:
            extended = [c for c in base if all(c[k] == v for k, v in entry.items() if k in axes)]
            for combination in extended:
                combination.update(entry)
            if not extended:
                added.append(dict(entry))
        return base + added or [{}]


class Strategy(Model):
    matrix: Matrix | str = Matrix()  # a string is a matrix computed at run time


class RunnerGroup(Model):
    group: str = ""
    labels: str | list[str] = Field(default_factory=list)


class Job(Model):
    runs_on: str | list[str] | RunnerGroup = Field("", alias="runs-on")
    uses: str = ""
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    strategy: Strategy = Strategy()
    steps: list[Step] = Field(default_factory=list)

    def combinations(self) -> list[dict[str, Any]]:
        matrix = self.strategy.matrix
        return matrix.combinations() if isinstance(matrix, Matrix) else [{}]


class Workflow(Model):
    on: str | list[str] | dict[str, Any] = Field(default_factory=dict)
    jobs: dict[str, Job]

    @property
    def called_only(self) -> bool:
        """Triggered by ``workflow_call`` alone: it runs only through its callers, with their inputs."""
        return ([self.on] if isinstance(self.on, str) else list(self.on)) == ["workflow_call"]


@dataclass(frozen=True)
class StackJob:
    """One resolved Pulumi run of ``command`` on ``stack`` (as written, when it names none of ours) on ``runs_on``."""

    where: str  # workflow file and job, e.g. "deploy.yml prod -> pulumi-up.yml up"
    stack: str
    command: str
    runs_on: tuple[str, ...]


def load(directory: Path) -> dict[str, Workflow]:
    workflows = {}
    for path in sorted([*directory.glob("*.yml"), *directory.glob("*.yaml")]):
        try:
            data = yaml.safe_load(files.read_text(path, MAX_WORKFLOW_BYTES, "fix the workflow file"))
            if isinstance(data, dict) and True in data:
                data["on"] = data.pop(True)  # YAML 1.1 reads the key `on` as true
            workflows[path.name] = Workflow.model_validate(data)
        except files.UnreadableFile as error:
            raise WorkflowError(str(error)) from None
        except (yaml.YAMLError, ValidationError) as error:
            raise WorkflowError(f"{path}: not a readable workflow ({_reason(error)}); fix the file") from None
    return workflows


def _reason(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        return f"{'.'.join(map(str, first['loc'])) or 'the document'}: {first['msg']}"
    return " ".join(str(error).split())


def _resolve(text: Any, context: Mapping[str, Mapping[str, Any]]) -> str:
    def value(match: re.Match) -> str:
        known = context.get(match.group(1), {})
        return str(known[match.group(2)]) if match.group(2) in known else match.group(0)

    return EXPRESSION.sub(value, str(text))


def _canonical(text: str) -> str:
    """``text`` with the whitespace inside its expressions removed: `${{github.run_id}}` is `${{ github.run_id }}`."""
    return ANY_EXPRESSION.sub(lambda m: "${{" + "".join(m.group(1).split()) + "}}", text)


def _labels(runs_on: str | list[str] | RunnerGroup, scope: Mapping[str, Mapping[str, Any]]) -> tuple[str, ...]:
    """The labels a runner must all carry to take the job (a group alone names none)."""
    labels = runs_on.labels if isinstance(runs_on, RunnerGroup) else runs_on
    return tuple(_resolve(label, scope) for label in ([labels] if isinstance(labels, str) else labels) if label)


def _shell_commands(script: str) -> Iterator[list[str]]:
    """The words of each simple command of ``script``, split at newlines and shell operators; no expansion."""
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            words = list(lexer)
        except ValueError:  # an unclosed quote: the line continues a string, read its words as they are
            words = line.split()
        command: list[str] = []
        for word in [*words, ";"]:
            if SHELL_OPERATOR.fullmatch(word):
                if command:
                    yield command
                command = []
            else:
                command.append(word)


def _cli_run(words: list[str]) -> tuple[str, str] | None:
    """(command, stack) of a `pulumi up|preview` in ``words``, the stack as given by -s/--stack ("" without one).
    A word that may be the command but is not plain text (a variable, an expression) counts as a deploy."""
    if not (starts := [i for i, word in enumerate(words) if word == "pulumi" or word.endswith("/pulumi")]):
        return None
    args = words[starts[0] + 1 :]
    command, after_value_flag = None, False
    for word in args:
        if word.startswith("-"):
            after_value_flag = word in VALUE_FLAGS
            continue
        if word in DEPLOY_COMMANDS or "$" in word:
            command = word
        if command or not after_value_flag:
            break
        after_value_flag = False
    if command is None:
        return None
    for flag, following in zip(args, [*args[1:], ""], strict=True):
        if flag in STACK_FLAGS:
            return command, following
        for prefix in (f"{name}=" for name in STACK_FLAGS):
            if flag.startswith(prefix):
                return command, flag.removeprefix(prefix)
    return command, ""


def _pulumi_runs(step: Step, scope: Mapping[str, Mapping[str, Any]]) -> Iterator[tuple[str, str]]:
    """(command, stack name as written) of each `pulumi preview`/`up` the step runs."""
    if step.uses.startswith(PULUMI_ACTION):
        command = _resolve(step.with_.get("command", ""), scope)
        if command in DEPLOY_COMMANDS or "${{" in command:
            yield command, _resolve(step.with_.get("stack-name", ""), scope)
    for words in _shell_commands(_canonical(_resolve(step.run, scope))):
        if (run := _cli_run(words)) is not None:
            yield run


def _stack_of(name: str, project: str) -> str:
    """The stack ``name`` selects in ``project``: `stack`, `org/stack` or `org/project/stack` (Pulumi docs,
    "Stacks"); any other form, or another project's stack, is kept whole so that it matches none of ours."""
    parts = name.split("/")
    return parts[-1] if len(parts) <= 2 or (len(parts) == 3 and parts[1] == project) else name


def _runs(
    workflows: Mapping[str, Workflow],
    chain: tuple[str, ...],
    where: str,
    job: Job,
    context: Mapping[str, Mapping[str, Any]],
    project: str,
) -> Iterator[StackJob]:
    for combination in job.combinations():
        scope = {**context, "matrix": combination}
        if job.uses.startswith(LOCAL_WORKFLOW):
            called = job.uses.removeprefix(LOCAL_WORKFLOW)
            if called not in workflows:
                raise WorkflowError(f"{where}: calls {job.uses}, which is not a workflow file; fix the path")
            if called in chain:
                raise WorkflowError(f"{where}: calls {job.uses}, which is already in its call chain; break the cycle")
            inputs = {key: _resolve(value, scope) for key, value in job.with_.items()}
            for called_id, called_job in workflows[called].jobs.items():
                yield from _runs(
                    workflows, (*chain, called), f"{where} -> {called} {called_id}", called_job, {"inputs": inputs}, project
                )
            continue
        runs_on = _labels(job.runs_on, scope)
        for step in job.steps:
            for command, stack_name in _pulumi_runs(step, scope):
                yield StackJob(where, _stack_of(stack_name, project), command, runs_on)


def stack_jobs(workflows: Mapping[str, Workflow], project: str) -> list[StackJob]:
    """Every Pulumi preview/up the workflows run, per matrix combination and caller, its stack and runner resolved
    as far as the files say. Workflows triggered only by ``workflow_call`` are read through their callers."""
    return [
        run
        for name, workflow in workflows.items()
        if not workflow.called_only
        for job_id, job in workflow.jobs.items()
        for run in _runs(workflows, (name,), f"{name} {job_id}", job, {}, project)
    ]


def unreachable(jobs: list[StackJob], stacks: Mapping[str, PlatformConfig]) -> list[str]:
    """One line per job that would run Pulumi on a stack from outside the place its API endpoint answers, or that
    cannot be shown to run there (its stack or its runner does not resolve)."""
    problems = []
    for job in jobs:
        run = f"{job.where}: `pulumi {job.command}` of {job.stack or 'the selected stack'}"
        cfg = stacks.get(job.stack)
        if cfg is None:
            problems.append(
                f"{run}, which is none of the stacks ({', '.join(sorted(stacks))}); name the stack with stack-name or "
                "--stack, literally or through matrix or inputs"
            )
        elif cfg.deploy_runner is None:
            if not cfg.cluster.endpoint_public_access:
                problems.append(
                    f"{run}, whose API endpoint is private, but the stack has no in-VPC runner; set ciRunnerRepository "
                    "and ciRunnerConnectionArn"
                )
        elif _canonical(cfg.deploy_runner.runs_on) not in {_canonical(label) for label in job.runs_on}:
            problems.append(
                f"{run} runs on {', '.join(job.runs_on) or 'no runner label'}, outside the stack's VPC; run it on "
                f"{cfg.deploy_runner.runs_on}"
            )
    return problems
