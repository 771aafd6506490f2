"""Command line of the offline engine.

    python -m preflight plan STACK [--stack-file PATH] [--preview] [--json] [--image-gib N]
    python -m preflight check STACK... | --all [--stack-file PATH] [--graph FILE] [--preview] [--json]
    python -m preflight diff STACK --against PATH|REF [--stack-file PATH] [--format text|json|markdown | --json]
    python -m preflight destroy STACK [--stack-file PATH] [--json]

Exit status: 0 success (``check``: no mandatory violation), 1 ``check`` found a mandatory violation,
2 config or usage error (one line on stderr, no traceback); ``diff``: 3 the change loses data (a ``DATA LOSS`` line),
else 4 EKS refuses part of it (a ``REFUSED BY EKS`` line).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Annotated

from pydantic import Field, TypeAdapter, ValidationError

from preflight import (
    analysis,
    baseline,
    batch,
    check,
    destroy,
    diff,
    engine,
    impact_report,
    planfile,
    pr_markdown,
    render,
    stackfile,
)
from trainium_eks import catalog
from trainium_eks.cli import OneLineParser, UsageError, one_line

DATA_LOSS, REFUSED = 3, 4  # diff's exit statuses after a DATA LOSS or REFUSED BY EKS line (README, "Reviewing a change")
DIFF_FORMATS = ("text", "json", "markdown")  # diff's exit status is the same in each


# The training image is pulled onto a Trainium node's instance store (trainium_eks/nodeadm.py): no image larger than
# the largest instance store of a Trainium type in the catalog can be pulled at all.
MAX_IMAGE_GIB = max(t.instance_store_gb for t in catalog.INSTANCE_TYPES.values() if t.is_trainium) * 1000**3 / 1024**3
IMAGE_GIB = TypeAdapter(Annotated[float, Field(gt=0, le=MAX_IMAGE_GIB, allow_inf_nan=False)])


def image_size(text: str) -> float:
    """``--image-gib``: a size in GiB above 0 that a node can hold (argparse prints the error in one line)."""
    try:
        return IMAGE_GIB.validate_python(text)
    except ValidationError:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not an image size: use GiB above 0 and at most {MAX_IMAGE_GIB:,.0f} (the largest Trainium "
            "node's instance store, where images are pulled)"
        ) from None


def parser() -> argparse.ArgumentParser:
    root = OneLineParser(prog="python -m preflight", description="Evaluate the trainium-eks program offline.")
    commands = root.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    plan = commands.add_parser("plan", help="evaluate a stack and print its resource graph")
    plan.add_argument("stack", help="stack name, e.g. dev (reads stacks/Pulumi.<stack>.yaml)")
    plan.add_argument("--stack-file", type=Path, help="evaluate this settings file as STACK instead")
    plan.add_argument("--preview", action="store_true", help="evaluate as a preview of a new stack (computed outputs unknown)")
    plan.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    plan.add_argument(
        "--image-gib", type=image_size, help="the training image's size in GiB, to count its pull in the first-step estimate"
    )

    policy = commands.add_parser("check", help="run the policy packs over stacks, as `pulumi preview --policy-pack` does")
    policy.add_argument("stacks", nargs="*", metavar="STACK", help="stack names (or use --all)")
    policy.add_argument("--all", action="store_true", help="every stack in stacks/")
    policy.add_argument("--stack-file", type=Path, help="with one STACK: evaluate this settings file as STACK")
    policy.add_argument("--graph", type=Path, help="check this plan (`plan --json` output) instead of running the program")
    policy.add_argument("--preview", action="store_true", help="check a preview of a new stack (computed values unknown)")
    policy.add_argument("--json", action="store_true", help="print the plan(s) with their violations as JSON")

    change = commands.add_parser(
        "diff",
        help="what the working tree changes in a stack against another version",
        epilog=f"exit status: 0 the change applies; {DATA_LOSS} it loses data (a DATA LOSS line: a file system, "
        f"registry, KMS key or cluster replaced or removed); {REFUSED} otherwise, EKS refuses part of it (a REFUSED "
        "BY EKS line); 2 bad input. CI can stop on a non-zero status, or ask for a second review on 3.",
    )
    change.add_argument("stack", help="stack name")
    change.add_argument(
        "--against",
        required=True,
        metavar="PATH|REF",
        help="the baseline: a stack settings file, or a git ref (the program and stack file as committed)",
    )
    change.add_argument("--stack-file", type=Path, help="compare this settings file, evaluated as STACK, to the baseline")
    formats = change.add_mutually_exclusive_group()
    formats.add_argument(
        "--format",
        choices=DIFF_FORMATS,
        default="text",
        help="text (the default); json: as --json; markdown: a pull-request comment, with the policy violations of the "
        "new plan, the cost and deploy time before and after, and a Mermaid graph of the change",
    )
    formats.add_argument(
        "--json",
        action="store_const",
        const="json",
        dest="format",
        help='print {"added", "removed", "changed", "losses", "refused", "drifts", "nodeImages", "cost"} as JSON',
    )

    teardown = commands.add_parser(
        "destroy", help="what `pulumi destroy` deletes, in what order, what it refuses and what remains afterwards"
    )
    teardown.add_argument("stack", help="stack name")
    teardown.add_argument("--stack-file", type=Path, help="evaluate this settings file as STACK instead")
    teardown.add_argument("--json", action="store_true", help='print {"steps", "refused", "remains", "karpenter"} as JSON')
    return root


def run_plan(args: argparse.Namespace) -> int:
    settings = stackfile.load(args.stack, args.stack_file)
    plan = engine.evaluate(settings, preview=args.preview)
    annotated = analysis.annotate(plan.to_json(), args.image_gib)
    if args.json:
        print(json.dumps(annotated, indent=2, sort_keys=True))
    else:
        print(render.tree(plan) + "\n\n" + analysis.summary(annotated))
    return 0


def _checked(args: argparse.Namespace) -> list[tuple[dict, check.CheckResult]]:
    if args.graph is not None:
        if args.all or len(args.stacks) > 1 or args.stack_file is not None:
            raise UsageError("--graph checks one plan: give at most one STACK and no --all or --stack-file")
        return [check.check_plan_file(args.graph, args.stacks[0] if args.stacks else None)]
    if args.all and args.stacks:
        raise UsageError("give STACK names or --all, not both")
    if not (args.all or args.stacks):
        raise UsageError("name the stacks to check, or pass --all")
    if args.stack_file is not None and len(args.stacks) != 1:
        raise UsageError("--stack-file goes with exactly one STACK")
    names = stackfile.stack_names() if args.all else args.stacks
    return batch.check_stacks(names, args.stack_file, args.preview)


def run_check(args: argparse.Namespace) -> int:
    reports = [(analysis.annotate(plan), result) for plan, result in _checked(args)]
    if args.json:
        objects = [
            {
                **plan,
                "violations": [v.to_json() for v in result.violations],
                "remediations": [r.to_json() for r in result.remediations],
            }
            for plan, result in reports
        ]
        print(json.dumps(objects[0] if len(objects) == 1 and not args.all else objects, indent=2, sort_keys=True))
    else:
        print("\n\n".join(render.policy_report(plan, result) + "\n" + analysis.summary(plan) for plan, result in reports))
    return 1 if any(result.mandatory for _, result in reports) else 0


def run_diff(args: argparse.Namespace) -> int:
    # Both inputs are read before the evaluation, which takes seconds, so that bad input fails at once.
    against = Path(args.against)
    baseline_settings = stackfile.load(args.stack, against) if against.is_file() else None
    if baseline_settings is None:
        baseline.check_ref(args.against)
    proposed = stackfile.load(args.stack, args.stack_file)
    policy_config = check.load_policy_config(args.stack) if args.format == "markdown" else None
    if baseline_settings is None:
        # the ref's side runs in its own process meanwhile: on two cores the two evaluations take the time of one
        with baseline.start(stackfile.REPO_ROOT, args.against, args.stack) as at_ref:
            current = analysis.annotate(engine.evaluate(proposed).to_json())
            before = at_ref.plan()
    else:
        # both annotated with the cost estimate, as `plan --json` prints a plan at a ref
        current = analysis.annotate(engine.evaluate(proposed).to_json())
        before = analysis.annotate(engine.evaluate(baseline_settings).to_json())
    impact = diff.compare(before, current)
    if args.format == "json":
        print(json.dumps(impact.to_json(), indent=2, sort_keys=True))
    elif args.format == "markdown":
        findings = check.check_plan(current, policy_config, f"policies/config/{args.stack}.json")
        print(pr_markdown.report(args.stack, args.against, impact, current, before, findings), end="")
    else:
        print(impact_report.impact(args.stack, args.against, impact, current, before))
    return DATA_LOSS if impact.losses else REFUSED if impact.refused else 0


def run_destroy(args: argparse.Namespace) -> int:
    plan = engine.evaluate(stackfile.load(args.stack, args.stack_file)).to_json()
    teardown = destroy.plan_destroy(plan["resources"], args.stack)
    print(json.dumps(teardown.to_json(), indent=2, sort_keys=True) if args.json else destroy.report(teardown))
    return 0


COMMANDS = {"plan": run_plan, "check": run_check, "diff": run_diff, "destroy": run_destroy}


ONE_LINE_ERRORS = (UsageError, batch.StackError, baseline.RefError, planfile.PlanFileError, *batch.ONE_LINE_ERRORS)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except ONE_LINE_ERRORS as error:
        print(f"error: {one_line(str(error))}", file=sys.stderr)  # a quoted name or value may hold a line break
        return 2
