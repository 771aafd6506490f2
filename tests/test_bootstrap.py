"""The deploy runner's bootstrap step: a new private stack's first `pulumi up`, from outside its VPC, creates the
network and the runner under the names the whole platform gives them, and nothing that needs the cluster."""

from __future__ import annotations

import pytest
from support import cached_plan, evaluate, settings

from components.deploy_runner import ExistingClusterError
from preflight.mocks import PlatformMocks
from preflight.stackfile import REPO_ROOT
from trainium_eks import tokens
from trainium_eks.config import BOOTSTRAP_VARIABLE, ConfigError, bootstrap_step, parse

pytestmark = pytest.mark.stacks

NEEDS_THE_CLUSTER = (tokens.EKS_COMPONENT_CLUSTER, tokens.EKS_NODE_GROUP, tokens.EKS_ADDON)


def test_the_step_creates_the_runner_and_its_way_out_and_nothing_that_needs_the_cluster(monkeypatch):
    whole = {r.urn: r for r in cached_plan("prod", True).resources}  # before the variable is set
    monkeypatch.setenv(BOOTSTRAP_VARIABLE, "deploy-runner")
    step = evaluate("prod", preview=True)
    kinds = {r.type for r in step.resources}
    assert {tokens.CODEBUILD_PROJECT, tokens.CODEBUILD_WEBHOOK, tokens.EC2_VPC, tokens.EC2_NAT_GATEWAY} <= kinds
    assert not [k for k in kinds if k.startswith("kubernetes:") or k in NEEDS_THE_CLUSTER or "providers:kubernetes" in k]
    # The whole platform's first run on the runner adopts each of them as it is: same URN, same inputs.
    for resource in step.resources:
        assert resource.urn in whole, resource.urn
        assert resource.inputs == whole[resource.urn].inputs, resource.urn
    assert "contractVersion" not in step.outputs  # consumers refuse the stack until the whole platform runs
    assert step.outputs["deployRunnerProject"] == whole_runner_name(whole)


def whole_runner_name(resources: dict) -> str:
    (project,) = [r for r in resources.values() if r.type == tokens.CODEBUILD_PROJECT]
    return project.inputs["name"]


class ClusterExists(PlatformMocks):
    def _clusters(self, args):
        return {"id": self.region, "names": [self.config.cluster.name]}


def test_the_step_refuses_a_stack_whose_cluster_exists(monkeypatch):
    """Registering only the runner on a stack that has its platform would delete the rest."""
    monkeypatch.setenv(BOOTSTRAP_VARIABLE, "deploy-runner")
    with pytest.raises(ExistingClusterError, match="exists already") as raised:
        evaluate("prod", mocks_factory=ClusterExists)
    assert "\n" not in str(raised.value)


def test_the_whole_platform_runs_whatever_eks_has():
    assert cached_plan("prod", False).outputs["contractVersion"]
    assert evaluate("prod", mocks_factory=ClusterExists).outputs["contractVersion"]  # the variable is unset


@pytest.mark.parametrize(
    ("value", "overrides", "words"),
    [
        ("yes", {}, "'yes' is not a bootstrap step; set it to deploy-runner or unset it"),
        ("deploy-runner", {"ciRunnerRepository": "", "ciRunnerConnectionArn": ""}, "the stack has no deploy runner"),
    ],
)
def test_a_bad_bootstrap_request_is_one_line_naming_the_variable(value, overrides, words):
    config = parse(settings("prod", **overrides).config, stack="prod")
    with pytest.raises(ConfigError) as raised:
        bootstrap_step({BOOTSTRAP_VARIABLE: value}, config)
    assert str(raised.value).startswith(f"{BOOTSTRAP_VARIABLE}: ") and words in str(raised.value)


def test_no_variable_no_bootstrap():
    assert bootstrap_step({}, parse(settings("prod").config, stack="prod")) is False


def test_the_readme_documents_the_step():
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"{BOOTSTRAP_VARIABLE}=deploy-runner pulumi up --stack prod" in readme
