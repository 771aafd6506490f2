"""The team example evaluates under the SDK's mocks against the outputs of a real platform plan (staging, which
declares two teams): it builds its objects in the team's workspace, and stops in one line for a team the platform
does not declare or outputs it cannot read. It installs the package from the release tag the CHANGELOG records."""

from __future__ import annotations

import gc
import json
import re
import runpy
import tomllib

import pulumi
import pytest
from support import evaluate

from preflight.stackfile import REPO_ROOT
from trainium_eks import sdk_internals
from trainium_eks.contract import CONTRACT_VERSION

EXAMPLE = REPO_ROOT / "examples" / "team-workspace"
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


def run_example(outputs: dict, team: str = "nlp") -> dict:
    monitor_mocks = PlatformStackMocks(outputs)
    monitor = sdk_internals.MockMonitor(monitor_mocks)
    sdk_internals.reset_root_resource()
    pulumi.runtime.set_mocks(monitor_mocks, project="team-workspace", stack="dev", preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(
        {"team-workspace:platformStack": "organization/trainium-eks/staging", "team-workspace:team": team}
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


def test_the_team_program_builds_in_its_workspace(platform_outputs):
    resources = run_example(platform_outputs)
    (nlp,) = [t for t in platform_outputs["teams"] if t["name"] == "nlp"]
    created = {key: state for key, state in resources.items() if not key[0].startswith("pulumi:")}
    assert {state["metadata"]["namespace"] for state in created.values()} == {nlp["namespace"]}
    defaults = resources[("kubernetes:core/v1:ConfigMap", "job-defaults")]["data"]
    assert defaults["queue"] == nlp["queue"] and defaults["claimName"] == nlp["claimName"]
    assert defaults["etcdEndpoint"] == platform_outputs["etcdEndpoint"]
    provider = resources[("pulumi:providers:kubernetes", "nlp-workspace")]
    assert provider["namespace"] == nlp["namespace"]  # what the program forgets to place lands in the team's namespace


@pytest.mark.parametrize(
    ("team", "edit", "words"),
    [
        ("search", lambda o: None, "declares no team 'search' (teams: nlp, vision); add it to the platform stack's teams"),
        ("nlp", lambda o: o.pop("teams"), "teams: missing"),
        ("nlp", lambda o: o.update(contractVersion="1.4.0"), "publishes 1.4.0, this consumer needs 1.5.0"),
        ("nlp", lambda o: o.update(contractVersion="2.0.0"), "publishes 2.0.0, this consumer needs 1.5.0"),
    ],
)
def test_what_the_platform_did_not_grant_fails_in_one_line(platform_outputs, team, edit, words):
    outputs = dict(platform_outputs)
    edit(outputs)
    with pytest.raises(Exception, match=re.escape(words)) as failure:
        run_example(outputs, team)
    assert "\n" not in str(failure.value).strip()


def test_the_example_installs_the_package_from_its_release_tag():
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    requirements = (EXAMPLE / "requirements.txt").read_text()
    assert f"trainium-eks[team] @ git+https://github.com/example-org/trainium-eks@v{version}" in requirements
    assert "-e " not in requirements  # not a sibling checkout
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text()
    (entry,) = re.findall(rf"^## {re.escape(version)} .*$", changelog, re.MULTILINE)
    assert f"contract {CONTRACT_VERSION}" in entry
