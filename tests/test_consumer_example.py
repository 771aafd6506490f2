"""The consumer example evaluates under the SDK's mocks against a platform stack's real outputs."""

from __future__ import annotations

import gc
import json
import runpy

import pulumi
import pytest
from support import evaluate

from preflight.stackfile import REPO_ROOT
from trainium_eks import sdk_internals

EXAMPLE = REPO_ROOT / "examples" / "team-namespace"
KUBECONFIG = json.dumps({"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": [], "users": []})


class PlatformStackMocks(pulumi.runtime.Mocks):
    """Answers the StackReference with the given outputs; every other resource echoes its inputs."""

    def __init__(self, outputs: dict):
        self.outputs = outputs

    def new_resource(self, args):
        if args.typ == "pulumi:pulumi:StackReference":
            return args.name, {"name": args.resource_id, "outputs": self.outputs, "secretOutputNames": ["kubeconfig"]}
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        return {}, []


def run_example(outputs: dict) -> dict:
    monitor_mocks = PlatformStackMocks(outputs)
    monitor = sdk_internals.MockMonitor(monitor_mocks)
    sdk_internals.reset_root_resource()
    pulumi.runtime.set_mocks(monitor_mocks, project="team-namespace", stack="dev", preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(
        {
            "team-namespace:platformStack": "organization/trainium-eks/staging",
            "team-namespace:team": "nlp",
            "team-namespace:neuronShare": "0.5",
        }
    )
    try:
        # Run the folder as Python runs a program folder: its __main__.py, with the folder importable.
        pulumi.runtime.test(lambda: runpy.run_path(str(EXAMPLE), run_name="__main__"))()
    finally:
        gc.collect()  # as preflight.engine.evaluate does: finalise the SDK's leftovers at a safe point
    return {
        (r.urn.rsplit("::", 2)[1].rsplit("$", 1)[-1], r.urn.rsplit("::", 1)[1]): r.state
        for r in monitor.get_registered_resources().values()
    }


@pytest.fixture(scope="module")
def platform_outputs() -> dict:
    outputs = evaluate("staging").outputs
    return {**outputs, "kubeconfig": KUBECONFIG}


def test_team_resources_are_built_from_the_contract(platform_outputs):
    resources = run_example(platform_outputs)
    queue = resources[("kubernetes:scheduling.volcano.sh/v1beta1:Queue", "team-queue")]
    provisioned = sum(g["maxSize"] * g["neuronDevicesPerNode"] for g in platform_outputs["trainiumNodeGroups"])
    assert queue["spec"]["capability"]["aws.amazon.com/neuron"] == int(provisioned * 0.5)
    volume = resources[("kubernetes:core/v1:PersistentVolume", "shared")]
    csi = volume["spec"]["csi"]
    assert csi["volumeHandle"] == platform_outputs["fsxFileSystemId"]
    assert csi["volumeAttributes"] == {"dnsname": platform_outputs["fsxDnsName"], "mountname": platform_outputs["fsxMountName"]}
    binding = resources[("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "trainer")]
    assert binding["subjects"][0]["name"] == "nlp-trainer"
    claim = resources[("kubernetes:core/v1:PersistentVolumeClaim", "shared")]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    provider = resources[("pulumi:providers:kubernetes", "platform")]
    assert provider  # built from the platform's kubeconfig


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda o: o.pop("fsxDnsName"), "fsxDnsName: missing"),
        (lambda o: o.update(contractVersion="2.0.0"), "publishes 2.0.0, this consumer needs 1.1.0"),
    ],
)
def test_missing_or_incompatible_outputs_fail_with_the_contract_version(platform_outputs, edit, words):
    outputs = dict(platform_outputs)
    edit(outputs)
    with pytest.raises(Exception, match=words):
        run_example(outputs)
