"""Try the job before you deploy: the stack's own training job on this machine, on a CPU, through a real etcd.

    python -m jobs.rehearsal (--stack STACK | --outputs FILE) [--workload NAME] [--nodes N]
                             [--workers-per-node N] [--steps K]
                             [--kill-at STEP | --drain-at STEP [--drains N] | --crash-at-start] [--etcd-members M]
                             [--node-group NAME] [--workdir DIR] [--timeout SECONDS] [--json]

The Volcano Job is the one `jobs.launch` builds from the outputs for the workload (`jobs.rehearsal.cpu_workloads`: BERT,
or TorchTitan with its CPU recipe); each of its tasks runs as a torchrun agent here, and they meet through etcd
members started with the platform's own flags (`jobs.local_etcd`). What must differ on a CPU is listed in
`jobs.rehearsal.local_agents.CpuOverrides`. With ``--kill-at STEP`` a training worker dies by SIGKILL once every worker has
trained that step, as an OOM kill would; the run passes only if every step trains and, after the kill, training
resumed from the checkpoint written before it, so that the steps since that checkpoint, which the report lists, are
trained again.
With ``--drain-at STEP`` the agents get SIGTERM once every worker has trained that step, as the kubelet sends it to a
drained pod's torchrun; they get the pods' grace period to exit (then SIGKILL); ``--drains N`` drains again once
--drain-at more steps are trained after each resume. The run passes only if no step is lost: the workers stopped after
a step whose checkpoint the restarted job resumed from. The report gives the time from the SIGTERM to the next step.
With ``--crash-at-start`` a worker dies at step 1 of every start; the run passes only if torchrun gave up after its
--max-restarts in each run of the job, Volcano restarted the job as many times as the run's crash budget allows
(``training.crash_budget``), and the job then ended Terminated.
Whatever ends an agent, the job goes on as Volcano's job controller decides by the job's own lifecycle policies and
maxRetry (`jobs.rehearsal.volcano_lifecycle`): restarted (new agents, the next job version), completed, or ended; the report
gives the job's phase and retryCount, and a job Volcano fails fails the rehearsal.
Exit status: 0 passed, 1 the rehearsal failed (logs kept), 2 bad input.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import get_args

from pydantic import ValidationError

from jobs.cluster_access.outputs import add_source_options, report_bad_input, source_contract
from jobs.errors import LaunchError
from jobs.job_building.paths import create_directory, new_directory
from jobs.rehearsal.cpu_workloads import cpu_recipes
from jobs.rehearsal.disruption_table import rehearse_every_disruption
from jobs.rehearsal.disruptions import table
from jobs.rehearsal.report import CHECKPOINT_EVERY, NODE_DISRUPTIONS, RehearsalRequest
from jobs.rehearsal.run import rehearsal_job, rehearse
from trainium_eks.cli import OneLineParser

__all__ = ["main", "rehearsal_job", "rehearse"]


def request_from(args) -> RehearsalRequest:
    options = {
        "workload": args.workload,
        "nodes": args.nodes,
        "workers_per_node": cpu_recipes()[args.workload].workers_per_node
        if args.workers_per_node is None
        else args.workers_per_node,
        "steps": args.steps,
        "kill_at": args.kill_at,
        "drain_at": args.drain_at,
        "drains": args.drains,
        "crash_at_start": args.crash_at_start,
        "disruption": args.disruption,
        "etcd_members": args.etcd_members,
        "node_group": args.node_group,
        "timeout": args.timeout,
    }
    try:
        return RehearsalRequest(**{key: value for key, value in options.items() if value is not None})
    except ValidationError as error:
        detail = error.errors(include_url=False)[0]
        if not detail["loc"]:  # a rule across options: its message names the option and the fix
            raise LaunchError(str(detail["ctx"]["error"])) from None
        field = str(detail["loc"][0])
        raise LaunchError(f"--{field.replace('_', '-')} {detail['input']}: {detail['msg'].lower()}") from None


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m jobs.rehearsal", description=__doc__.splitlines()[0])
    add_source_options(p)
    recipes = cpu_recipes()
    default = RehearsalRequest.model_fields["workload"].default
    p.add_argument(
        "--workload",
        choices=tuple(recipes),
        default=default,
        help=f"the job to rehearse, the launcher's for the workload, with its CPU recipe (default: {default})",
    )
    p.add_argument("--nodes", type=int, help="torchrun agents, one per node of the job (default 2)")
    p.add_argument(
        "--workers-per-node",
        type=int,
        help="training workers per agent (default "
        + ", ".join(f"{recipe.workers_per_node} for {name}" for name, recipe in recipes.items())
        + ": a CPU has few cores)",
    )
    p.add_argument("--steps", type=int, help="training steps (default 40)")
    p.add_argument(
        "--kill-at",
        type=int,
        help=f"kill a worker once every worker has trained this step (after the first checkpoint, at {CHECKPOINT_EVERY})",
    )
    p.add_argument(
        "--drain-at",
        type=int,
        help="SIGTERM the agents, as a node drain does, once every worker has trained this step; the job restarts "
        "and must lose no step",
    )
    p.add_argument(
        "--drains",
        type=int,
        help="drain this many times (default 1), after every --drain-at steps; the job must survive every one",
    )
    p.add_argument(
        "--crash-at-start",
        action="store_true",
        help="a worker crashes at every start (bert): torchrun restarts it up to its --max-restarts, then the job "
        "must end (Terminated), not restart forever",
    )
    p.add_argument(
        "--etcd-members",
        type=int,
        help="etcd members to start: 1, 3 or 5 (default: the stack's etcdMembers; 1 from a platform before contract 1.8.0)",
    )
    p.add_argument(
        "--disruption",
        choices=get_args(NODE_DISRUPTIONS),
        help="at --drain-at, do to the agents what this disruption does to a job's pods (jobs.rehearsal.disruptions: "
        "through Karpenter's termination path and Volcano's lifecycle)",
    )
    p.add_argument(
        "--disruptions",
        action="store_true",
        help="rehearse every kind of disruption, a run each, and print one table of what each cost (bert)",
    )
    p.add_argument("--node-group", help="the node group whose job to rehearse (default: the first)")
    p.add_argument(
        "--workdir",
        type=new_directory,
        help="keep the volume, etcd data and logs here, a new or empty directory (default: a temporary directory)",
    )
    p.add_argument("--timeout", type=float, help="stop the run after this many seconds (default 900)")
    p.add_argument("--json", action="store_true", help="the outcome as JSON on stdout; progress on stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    verdict = {}

    def run(args) -> None:
        request = request_from(args)
        if args.disruptions:
            options = {"--kill-at": args.kill_at, "--drain-at": args.drain_at, "--disruption": args.disruption}
            given = [flag for flag, value in options.items() if value is not None] + ["--crash-at-start"] * args.crash_at_start
            if given:
                raise LaunchError(f"--disruptions and {given[0]}: give one; --disruptions rehearses every kind in turn")
        contract = source_contract(args)
        job = rehearsal_job(contract, request)  # refused, if at all, before a directory is made
        if args.workdir:
            workdir = create_directory(args.workdir, "--workdir")
        else:
            workdir = Path(tempfile.mkdtemp(prefix="trainium-eks-rehearsal-"))

        def say(line: str) -> None:
            print(line, file=sys.stderr if args.json else sys.stdout, flush=True)

        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the agents and etcd on `kill` as on Ctrl-C

        if args.disruptions:
            rows = rehearse_every_disruption(contract, request, workdir, say)
            passed = all(row.met for row in rows)
            print(json.dumps([row.to_json() for row in rows]) if args.json else table(rows))
        else:
            result = rehearse(contract, request, job, workdir, say)
            passed = result.passed
            print(json.dumps(result.to_json()) if args.json else result.summary())
        if not passed:
            print(f"logs, volume and etcd data kept in {workdir}", file=sys.stderr)
        elif args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        verdict["passed"] = passed

    status = report_bad_input(parser, argv, run)
    return status if status else (0 if verdict.get("passed") else 1)
