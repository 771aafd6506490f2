"""Policy packs: every shipped stack passes (marker ``stacks``); every policy catches a minimal mutation of a fixture
stack's plan (tests/fixture_stacks: copies of the shipped stacks that a user's edits do not reach).

The mutation cases are one table keyed by policy name (``tests/policy_mutations.py``, with
``tests/workload_mutations.py``, ``tests/elastic_mutations.py``, ``tests/deploy_path_mutations.py``,
``tests/team_mutations.py`` and the other ``tests/*_mutations.py``, built from ``tests/mutation_case.py``), and its keys
are exactly the packs' policies, so a policy without a mutation case (or a case for no policy) fails the suite.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from cleanup_mutations import CLEANUP_CASES, SPARED_CLEANUP
from deploy_path_mutations import ACCESS_PATH_CASES, DEPLOY_PATH_CASES
from elastic_mutations import ELASTIC_CASES, SPARED_ELASTIC
from first_step_mutations import FIRST_STEP_CASES, SPARED_FIRST_STEP
from generation_mutations import GENERATION_CASES
from limits_mutations import LIMITS_CASES
from mutation_case import Case, plan_of, resource, trainium_node_group
from policy_mutations import MANAGED_GROUP_AND_PLATFORM_CASES, SPARED_MANAGED
from support import FIXTURE_STACKS, STACKS, cached_plan
from team_mutations import TEAM_CASES
from upgrade_mutations import UPGRADE_CASES
from workload_mutations import WORKLOAD_CASES

from policies.packs import PACKS
from policies.rules.security import ECR
from preflight import check

WHOLE_FLOAT = re.compile(r"(?<![\d.])\d+\.0(?![\d.])")
ALL_POLICIES = {p.name for pack in PACKS for p in pack.policies}


def merged(*tables: dict[str, list[Case]]) -> dict[str, list[Case]]:
    together: dict[str, list[Case]] = {}
    for table in tables:
        for policy, cases in table.items():
            together.setdefault(policy, []).extend(cases)
    return together


MUTATIONS = merged(
    MANAGED_GROUP_AND_PLATFORM_CASES,
    WORKLOAD_CASES,
    ELASTIC_CASES,
    DEPLOY_PATH_CASES,
    ACCESS_PATH_CASES,
    TEAM_CASES,
    UPGRADE_CASES,
    FIRST_STEP_CASES,
    LIMITS_CASES,
    GENERATION_CASES,
    CLEANUP_CASES,
)
SPARED = merged(SPARED_MANAGED, SPARED_ELASTIC, SPARED_FIRST_STEP, SPARED_CLEANUP)


def fixture_policy_config(stack: str) -> dict:
    """The policy config of the fixture stack named ``stack`` (tests/fixture_stacks)."""
    return check.load_policy_config(stack, FIXTURE_STACKS / "policy-config" / f"{stack}.json")


def findings(plan: dict, config: dict | None = None) -> check.CheckResult:
    """The packs' findings on ``plan``: a fixture stack's (``plan_of``) with its policy config unless ``config`` is given."""
    policy_config = fixture_policy_config(plan["stack"]) if config is None else config
    return check.check_plan(plan, policy_config, f"{plan['stack']}.json")


def _cases(table: dict[str, list[Case]]) -> list:
    return [pytest.param(policy, case, id=f"{policy}-{case.id}") for policy, cases in table.items() for case in cases]


def _mutated(case: Case) -> dict:
    plan = plan_of(case.stack, **case.overrides)
    case.mutate(plan)
    return plan


@pytest.mark.stacks
@pytest.mark.parametrize("preview", [False, True], ids=["update", "preview"])
@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_pass_every_policy(stack, preview):
    result = findings(cached_plan(stack, preview).to_json(), check.load_policy_config(stack))
    assert result.violations == [], [(v.policy, v.message) for v in result.violations]


@pytest.mark.parametrize(("policy", "case"), _cases(MUTATIONS))
def test_policy_catches_its_mutation(policy, case):
    plan = _mutated(case)
    result = findings(plan)
    hits = [v for v in result.violations if v.policy == policy and v.enforcement_level == "mandatory"]
    assert hits, f"{policy} did not fire: {[(v.policy, v.message) for v in result.violations]}"
    for word in case.words:
        assert any(word in h.message for h in hits), (word, [h.message for h in hits])
    types = {r["urn"]: r["type"] for r in plan["resources"]}
    assert case.blames is None or {types.get(h.urn) for h in hits} == {case.blames}, [h.urn for h in hits]
    assert case.count is None or len(hits) == case.count, [h.message for h in hits]
    # The engine carries numbers as floats; a message shows a whole one as a whole number ("2 hops", not "2.0 hops").
    assert not [h.message for h in hits if WHOLE_FLOAT.search(h.message)]


@pytest.mark.parametrize(("policy", "case"), _cases(SPARED))
def test_policy_spares_what_it_allows(policy, case):
    result = findings(_mutated(case))
    assert result.violations == [], [(v.policy, v.message) for v in result.violations]


def test_mutation_table_covers_exactly_the_packs_policies():
    assert all(MUTATIONS.values()), [policy for policy, cases in MUTATIONS.items() if not cases]
    assert ALL_POLICIES - set(MUTATIONS) == set(), "policies without a mutation case"
    assert set(MUTATIONS) - ALL_POLICIES == set(), "mutation cases for no policy"
    assert set(SPARED) <= ALL_POLICIES


def test_missing_tags_are_remediated_where_the_stack_config_says_so():
    plan = plan_of("dev")  # dev remediates with its default tags
    repository = resource(plan, ECR)
    del repository["inputs"]["tags"]["owner"]
    result = findings(plan)
    assert not result.violations
    assert [(r.policy, r.urn) for r in result.remediations] == [("required-tags", repository["urn"])]


# ---- coverage and configuration ------------------------------------------------------------------------


def test_every_policy_is_documented():
    guide = (Path(__file__).resolve().parents[1] / "docs" / "policies.md").read_text()
    assert {name for name in ALL_POLICIES if f"`{name}`" not in guide} == set()


def test_workflows_pair_every_pack_with_the_stack_config():
    root = Path(__file__).resolve().parents[1]
    pulumi_steps = [
        (workflow.name, step)
        for workflow in (root / ".github" / "workflows").glob("*.yml")
        for job in yaml.safe_load(workflow.read_text())["jobs"].values()
        for step in job.get("steps", [])
        if str(step.get("uses", "")).startswith("pulumi/actions")
    ]
    assert {step["with"]["command"] for _, step in pulumi_steps} == {"preview", "up"}
    for workflow, step in pulumi_steps:
        packs, configs = step["with"]["policyPacks"].split(), step["with"]["policyPackConfigs"].splitlines()
        assert sorted(packs) == sorted(f"policies/{p.name}" for p in PACKS), workflow
        assert len(configs) == len(packs) and all(c.startswith("policies/config/") for c in configs), workflow


@pytest.mark.stacks
def test_policy_config_files_are_valid_for_every_pack():
    for stack in STACKS:
        config = check.load_policy_config(stack)
        unknown = set(config) - ALL_POLICIES - {"all"}
        assert not unknown, f"policies/config/{stack}.json names unknown policies {unknown}"
        for pack in PACKS:
            check.reconcile(pack, config, stack)


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"monthly-cost-budget": {"maxMonthlyUsd": "lots"}}, "monthly-cost-budget.maxMonthlyUsd"),
        ({"monthly-cost-budget": {"maxMonthyUsd": 10}}, "Additional properties"),
        ({"required-tags": "sometimes"}, "not an enforcement level"),
    ],
)
def test_invalid_policy_config_is_rejected(config, words):
    with pytest.raises(check.PolicyConfigError, match=words):
        for pack in PACKS:
            check.reconcile(pack, config, "test.json")


def test_enforcement_levels_follow_the_config():
    plan = plan_of("prod")
    trainium_node_group(plan)["inputs"]["amiType"] = "AL2023_x86_64_STANDARD"
    advisory = findings(plan, config={**fixture_policy_config("prod"), "trainium-neuron-ami": "advisory"}).violations
    assert [(v.policy, v.enforcement_level) for v in advisory] == [("trainium-neuron-ami", "advisory")]
    assert not findings(plan, config={"all": "disabled"}).violations


def test_mutations_do_not_leak_into_the_shared_plans():
    snapshot = copy.deepcopy(cached_plan("dev", False, fixture=True).to_json())
    for case in (c for cases in MUTATIONS.values() for c in cases if c.stack == "dev" and not c.overrides):
        _mutated(case)
    assert cached_plan("dev", False, fixture=True).to_json() == snapshot, "a mutation edited the session's shared plan"
