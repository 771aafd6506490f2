"""Command line of the offline engine: ``python -m preflight plan STACK [--stack-file PATH] [--preview] [--json]``.

Exit status: 0 success, 2 config or usage error (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pulumi

from preflight import engine, render, stackfile


class UsageError(Exception):
    pass


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage block as well
        raise UsageError(f"{self.prog}: {message} (see --help)")


def parser() -> argparse.ArgumentParser:
    root = OneLineParser(prog="python -m preflight", description="Evaluate the trainium-eks program offline.")
    commands = root.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    plan = commands.add_parser("plan", help="evaluate a stack and print its resource graph")
    plan.add_argument("stack", help="stack name, e.g. dev (reads stacks/Pulumi.<stack>.yaml)")
    plan.add_argument("--stack-file", type=Path, help="evaluate this settings file as STACK instead")
    plan.add_argument("--preview", action="store_true", help="evaluate as a preview of a new stack (computed outputs unknown)")
    plan.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    return root


def run_plan(args: argparse.Namespace) -> int:
    settings = stackfile.load(args.stack, args.stack_file)
    plan = engine.evaluate(settings, preview=args.preview)
    if args.json:
        print(json.dumps(plan.to_json(), indent=2, sort_keys=True))
    else:
        print(render.tree(plan))
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        return run_plan(args)
    except (UsageError, stackfile.StackFileError, pulumi.RunError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
