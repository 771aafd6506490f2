"""What enters the job tools: a stack's outputs (a file, or `pulumi stack output` of a stack), read once and bounded,
and bad input reported as one line on stderr with exit status 2. The options that name the source (``--stack``,
``--outputs``) and the way to the cluster's API (``--api-tunnel``) are declared here for every tool that takes them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from jobs.errors import LaunchError
from trainium_eks import files
from trainium_eks.cli import UsageError, one_line
from trainium_eks.contract import ContractError, PlatformContract

MAX_OUTPUTS_BYTES = 16 * 1024 * 1024  # stack outputs are kilobytes; a whole plan a few megabytes
# The contract version the job tools need: teams came in 1.5.0. What came later they read where a platform publishes it
# (a 1.5.0 platform's node groups all ran the PyTorch/XLA image: PlatformContract.software).
REQUIRES = "1.5.0"


def read_outputs(stack: str | None, outputs_file: Path | None) -> Any:
    if outputs_file is not None:
        try:
            outputs = json.loads(files.read_text(outputs_file, MAX_OUTPUTS_BYTES, "pass a stack outputs JSON file"))
        except files.UnreadableFile as error:
            raise LaunchError(f"--outputs {outputs_file}: not a readable JSON file ({error.problem})") from None
        except (ValueError, RecursionError) as error:
            reason = type(error).__name__ if isinstance(error, RecursionError) else error
            raise LaunchError(f"--outputs {outputs_file}: not a readable JSON file ({reason})") from None
        # Also accept a whole `preflight plan --json` object.
        is_plan = isinstance(outputs, dict) and isinstance(outputs.get("outputs"), dict) and "resources" in outputs
        return outputs["outputs"] if is_plan else outputs
    try:
        result = subprocess.run(
            ["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", stack], capture_output=True, text=True
        )
    except FileNotFoundError:
        raise LaunchError("--stack needs the Pulumi CLI on PATH; or pass --outputs FILE") from None
    if result.returncode != 0:
        last_line = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise LaunchError(f"--stack {stack}: `pulumi stack output` failed: {last_line}")
    try:
        return json.loads(result.stdout)
    except ValueError:
        raise LaunchError(f"--stack {stack}: `pulumi stack output --json` printed no JSON") from None


def add_source_options(parser) -> None:
    """``--stack`` or ``--outputs``, one of them required: where a tool reads the platform's outputs (``source_contract``)."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="read `pulumi stack output --json --show-secrets` of this stack")
    source.add_argument("--outputs", type=Path, help="a JSON file of stack outputs (or a `preflight plan --json` object)")


def port(text: str) -> int:
    """A TCP port from the command line (argparse reports the error in one line)."""
    value = int(text)
    if not 1 <= value <= 65535:
        raise ValueError(text)
    return value


port.__name__ = "port"  # argparse names the type in its message: "invalid port value"


def add_api_tunnel_option(parser) -> None:
    parser.add_argument(
        "--api-tunnel",
        type=port,
        metavar="PORT",
        help="reach a private endpoint through the local end of `python -m jobs.api_tunnel`'s session on PORT",
    )


def source_contract(args) -> PlatformContract:
    """The contract of the outputs ``add_source_options``' options name."""
    return read_contract(args.stack, args.outputs)


def read_contract(stack: str | None, outputs_file: Path | None) -> PlatformContract:
    """The platform's outputs (``read_outputs``) checked against the contract version the job tools need."""
    return PlatformContract.from_outputs(read_outputs(stack, outputs_file), requires=REQUIRES)


def add_team_option(parser) -> None:
    parser.add_argument("--team", help="work in this team's workspace: its namespace, queue and volume (see docs/teams.md)")


def workspace(contract: PlatformContract, team: str | None) -> PlatformContract:
    """The platform's own workspace, or team ``team``'s view of the platform (``PlatformContract.for_team``)."""
    if team is None:
        return contract
    try:
        return contract.for_team(team)
    except ContractError as error:
        raise LaunchError(f"--team {team}: {str(error).removeprefix('teams: ')}") from None


def report_bad_input(make_parser, argv: list[str] | None, body) -> int:
    """Parse ``argv`` and run the command body; bad input becomes one line on stderr and exit status 2."""
    try:
        body(make_parser().parse_args(argv))
    except (UsageError, LaunchError, ContractError) as error:
        print(f"error: {one_line(str(error))}", file=sys.stderr)
        return 2
    return 0
