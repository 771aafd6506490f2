"""The deploy path: each stack's CI runner lives in its private subnets with least privilege, the cluster admits
it, and the workflows run every stack's preview and up on it (the bootstrap step that creates it first:
test_bootstrap.py)."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest
import workflows
from support import STACKS, evaluate, one, settings

from preflight.stackfile import REPO_ROOT
from trainium_eks import tokens
from trainium_eks.config import parse

pytestmark = pytest.mark.stacks

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
# The only calls a VPC build makes that cannot be scoped by resource (CodeBuild User Guide, VPC network interfaces).
UNSCOPED_NETWORK_INTERFACE_CALLS = {"ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface"}


# prod as a fixture of a private stack, whatever its shipped file says: the workflows' cases below are about prod.
PRIVATE_PROD = {"endpointPublicAccess": False, "publicAccessCidrs": []}


def configs(**prod_overrides) -> dict:
    return {stack: parse(settings(stack, **(prod_overrides if stack == "prod" else {})).config, stack=stack) for stack in STACKS}


def runner_of(plan):
    return one(plan.find(tokens.CODEBUILD_PROJECT))


def service_policy(plan) -> dict:
    role_policy = one([p for p in plan.find(tokens.IAM_ROLE_POLICY) if "deploy-runner" in p.name])
    return json.loads(role_policy.inputs["policy"])


def test_the_runner_builds_in_the_private_subnets_of_the_stacks_vpc(stack_plan):
    vpc = runner_of(stack_plan).inputs["vpcConfig"]
    assert vpc["subnets"] == stack_plan.outputs["privateSubnetIds"]
    assert vpc["vpcId"] == stack_plan.outputs["vpcId"]


def test_the_runner_takes_queued_workflow_jobs_of_the_configured_repository(stack_plan):
    cfg = parse(settings(stack_plan.stack).config, stack=stack_plan.stack).deploy_runner
    project = runner_of(stack_plan)
    assert project.inputs["name"] == cfg.project_name
    assert project.inputs["source"]["location"] == f"https://github.com/{cfg.github_repository}.git"
    assert project.inputs["source"]["auth"] == {"type": "CODECONNECTIONS", "resource": cfg.connection_arn}
    webhook = one(stack_plan.find(tokens.CODEBUILD_WEBHOOK))
    assert webhook.inputs["projectName"] == cfg.project_name
    assert webhook.inputs["filterGroups"] == [{"filters": [{"type": "EVENT", "pattern": "WORKFLOW_JOB_QUEUED"}]}]


def test_the_runner_role_can_only_log_place_its_interfaces_and_use_the_connection(stack_plan):
    project = runner_of(stack_plan)
    cfg = parse(settings(stack_plan.stack).config, stack=stack_plan.stack).deploy_runner
    statements = service_policy(stack_plan)["Statement"]
    by_sid = {s["Sid"]: s for s in statements}
    assert set(by_sid) == {"Logs", "VpcNetworkInterfaces", "NetworkInterfacesInTheseSubnets", "GitHubConnection"}
    assert all(s["Effect"] == "Allow" for s in statements)
    assert by_sid["Logs"]["Resource"].endswith(f":log-group:/aws/codebuild/{cfg.project_name}:log-stream:*")
    unscoped = set(by_sid["VpcNetworkInterfaces"]["Action"])
    assert {a for a in unscoped if not a.startswith("ec2:Describe")} == UNSCOPED_NETWORK_INTERFACE_CALLS
    interfaces = by_sid["NetworkInterfacesInTheseSubnets"]
    assert interfaces["Condition"]["StringEquals"] == {"ec2:AuthorizedService": "codebuild.amazonaws.com"}
    subnets = [arn.rsplit("/", 1)[1] for arn in interfaces["Condition"]["ArnLike"]["ec2:Subnet"]]
    assert subnets == project.inputs["vpcConfig"]["subnets"]
    assert by_sid["GitHubConnection"]["Resource"] == cfg.connection_arn
    # No managed policy on top: the deploy permissions come from the workflow's OIDC role.
    role = one([r for r in stack_plan.find(tokens.IAM_ROLE) if "deploy-runner" in r.name])
    assert not [a for a in stack_plan.find(tokens.IAM_ROLE_POLICY_ATTACHMENT) if role.name in a.inputs["role"]]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "codebuild.amazonaws.com"}]
    # Only this project of this account may have CodeBuild assume it (confused deputy prevention).
    (condition,) = [s["Condition"] for s in trust]
    source = condition["ArnLike"]["aws:SourceArn"]
    assert source.endswith(f":project/{project.inputs['name']}") and source.split(":")[3] == stack_plan.outputs["region"]
    assert source.split(":")[4] == condition["StringEquals"]["aws:SourceAccount"]


def test_the_runner_accepts_no_connection_and_calls_out_over_https_only(stack_plan):
    (group_id,) = runner_of(stack_plan).inputs["vpcConfig"]["securityGroupIds"]
    rules = stack_plan.find(tokens.VPC_SECURITY_GROUP_INGRESS_RULE) + stack_plan.find(tokens.VPC_SECURITY_GROUP_EGRESS_RULE)
    on_runner = [r for r in rules if r.inputs["securityGroupId"] == group_id]
    assert [(r.type, r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"]) for r in on_runner] == [
        (tokens.VPC_SECURITY_GROUP_EGRESS_RULE, "tcp", 443.0, 443.0)
    ]


def test_the_cluster_admits_the_runner_on_443_before_anything_uses_the_api(stack_plan):
    (group_id,) = runner_of(stack_plan).inputs["vpcConfig"]["securityGroupIds"]
    rule = one(
        [
            r
            for r in stack_plan.find(tokens.VPC_SECURITY_GROUP_INGRESS_RULE)
            if r.inputs.get("referencedSecurityGroupId") == group_id
        ]
    )
    assert rule.inputs["securityGroupId"] == stack_plan.outputs["clusterSecurityGroupId"]
    assert (rule.inputs["ipProtocol"], rule.inputs["fromPort"], rule.inputs["toPort"]) == ("tcp", 443.0, 443.0)
    provider = one(stack_plan.find("pulumi:providers:kubernetes"))
    assert rule.urn in provider.dependencies


def test_a_stack_without_runner_keys_has_no_runner():
    plan = evaluate("dev", ciRunnerRepository="", ciRunnerConnectionArn="")
    assert not plan.find(tokens.CODEBUILD_PROJECT)
    assert not [r for r in plan.find(tokens.VPC_SECURITY_GROUP_INGRESS_RULE) if "api-from-client" in r.name]


# --- the workflows: every stack's preview and up run on that stack's runner ------------------------------------


def test_every_stack_is_previewed_and_deployed_on_its_own_in_vpc_runner():
    jobs = workflows.stack_jobs(workflows.load(WORKFLOWS), "trainium-eks")
    assert {(j.stack, j.command) for j in jobs} == {(s, c) for s in STACKS for c in ("preview", "up")}
    assert workflows.unreachable(jobs, configs()) == []


@pytest.mark.parametrize(
    ("workflow", "old", "new", "expected"),
    [
        # prod's preview moved to a GitHub-hosted runner
        (
            "pull-request.yml",
            'runner: "codebuild-trainium-eks-prod-deploy-',
            'runner: "ubuntu-24.04", unused: "',
            "pull-request.yml preview: `pulumi preview` of prod runs on ubuntu-24.04",
        ),
        # prod's up handed staging's runner: another VPC
        (
            "deploy.yml",
            '      region: us-west-2\n      runner: "codebuild-trainium-eks-prod-',
            '      region: us-west-2\n      runner: "codebuild-trainium-eks-staging-',
            "deploy.yml prod -> pulumi-up.yml up: `pulumi up` of prod runs on codebuild-trainium-eks-staging-deploy",
        ),
        # the reusable workflow ignores the runner it is given
        ("pulumi-up.yml", "runs-on: ${{ inputs.runner }}", "runs-on: ubuntu-24.04", "`pulumi up` of prod runs on ubuntu-24.04"),
    ],
    ids=["preview-on-github-hosted", "up-on-another-stacks-runner", "reusable-ignores-runner"],
)
def test_a_private_stack_deployed_from_outside_its_vpc_fails(tmp_path, workflow, old, new, expected):
    directory = tmp_path / "workflows"
    shutil.copytree(WORKFLOWS, directory)
    text = (directory / workflow).read_text()
    assert old in text
    (directory / workflow).write_text(text.replace(old, new))
    problems = workflows.unreachable(workflows.stack_jobs(workflows.load(directory), "trainium-eks"), configs(**PRIVATE_PROD))
    assert any(expected in p and "outside the stack's VPC" in p for p in problems), problems


def test_a_private_stack_without_a_runner_fails():
    jobs = workflows.stack_jobs(workflows.load(WORKFLOWS), "trainium-eks")
    problems = workflows.unreachable(jobs, configs(**PRIVATE_PROD, ciRunnerRepository="", ciRunnerConnectionArn=""))
    assert len(problems) == 2  # prod's preview and up
    assert all("of prod, whose API endpoint is private" in p and "set ciRunnerRepository" in p for p in problems)


@pytest.mark.parametrize("service", ["codeconnections", "codestar-connections"])
def test_the_connection_actions_carry_the_connection_arns_own_service_prefix(service):
    arn = f"arn:aws:{service}:us-west-2:111122223333:connection/9c8b7a6d-5e4f-4d3c-8b2a-1f0e9d8c7b6a"
    (statement,) = [
        s for s in service_policy(evaluate("prod", ciRunnerConnectionArn=arn))["Statement"] if s["Sid"] == "GitHubConnection"
    ]
    assert {action.split(":")[0] for action in statement["Action"]} == {service}
    assert statement["Resource"] == arn


# --- the workflow reader: every shape that runs Pulumi is read, and what it cannot resolve is a finding -------

PROD_RUNNER = "codebuild-trainium-eks-prod-deploy-${{ github.run_id }}-${{ github.run_attempt }}"
ACTION_UP = """
  - uses: pulumi/actions@v7
    with:
      command: up
      stack-name: {stack}
"""


def workflow_file(job: str, on: str = "push") -> str:
    """A workflow of one job ``deploy`` whose body is ``job`` (YAML, indented as a job's keys)."""
    return f"on: {on}\njobs:\n  deploy:\n{textwrap.indent(textwrap.dedent(job).strip(), '    ')}\n"


def steps_on(runs_on: str, *steps: str) -> str:
    return f"runs-on: {runs_on}\nsteps:" + "".join(steps)


def run_step(script: str) -> str:
    return f"\n  - run: {script}\n"


def problems_in(tmp_path, files: dict[str, str]) -> list[str]:
    directory = tmp_path / "workflows"
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text)
    return workflows.unreachable(workflows.stack_jobs(workflows.load(directory), "trainium-eks"), configs())


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        # 1. a plain matrix axis
        (
            "strategy: {matrix: {stack: [prod]}}\n"
            + steps_on("ubuntu-24.04", ACTION_UP.format(stack="org/trainium-eks/${{ matrix.stack }}")),
            "deploy.yml deploy: `pulumi up` of prod runs on ubuntu-24.04",
        ),
        # 2. a bare stack name
        (steps_on("ubuntu-24.04", ACTION_UP.format(stack="prod")), "deploy.yml deploy: `pulumi up` of prod runs on ubuntu-24.04"),
        # 3. the Pulumi CLI in run: scripts, with -s, with --stack after a global flag, with no stack at all
        (steps_on("ubuntu-24.04", run_step("pulumi up -s prod --yes")), "`pulumi up` of prod runs on ubuntu-24.04"),
        (
            steps_on("ubuntu-24.04", run_step("|\n      make deps\n      pulumi --cwd . preview --stack prod")),
            "`pulumi preview` of prod runs on ubuntu-24.04",
        ),
        (
            steps_on(PROD_RUNNER, "\n  - env: {PULUMI_STACK: prod}\n    run: pulumi up --yes\n"),
            "`pulumi up` of the selected stack, which is none of the stacks",
        ),
        # 5. runs-on as a group, a group without labels, a list, an expression nothing resolves
        (steps_on("{group: deploy, labels: [ubuntu-24.04]}", run_step("pulumi up -s prod")), "runs on ubuntu-24.04, outside"),
        (steps_on("{group: deploy}", run_step("pulumi up -s prod")), "of prod runs on no runner label, outside"),
        (steps_on("[self-hosted, linux]", run_step("pulumi up -s prod")), "of prod runs on self-hosted, linux, outside"),
        (steps_on("${{ matrix.runner }}", run_step("pulumi up -s prod")), "of prod runs on ${{ matrix.runner }}, outside"),
        # a stack that is none of ours, another project's, or one only a caller could name
        (steps_on(PROD_RUNNER, run_step("pulumi up -s qa")), "of qa, which is none of the stacks"),
        (steps_on(PROD_RUNNER, ACTION_UP.format(stack="org/other/prod")), "of org/other/prod, which is none of the stacks"),
        (steps_on(PROD_RUNNER, run_step("pulumi up -s ${{ inputs.stack }}")), "of ${{inputs.stack}}, which is none of"),
    ],
    ids=[
        "matrix-axis",
        "bare-stack-name",
        "cli-up-s",
        "cli-preview-stack-after-global-flag",
        "cli-without-stack",
        "runs-on-group",
        "runs-on-group-without-labels",
        "runs-on-list",
        "runs-on-unresolved",
        "unknown-stack",
        "another-projects-stack",
        "stack-from-inputs-without-caller",
    ],
)
def test_a_pulumi_run_the_check_cannot_place_on_the_stacks_runner_is_a_finding(tmp_path, job, expected):
    problems = problems_in(tmp_path, {"deploy.yml": workflow_file(job)})
    assert any(expected in p for p in problems), problems


def test_a_callers_own_matrix_is_expanded_into_the_reusable_workflow(tmp_path):
    caller = """
        uses: ./.github/workflows/pulumi-up.yml
        strategy: {matrix: {stack: [prod]}}
        with: {stack: "${{ matrix.stack }}", region: us-west-2, runner: ubuntu-24.04}
        """
    problems = problems_in(
        tmp_path, {"deploy.yml": workflow_file(caller), "pulumi-up.yml": (WORKFLOWS / "pulumi-up.yml").read_text()}
    )
    assert "deploy.yml deploy -> pulumi-up.yml up: `pulumi up` of prod runs on ubuntu-24.04, outside" in "\n".join(problems)


def test_a_yaml_workflow_is_read_too(tmp_path):
    problems = problems_in(tmp_path, {"deploy.yaml": workflow_file(steps_on("ubuntu-24.04", ACTION_UP.format(stack="prod")))})
    assert [p.split(":")[0] for p in problems] == ["deploy.yaml deploy"]


def test_the_matrix_is_its_axes_minus_exclude_with_include_added(tmp_path):
    job = workflow_file(
        "strategy:\n  matrix:\n    stack: [dev, prod]\n    exclude: [{stack: dev}]\n"
        "    include: [{stack: prod, runner: ubuntu-24.04}, {stack: staging, runner: ubuntu-22.04}]\n"
        + steps_on("${{ matrix.runner }}", run_step("pulumi preview -s ${{ matrix.stack }}"))
    )
    # dev is excluded; prod gets its runner added; staging matches no combination, so it becomes one of its own.
    assert [p.split(" runs on ")[0] for p in problems_in(tmp_path, {"deploy.yml": job})] == [
        "deploy.yml deploy: `pulumi preview` of prod",
        "deploy.yml deploy: `pulumi preview` of staging",
    ]


def test_a_runner_label_matches_whatever_the_whitespace_inside_its_expressions(tmp_path):
    label = "codebuild-trainium-eks-prod-deploy-${{github.run_id}}-${{  github.run_attempt}}"
    assert (
        problems_in(tmp_path, {"deploy.yml": workflow_file(steps_on(label, ACTION_UP.format(stack="org/trainium-eks/prod")))})
        == []
    )


def test_a_workflow_the_check_cannot_read_is_one_clear_error(tmp_path):
    with pytest.raises(workflows.WorkflowError, match=r"deploy\.yml: not a readable workflow \(jobs\.deploy\.steps"):
        problems_in(tmp_path, {"deploy.yml": "on: push\njobs:\n  deploy:\n    runs-on: x\n    steps: {run: ls}\n"})


def test_a_call_to_a_missing_workflow_is_one_clear_error(tmp_path):
    with pytest.raises(workflows.WorkflowError, match="deploy.yml deploy: calls ./.github/workflows/gone.yml"):
        problems_in(tmp_path, {"deploy.yml": workflow_file("uses: ./.github/workflows/gone.yml")})
