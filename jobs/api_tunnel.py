"""Jobs into a private cluster: the API endpoint through the stack's access host, by Systems Manager port forwarding.

    python -m jobs.api_tunnel (--stack STACK | --outputs FILE) [--local-port PORT] [--kubeconfig PATH]

prints the `aws ssm start-session` command that forwards PORT (default 8443) on this machine to the cluster's
private endpoint through the host in ``apiAccess``; run it in a terminal of its own, then pass ``--api-tunnel PORT``
to `jobs.launch` or `jobs.acceptance`. They then connect to 127.0.0.1:PORT and still verify the API server's
certificate under the endpoint's own name (the kubeconfig's ``tls-server-name``), so the tunnel sees only TLS.
``--kubeconfig PATH`` also writes the stack's kubeconfig pointed at the tunnel, for kubectl (``KUBECONFIG=PATH``).
Needs the AWS CLI with the Session Manager plugin, and the policy ``apiAccess.usersPolicyArn`` on your role.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from urllib.parse import urlsplit

from jobs.cluster_access.kube_api import DEFAULT_LOCAL_PORT, stack_kubeconfig
from jobs.cluster_access.outputs import add_source_options, port, report_bad_input, source_contract
from jobs.errors import LaunchError
from jobs.job_building.paths import file_to_write
from trainium_eks.cli import OneLineParser
from trainium_eks.contract import PlatformContract

HTTPS = 443


def endpoint_host(contract: PlatformContract) -> str:
    return urlsplit(contract.cluster_endpoint).hostname or contract.cluster_endpoint


def start_session_command(contract: PlatformContract, local_port: int) -> list[str]:
    """The session that forwards ``local_port`` to the endpoint on 443 (Systems Manager User Guide, "Port forwarding
    to remote hosts": document AWS-StartPortForwardingSessionToRemoteHost, parameters host, portNumber and
    localPortNumber)."""
    if contract.api_access is None:
        raise LaunchError(f"--api-tunnel: the {contract.environment} stack's API endpoint is public; connect without a tunnel")
    parameters = f"host={endpoint_host(contract)},portNumber={HTTPS},localPortNumber={local_port}"
    return [
        "aws", "ssm", "start-session", "--region", contract.region, "--target", contract.api_access.host_instance_id,
        "--document-name", contract.api_access.document, "--parameters", parameters,
    ]  # fmt: skip


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m jobs.api_tunnel", description=__doc__.splitlines()[0])
    add_source_options(p)
    p.add_argument("--local-port", type=port, default=DEFAULT_LOCAL_PORT, help=f"default {DEFAULT_LOCAL_PORT}")
    p.add_argument("--kubeconfig", type=file_to_write, metavar="PATH", help="write the kubeconfig for kubectl through the tunnel")
    return p


def write_kubeconfig(contract: PlatformContract, local_port: int, path: Path) -> None:
    """The stack's kubeconfig through the tunnel, readable by its owner only (it names the cluster's CA and the
    token command, no secret of its own, but kubectl warns about a kubeconfig others can read)."""
    if contract.kubeconfig is None:
        raise LaunchError("--kubeconfig: the outputs hold no kubeconfig (secrets hidden); use --stack")
    text = json.dumps(stack_kubeconfig(contract, local_port), indent=2)
    try:
        path.touch(mode=0o600, exist_ok=True)
        path.chmod(0o600)
        path.write_text(text)
    except OSError as error:
        raise LaunchError(f"--kubeconfig {path}: cannot be written ({error.strerror}); name a file you may write") from None


def main(argv: list[str] | None = None) -> int:
    def run(args) -> None:
        contract = source_contract(args)
        command = start_session_command(contract, args.local_port)
        if args.kubeconfig:  # written, or refused, before anything is printed
            write_kubeconfig(contract, args.local_port, args.kubeconfig)
        print(shlex.join(command))
        if args.kubeconfig:
            print(f"kubectl through the tunnel: KUBECONFIG={args.kubeconfig} kubectl ...", file=sys.stderr)
        print(f"then: python -m jobs.launch ... --api-tunnel {args.local_port}", file=sys.stderr)

    return report_bad_input(parser, argv, run)


if __name__ == "__main__":
    sys.exit(main())
