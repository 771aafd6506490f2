"""Jobs into a private cluster: prod's API access host (closed to the network, Systems Manager only), the policy
that lets a person open a port-forwarding session on it, and `jobs.launch --api-tunnel` submitting a job through
the local end of such a session to a real TLS server that answers under the cluster endpoint's name."""

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
from support import STACKS, answer_json, cached_plan, evaluate, one, platform

from components.api_access import AMI_PARAMETER, PORT_FORWARDING_DOCUMENT, SSM_CORE_POLICY_ARN
from jobs.api_tunnel import endpoint_host
from jobs.local_etcd import free_port
from preflight.stackfile import REPO_ROOT
from trainium_eks import tokens
from trainium_eks.contract import PlatformContract

pytestmark = pytest.mark.stacks


def resources(plan, type_: str, name_part: str = "api-access") -> list:
    return [r for r in plan.find(type_) if name_part in r.name]


@functools.cache
def private_plan():
    """prod, a fixture of a private endpoint whatever its shipped file says."""
    return evaluate("prod", endpointPublicAccess=False, publicAccessCidrs=[])


@pytest.mark.parametrize("stack", STACKS)
def test_only_a_private_endpoint_gets_an_access_host(stack):
    plan = cached_plan(stack, False)
    private = not platform(stack).cluster.endpoint_public_access
    assert bool(resources(plan, tokens.EC2_INSTANCE)) == private == (plan.outputs.get("apiAccess") is not None)


def test_the_host_takes_no_inbound_connection_and_is_managed_by_systems_manager():
    plan = private_plan()
    host = one(resources(plan, tokens.EC2_INSTANCE)).inputs
    assert "keyName" not in host and host["associatePublicIpAddress"] is False
    assert host["metadataOptions"]["httpTokens"] == "required" and host["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert host["rootBlockDevice"]["encrypted"] is True
    private_subnets = set(plan.outputs["privateSubnetIds"])
    assert host["subnetId"] in private_subnets
    (group,) = resources(plan, tokens.EC2_SECURITY_GROUP)
    assert not group.inputs.get("ingress")
    ingress = plan.find(tokens.VPC_SECURITY_GROUP_INGRESS_RULE)
    assert not [r for r in ingress if group.urn in r.property_dependencies.get("securityGroupId", [])]
    (egress,) = resources(plan, tokens.VPC_SECURITY_GROUP_EGRESS_RULE)
    assert (egress.inputs["fromPort"], egress.inputs["toPort"], egress.inputs["ipProtocol"]) == (443, 443, "tcp")
    (attachment,) = resources(plan, tokens.IAM_ROLE_POLICY_ATTACHMENT)
    assert attachment.inputs["policyArn"] == SSM_CORE_POLICY_ARN  # and nothing else on its role
    assert not resources(plan, tokens.IAM_ROLE_POLICY)
    assert host["ami"].startswith("ami-") and AMI_PARAMETER.endswith("arm64")


def test_the_cluster_admits_the_host_on_443():
    plan = private_plan()
    (group,) = resources(plan, tokens.EC2_SECURITY_GROUP)
    admitted = [
        r
        for r in plan.find(tokens.VPC_SECURITY_GROUP_INGRESS_RULE)
        if group.urn in r.property_dependencies.get("referencedSecurityGroupId", []) and r.inputs["fromPort"] == 443
    ]
    assert admitted and admitted[0].inputs["securityGroupId"] == plan.outputs["clusterSecurityGroupId"]


def test_users_may_forward_a_port_through_this_host_and_end_only_their_own_sessions():
    plan = private_plan()
    region = plan.outputs["region"]
    (policy,) = resources(plan, tokens.IAM_POLICY)
    start, own = json.loads(policy.inputs["policy"])["Statement"]
    access = plan.outputs["apiAccess"]
    instance, document = start["Resource"]
    assert start["Action"] == "ssm:StartSession"
    assert instance.startswith(f"arn:aws:ec2:{region}:") and instance.endswith(f":instance/{access['hostInstanceId']}")
    assert (
        document
        == f"arn:aws:ssm:{region}::document/{PORT_FORWARDING_DOCUMENT}"
        == f"arn:aws:ssm:{region}::document/{access['document']}"
    )
    assert set(own["Action"]) == {"ssm:TerminateSession", "ssm:ResumeSession"} and "${aws:userid}-*" in own["Resource"]
    assert access["usersPolicyArn"].endswith(f":policy/{policy.inputs['name']}")


# ---- the journey: a job through the tunnel ------------------------------------------------------------------


class VolcanoApi(http.server.BaseHTTPRequestHandler):
    """Answers a Volcano Job create as the API server does; records what arrived."""

    received: list[dict] = []

    def do_POST(self):  # noqa: N802 (the handler's API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        VolcanoApi.received.append({"path": self.path, "authorization": self.headers["Authorization"], "body": body})
        answer_json(self, 201, {**body, "metadata": {**body["metadata"], "name": body["metadata"]["name"]}})

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def prod_contract() -> PlatformContract:
    return PlatformContract.from_outputs(private_plan().outputs)


@pytest.fixture
def tunnel_end(prod_contract):
    """The local end of a port-forwarding session: a TLS server with a certificate for the endpoint's name only."""
    authority = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(endpoint_host(prod_contract)).configure_cert(context)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), VolcanoApi)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    VolcanoApi.received = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], authority, names
    server.shutdown()


TOKEN = "k8s-aws-v1.test-token"


def outputs_with_kubeconfig(tmp_path, contract: PlatformContract, authority=None):
    """prod's outputs with a kubeconfig as pulumi-eks writes it; the token comes from a stand-in for `aws eks get-token`."""
    credential = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {"token": TOKEN}}
    ca = authority.cert_pem.bytes() if authority else b"unused"
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": contract.cluster_name,
                "cluster": {"server": contract.cluster_endpoint, "certificate-authority-data": base64.b64encode(ca).decode()},
            }
        ],
        "contexts": [{"name": contract.cluster_name, "context": {"cluster": contract.cluster_name, "user": "aws"}}],
        "current-context": contract.cluster_name,
        "users": [
            {
                "name": "aws",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": sys.executable,
                        "args": ["-c", f"print({json.dumps(json.dumps(credential))})"],
                    }
                },
            }
        ],
    }
    outputs = {**private_plan().outputs, "kubeconfig": json.dumps(kubeconfig)}
    path = tmp_path / "prod.json"
    path.write_text(json.dumps(outputs))
    return path


def run_module(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)


def test_a_job_reaches_the_private_cluster_through_the_tunnel_under_the_endpoints_name(tmp_path, prod_contract, tunnel_end):
    port, authority, names = tunnel_end
    outputs = outputs_with_kubeconfig(tmp_path, prod_contract, authority)
    result = run_module("jobs.launch", "--outputs", str(outputs), "--api-tunnel", str(port), "--json")
    assert result.returncode == 0, result.stderr
    (request,) = VolcanoApi.received
    assert request["path"] == f"/apis/batch.volcano.sh/v1alpha1/namespaces/{prod_contract.job_namespace}/jobs"
    assert request["authorization"] == f"Bearer {TOKEN}"  # the user's own identity, not the host's
    assert request["body"]["kind"] == "Job" and request["body"]["spec"]["queue"] == prod_contract.queues[0]
    assert names == [endpoint_host(prod_contract)]  # TLS to the endpoint's name, through 127.0.0.1
    assert json.loads(result.stdout)["job"] == request["body"]["metadata"]["name"]


def test_the_certificate_is_checked_through_the_tunnel(tmp_path, prod_contract, tunnel_end):
    port, _, _ = tunnel_end
    outputs = outputs_with_kubeconfig(tmp_path, prod_contract, trustme.CA())  # a CA that did not sign the server's
    result = run_module("jobs.launch", "--outputs", str(outputs), "--api-tunnel", str(port))
    assert result.returncode != 0 and not VolcanoApi.received


def test_without_the_tunnel_the_launcher_says_how_to_open_it(tmp_path, prod_contract):
    outputs = outputs_with_kubeconfig(tmp_path, prod_contract)
    result = run_module("jobs.launch", "--outputs", str(outputs))
    error = result.stderr.splitlines()[-1]  # after the compile-cache line
    assert result.returncode == 2 and error.startswith("error: the prod API endpoint is private"), result.stderr
    assert "python -m jobs.api_tunnel --stack prod" in error and error.endswith("add --api-tunnel 8443")


def test_a_tunnel_that_is_not_open_is_named(tmp_path, prod_contract):
    outputs = outputs_with_kubeconfig(tmp_path, prod_contract)
    port = free_port()
    result = run_module("jobs.acceptance", "neuron-devices", "--outputs", str(outputs), "--api-tunnel", str(port))
    assert result.returncode == 2 and f"nothing answers on 127.0.0.1:{port}" in result.stderr, result.stderr


def test_the_tunnel_command_is_the_documented_session(tmp_path, prod_contract):
    result = run_module("jobs.api_tunnel", "--outputs", str(outputs_with_kubeconfig(tmp_path, prod_contract)))
    assert result.returncode == 0, result.stderr
    expected = (
        f"aws ssm start-session --region {prod_contract.region} --target {prod_contract.api_access.host_instance_id} "
        f"--document-name {PORT_FORWARDING_DOCUMENT} "
        f"--parameters host={endpoint_host(prod_contract)},portNumber=443,localPortNumber=8443"
    )
    assert result.stdout.strip() == expected
    readme = (REPO_ROOT / "README.md").read_text()
    assert "python -m jobs.api_tunnel --stack prod" in readme and "--api-tunnel 8443" in readme


def test_a_public_stack_needs_no_tunnel(tmp_path):
    path = tmp_path / "staging.json"
    public = {"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}
    path.write_text(json.dumps(evaluate("staging", **public).outputs))
    result = run_module("jobs.api_tunnel", "--outputs", str(path))
    assert result.returncode == 2 and "endpoint is public" in result.stderr and result.stderr.count("\n") == 1


def test_kubectl_reaches_the_cluster_through_the_kubeconfig_the_tunnel_command_writes(tmp_path, prod_contract, tunnel_end):
    from kubernetes import client, config

    port, authority, names = tunnel_end
    path = tmp_path / "prod-tunnel.json"
    outputs = outputs_with_kubeconfig(tmp_path, prod_contract, authority)
    result = run_module("jobs.api_tunnel", "--outputs", str(outputs), "--local-port", str(port), "--kubeconfig", str(path))
    assert result.returncode == 0, result.stderr
    assert path.stat().st_mode & 0o077 == 0  # the owner's alone
    api = config.new_client_from_config(config_file=str(path))  # what kubectl reads with KUBECONFIG=path
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "by-hand"}, "spec": {}}
    client.CustomObjectsApi(api).create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", "training", "jobs", job)
    (request,) = VolcanoApi.received
    assert request["authorization"] == f"Bearer {TOKEN}" and names == [endpoint_host(prod_contract)]
