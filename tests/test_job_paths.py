"""The path options of the job tools that write (`jobs.api_tunnel --kubeconfig`, `--workdir` of `jobs.rehearsal` and
`jobs.local_etcd`), and the stack's kubeconfig they write or use: what cannot be written, or does not hold together,
is one line and exit status 2, before anything is written or started."""

from __future__ import annotations

import functools
import json
import sys

import pytest
from support import evaluate, one_group

from jobs import acceptance, api_tunnel, launch, local_etcd, rehearsal

NOT_WRITABLE = "/proc/self"  # a directory no one may create a file in, root included


@functools.cache
def fixture_outputs() -> str:
    """A fixture stack of one elastic trn1.32xlarge group, with a private endpoint (so with an access host), whatever the
    shipped stacks hold."""
    private = {"endpointPublicAccess": False, "publicAccessCidrs": []}
    return json.dumps(evaluate("staging", fixture=True, **private, **one_group("trn1.32xlarge")).outputs)


def kubeconfig(server: str = "https://cluster.example.com") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": "dW51c2Vk"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
        "users": [{"name": "u", "user": {"exec": {"command": sys.executable, "args": ["-c", "pass"]}}}],
    }


def outputs_file(tmp_path, config: dict | None = None):
    outputs = json.loads(fixture_outputs())
    if config is not None:
        outputs["kubeconfig"] = json.dumps(config)
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs))
    return path


def one_line_refusal(capsys, main, argv: list[str], *words: str) -> str:
    status = main(argv)
    captured = capsys.readouterr()
    (line,) = [line for line in captured.err.splitlines() if line.startswith("error:")]
    assert status == 2 and all(word in line for word in words), captured.err
    assert "Traceback" not in captured.err
    return captured.out


def bad_file(tmp_path, case: str) -> str:
    regular = tmp_path / "regular"
    regular.write_text("")
    return {
        "directory": str(tmp_path),
        "missing-directory": str(tmp_path / "nope" / "k.json"),
        "under-a-file": str(regular / "k.json"),
        "not-a-regular-file": "/dev/null",
        "not-writable": f"{NOT_WRITABLE}/k.json",
    }[case]


@pytest.mark.parametrize("case", ["directory", "missing-directory", "under-a-file", "not-a-regular-file", "not-writable"])
def test_a_kubeconfig_path_that_cannot_be_written_is_one_line(tmp_path, capsys, case):
    path = bad_file(tmp_path, case)
    argv = ["--outputs", str(outputs_file(tmp_path, kubeconfig())), "--kubeconfig", path]
    printed = one_line_refusal(capsys, api_tunnel.main, argv, f"--kubeconfig: {path}")
    assert printed == ""  # not even the session command


def bad_directory(tmp_path, case: str) -> str:
    regular = tmp_path / "regular"
    regular.write_text("")
    used = tmp_path / "used"
    (used / "etcd").mkdir(parents=True)
    return {
        "a-file": str(regular),
        "under-a-file": str(regular / "w"),
        "not-empty": str(used),
        "cannot-be-created": "/proc/nope",
    }[case]


@pytest.mark.parametrize("case", ["a-file", "under-a-file", "not-empty", "cannot-be-created"])
@pytest.mark.parametrize("tool", [rehearsal, local_etcd], ids=["rehearsal", "local_etcd"])
def test_a_workdir_that_cannot_be_used_is_one_line(tmp_path, capsys, tool, case):
    path = bad_directory(tmp_path, case)
    argv = ["--outputs", str(outputs_file(tmp_path)), "--workdir", path]
    before = sorted(tmp_path.rglob("*"))
    one_line_refusal(capsys, tool.main, [*argv, "--nodes", "1"] if tool is rehearsal else argv, "--workdir", path)
    assert sorted(tmp_path.rglob("*")) == before  # nothing made


def broken(case: str) -> dict:
    config = kubeconfig()
    if case == "cluster-missing":
        del config["clusters"][0]["cluster"]
    elif case == "server-not-https":
        config["clusters"][0]["cluster"]["server"] = "cluster.example.com"
    elif case == "clusters-not-a-list":
        config["clusters"] = "c"
    elif case == "context-names-no-cluster":
        config["contexts"][0]["context"]["cluster"] = "other"
    elif case == "no-current-context":
        del config["current-context"]
    return config


BROKEN = ["cluster-missing", "server-not-https", "clusters-not-a-list", "context-names-no-cluster", "no-current-context"]


@pytest.mark.parametrize("case", BROKEN)
def test_a_kubeconfig_in_the_outputs_that_does_not_hold_together_is_one_line(tmp_path, capsys, case):
    outputs = str(outputs_file(tmp_path, broken(case)))
    written = tmp_path / "tunnel.json"
    words = "error: the outputs' kubeconfig:"
    assert one_line_refusal(capsys, api_tunnel.main, ["--outputs", outputs, "--kubeconfig", str(written)], words) == ""
    assert not written.exists()
    one_line_refusal(capsys, launch.main, ["--outputs", outputs, "--api-tunnel", "8443"], words)
    one_line_refusal(capsys, launch.main, ["--outputs", outputs], words)
    one_line_refusal(capsys, acceptance.main, ["etcd-rendezvous", "--outputs", outputs, "--api-tunnel", "8443"], words)


def test_the_kubeconfig_written_is_the_stacks_through_the_tunnel_and_the_owners_alone(tmp_path, capsys):
    written = tmp_path / "tunnel.json"
    argv = ["--outputs", str(outputs_file(tmp_path, kubeconfig())), "--local-port", "9443", "--kubeconfig", str(written)]
    assert api_tunnel.main(argv) == 0
    assert "aws ssm start-session" in capsys.readouterr().out
    (cluster,) = json.loads(written.read_text())["clusters"]
    assert cluster["cluster"]["server"] == "https://127.0.0.1:9443"
    assert cluster["cluster"]["tls-server-name"] == "cluster.example.com"
    assert written.stat().st_mode & 0o077 == 0
