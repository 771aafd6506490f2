"""The deploy path's reachability rule, checked over the repository's own files: every workflow job that runs
`pulumi preview` or `pulumi up` of a stack must run where that stack's Kubernetes API answers.

A private endpoint answers only inside the VPC, so such a stack needs its in-VPC runner (``ciRunner*`` keys,
``components/deploy_runner.py``) and its jobs must run on that runner's label; a stack that has a runner is
deployed from it too (its public endpoint admits only the CIDRs in its stack file, none of them CI's). The
workflows are parsed into small frozen models; a reusable workflow is resolved through each job that calls it
(its ``with:`` values become ``inputs``), a matrix job once per ``include`` entry.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from trainium_eks.config import PlatformConfig

PULUMI_ACTION = "pulumi/actions@"
LOCAL_WORKFLOW = "./.github/workflows/"
# `${{ matrix.x }}` and `${{ inputs.x }}`: the only expressions a stack's name or runner is resolved through.
EXPRESSION = re.compile(r"\$\{\{\s*(matrix|inputs)\.([A-Za-z0-9_-]+)\s*\}\}")


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Step(Model):
    uses: str = ""
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")


class Matrix(Model):
    include: list[dict[str, Any]] = Field(default_factory=list)


class Strategy(Model):
    matrix: Matrix = Matrix()


class Job(Model):
    runs_on: str | list[str] = Field("", alias="runs-on")
    uses: str = ""
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    strategy: Strategy = Strategy()
    steps: list[Step] = Field(default_factory=list)


class Workflow(Model):
    jobs: dict[str, Job]


@dataclass(frozen=True)
class StackJob:
    """One resolved job step that runs `pulumi <command>` of ``stack`` on the runners labelled ``runs_on``."""

    where: str  # workflow file and job, e.g. "deploy.yml prod -> pulumi-up.yml up"
    stack: str
    command: str
    runs_on: tuple[str, ...]


def load(directory: Path) -> dict[str, Workflow]:
    return {path.name: Workflow.model_validate(yaml.safe_load(path.read_text())) for path in sorted(directory.glob("*.yml"))}


def _resolve(text: Any, context: Mapping[str, Mapping[str, Any]]) -> str:
    def value(match: re.Match) -> str:
        known = context.get(match.group(1), {})
        return str(known[match.group(2)]) if match.group(2) in known else match.group(0)

    return EXPRESSION.sub(value, str(text))


def _steps(where: str, job: Job, context: Mapping[str, Mapping[str, Any]], project: str) -> Iterator[StackJob]:
    for entry in job.strategy.matrix.include or [{}]:
        scope = {**context, "matrix": entry}
        labels = [job.runs_on] if isinstance(job.runs_on, str) else job.runs_on
        runs_on = tuple(_resolve(label, scope) for label in labels)
        for step in job.steps:
            if not step.uses.startswith(PULUMI_ACTION):
                continue
            stack_name = _resolve(step.with_.get("stack-name", ""), scope)
            prefix, _, stack = stack_name.rpartition("/")
            if prefix.endswith(f"/{project}") and EXPRESSION.search(stack) is None:
                yield StackJob(where, stack, str(step.with_.get("command", "")), runs_on)


def stack_jobs(workflows: Mapping[str, Workflow], project: str) -> list[StackJob]:
    """Every job step of ``workflows`` that runs Pulumi on a stack of ``project``, its stack and runner resolved."""
    found = []
    for name, workflow in workflows.items():
        for job_id, job in workflow.jobs.items():
            if job.uses.startswith(LOCAL_WORKFLOW):
                called = job.uses.removeprefix(LOCAL_WORKFLOW)
                for called_id, called_job in workflows[called].jobs.items():
                    where = f"{name} {job_id} -> {called} {called_id}"
                    found += _steps(where, called_job, {"inputs": job.with_}, project)
            else:
                found += _steps(f"{name} {job_id}", job, {}, project)
    return found


def unreachable(jobs: list[StackJob], stacks: Mapping[str, PlatformConfig]) -> list[str]:
    """One line per job that would run Pulumi on a stack from outside the place its API endpoint answers."""
    problems = []
    for job in jobs:
        cfg = stacks.get(job.stack)
        if cfg is None:
            continue  # a stack this repository has no file for is not checked here
        runner = cfg.deploy_runner
        if runner is None:
            if not cfg.cluster.endpoint_public_access:
                problems.append(
                    f"{job.where}: `pulumi {job.command}` of {job.stack}, whose API endpoint is private, but the stack "
                    "has no in-VPC runner; set ciRunnerRepository and ciRunnerConnectionArn"
                )
        elif runner.runs_on not in job.runs_on:
            problems.append(
                f"{job.where}: `pulumi {job.command}` of {job.stack} runs on {', '.join(job.runs_on)}, outside the "
                f"stack's VPC; run it on {runner.runs_on}"
            )
    return problems
