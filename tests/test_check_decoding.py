"""``preflight check`` decodes each resource's properties once for all policies
(``trainium_eks.sdk_internals.shared_property_decoding``); what every policy reports must be what the policy SDK's
own decoding, once per policy, makes it report, on plans where policies fire, in preview and with a remediation."""

from __future__ import annotations

import contextlib

import pytest
from mutation_case import plan_of, resource
from pulumi_policy import StackValidationPolicy
from test_policies import MUTATIONS, findings

from policies.packs import PACKS
from policies.rules.security import ECR
from preflight import check
from trainium_eks import sdk_internals


def _first_case_per_pack_and_kind() -> list:
    """One firing case per pack and policy kind (resource, stack), so both of the servicer's paths are compared."""
    chosen = {}
    for pack in PACKS:
        for policy in pack.policies:
            kind = "stack" if isinstance(policy, StackValidationPolicy) else "resource"
            if (pack.name, kind) not in chosen and MUTATIONS.get(policy.name):
                chosen[pack.name, kind] = pytest.param(MUTATIONS[policy.name][0], id=f"{pack.name}-{kind}-{policy.name}")
    assert {kind for _, kind in chosen} == {"stack", "resource"}
    return list(chosen.values())


def _both(monkeypatch, plan: dict, config: dict | None = None) -> tuple[check.CheckResult, check.CheckResult]:
    shared = findings(plan, config)
    with monkeypatch.context() as patched:
        patched.setattr(check, "shared_property_decoding", contextlib.nullcontext)  # the SDK's decoding, per policy
        per_policy = findings(plan, config)
    return shared, per_policy


@pytest.mark.parametrize("case", _first_case_per_pack_and_kind())
def test_shared_decoding_reports_what_the_sdk_reports(monkeypatch, case):
    plan = plan_of(case.stack, **case.overrides)
    case.mutate(plan)
    shared, per_policy = _both(monkeypatch, plan)
    assert shared.mandatory, "the case fires no mandatory policy, so it compares nothing"
    assert shared.violations == per_policy.violations


def test_shared_decoding_reports_unknowns_as_the_sdk_does(monkeypatch):
    plan = plan_of("staging", preview=True)
    ecr = resource(plan, ECR)
    ecr["inputs"]["imageTagMutability"] = check.UNKNOWN  # values a preview cannot know, which the policy reads:
    ecr["inputs"]["imageScanningConfiguration"]["scanOnPush"] = check.UNKNOWN  # the first passes, the second fails
    shared, per_policy = _both(monkeypatch, plan)
    assert [v.message for v in shared.mandatory if v.urn == ecr["urn"]], "the unknown scanOnPush was not judged"
    assert shared.violations == per_policy.violations


def test_shared_decoding_remediates_as_the_sdk_does(monkeypatch):
    plan = plan_of("dev")  # dev remediates missing tags
    del resource(plan, ECR)["inputs"]["tags"]["owner"]
    shared, per_policy = _both(monkeypatch, plan)
    assert shared.remediations, "no remediation ran, so the comparison proves nothing"
    assert (shared.remediations, shared.violations) == (per_policy.remediations, per_policy.violations)


def test_the_sdk_decodes_as_it_did_once_the_check_ends():
    before = sdk_internals.servicer_decoding()
    with pytest.raises(RuntimeError), sdk_internals.shared_property_decoding():
        assert all(now is not then for now, then in zip(sdk_internals.servicer_decoding(), before, strict=True))
        raise RuntimeError("a policy failed")
    assert sdk_internals.servicer_decoding() == before
