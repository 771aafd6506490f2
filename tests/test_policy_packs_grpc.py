"""Each pack's __main__.py starts as a CrossGuard analyzer and answers over the analyzer gRPC protocol."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2, struct_pb2
from support import evaluate

from policies.packs import PACKS, SECURITY_BASELINE
from trainium_eks.sdk_internals import analyzer_pb2, analyzer_pb2_grpc

pytestmark = pytest.mark.stacks


@contextlib.contextmanager
def served(pack):
    """Start the pack's __main__.py as the CLI would and connect to the port it announces on stdout."""
    process = subprocess.Popen([sys.executable, str(pack.directory / "__main__.py")], stdout=subprocess.PIPE, text=True)
    try:
        port = int(process.stdout.readline().strip())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        process.kill()
        process.wait(timeout=10)


@pytest.mark.parametrize("pack", PACKS, ids=[p.name for p in PACKS])
def test_pack_lists_its_policies(pack):
    with served(pack) as stub:
        info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    assert info.name == pack.name
    # The CLI takes a Python pack's version from PulumiPolicy.yaml (the SDK itself reports 0.0.1).
    assert yaml.safe_load((pack.directory / "PulumiPolicy.yaml").read_text())["runtime"]["name"] == "python"
    assert re.fullmatch(r"\d+\.\d+\.\d+", pack.version), pack.version  # bumped when its policies change
    assert sorted(p.name for p in info.policies) == sorted(p.name for p in pack.policies)
    assert all(p.description and p.enforcementLevel == analyzer_pb2.MANDATORY for p in info.policies)
    assert info.supportsConfig


def test_served_pack_analyzes_a_resource():
    plan = evaluate("dev").to_json()
    template = next(r for r in plan["resources"] if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate")
    inputs = json.loads(json.dumps(template["inputs"]))
    inputs["metadataOptions"]["httpTokens"] = "optional"
    properties = struct_pb2.Struct()
    properties.update(inputs)
    request = analyzer_pb2.AnalyzeRequest(
        type=template["type"], properties=properties, urn=template["urn"], name=template["name"]
    )
    with served(SECURITY_BASELINE) as stub:
        response = stub.Analyze(request, timeout=30)
    assert [d.policyName for d in response.diagnostics] == ["ec2-launch-template-imdsv2-required"]
