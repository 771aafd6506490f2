"""Submitting a job to the API server: whatever goes wrong (a credential command that fails, an endpoint that does not
answer, an answer that refuses the job) is one line naming what to do, with no library logging before it."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import ssl
import subprocess
import sys
import threading

import pytest
import trustme
from support import answer_json, evaluate, one_group

from jobs.local_etcd import free_port
from preflight.stackfile import REPO_ROOT

# What `aws eks get-token` does without credentials: a message on stderr and a non-zero exit.
FAILING_CREDENTIALS = "import sys; sys.exit('Unable to locate credentials.')"
TOKEN = json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {"token": "t"}})


@functools.cache
def fixture_outputs() -> str:
    """A fixture stack of one elastic trn1.32xlarge group and a public endpoint, whatever the shipped stacks hold."""
    return json.dumps(evaluate("staging", fixture=True, **one_group("trn1.32xlarge")).outputs)


def outputs_with_kubeconfig(tmp_path, server: str, credential: str, authority: trustme.CA | None = None):
    ca = authority.cert_pem.bytes() if authority else b"unused"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": base64.b64encode(ca).decode()}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": sys.executable,
                        "args": ["-c", credential],
                    }
                },
            }
        ],
    }
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps({**json.loads(fixture_outputs()), "kubeconfig": json.dumps(config)}))
    return path


def launch(*args: str) -> subprocess.CompletedProcess:
    """A fresh interpreter, so that the logging configuration is the one a user's run starts with."""
    command = [sys.executable, "-m", "jobs.launch", *args]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def the_one_line(result: subprocess.CompletedProcess) -> str:
    """The launcher's error, after which nothing; before it, only its notes on the job (the compile cache, what each
    disruption does to it)."""
    *notes, error = result.stderr.splitlines()
    assert result.returncode == 2 and error.startswith("error: "), result.stderr
    assert notes and notes[0].startswith("compile cache ") and all(n.startswith("Disruptions: ") for n in notes[1:]), notes
    return error


def test_an_endpoint_that_does_not_answer_is_one_line_without_the_libraries_logging(tmp_path):
    server = f"https://127.0.0.1:{free_port()}"  # nothing listens there
    result = launch("--outputs", str(outputs_with_kubeconfig(tmp_path, server, FAILING_CREDENTIALS)))
    assert "does not answer" in the_one_line(result)


class Refusing(http.server.BaseHTTPRequestHandler):
    """An API server that answers every request with ``status`` and a Kubernetes Status."""

    status = 409

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        name = json.loads(self.rfile.read(length))["metadata"]["name"]
        reasons = {401: "Unauthorized", 403: "Forbidden", 409: "AlreadyExists"}
        message = {409: f'jobs.batch.volcano.sh "{name}" already exists', 403: "forbidden", 401: "Unauthorized"}
        body = {"kind": "Status", "status": "Failure", "reason": reasons[self.status], "message": message[self.status]}
        answer_json(self, self.status, body)

    def log_message(self, *args):
        pass


@pytest.fixture
def api_server():
    """A TLS server on loopback with a certificate for 127.0.0.1 from a CA of the test's own."""
    authority = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Refusing)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}", authority
    server.shutdown()


@pytest.mark.parametrize(
    ("status", "credential", "words"),
    [
        (409, f"print({TOKEN!r})", "already exists; delete it first (kubectl -n"),
        (403, f"print({TOKEN!r})", "your identity needs an EKS access entry"),
        (401, FAILING_CREDENTIALS, "the credential command failed: exec: process returned 1. Unable to locate credentials"),
    ],
    ids=["exists", "forbidden", "no-token"],
)
def test_a_job_the_api_server_refuses_is_one_line_naming_the_fix(tmp_path, api_server, status, credential, words):
    server, authority = api_server
    Refusing.status = status
    result = launch("--outputs", str(outputs_with_kubeconfig(tmp_path, server, credential, authority)))
    line = the_one_line(result)
    assert f"({status} " in line and words in line, line


def test_a_certificate_that_does_not_verify_is_named(tmp_path, api_server):
    server, _ = api_server
    result = launch("--outputs", str(outputs_with_kubeconfig(tmp_path, server, f"print({TOKEN!r})", trustme.CA())))
    assert "certificate did not verify" in the_one_line(result)
