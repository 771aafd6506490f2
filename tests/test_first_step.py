"""From `pulumi up` to the first training step: the estimate `preflight plan` prints, and what it counts."""

from __future__ import annotations

import json

import pytest
from generation_mutations import TRN1_STACK, TRN2_STACK, TWO_GENERATIONS
from support import EXISTING, STACKS, evaluate, one_group, run_preflight

from plan_graph import first_step
from preflight import analysis
from trainium_eks import service_prices

pytestmark = pytest.mark.stacks


def steps(stack: str, image_gib: float | None = None, **overrides) -> dict[str, dict]:
    plan = analysis.annotate(evaluate(stack, **overrides).to_json(), image_gib)
    return {step["group"]: step for step in plan["firstStep"]}


def terms(step: dict) -> dict[str, dict]:
    return {term["what"].split(" (")[0]: term for term in step["terms"]}


@pytest.mark.parametrize("stack", STACKS)
def test_every_trainium_group_gets_a_cold_and_a_warm_estimate_that_starts_with_pulumi_up(stack):
    plan = analysis.annotate(evaluate(stack).to_json(), 10)
    for step in plan["firstStep"]:
        found = terms(step)
        assert found["`pulumi up` of a new stack"]["minutes"] == plan["deployment"]["criticalPathMinutes"]
        assert step["coldMinutes"] > step["warmMinutes"] >= plan["deployment"]["criticalPathMinutes"]
        # What a warm cache and a loaded file system save is exactly the cold-only terms.
        saved = sum(t["minutes"] or 0 for t in step["terms"] if t["coldOnly"])
        assert step["coldMinutes"] - step["warmMinutes"] == pytest.approx(saved, abs=0.11)
        assert found["graph compilation"]["coldOnly"] and not found["training image pull"]["coldOnly"]
        assert all(t["source"] for t in step["terms"])


def test_only_an_elastic_pool_waits_for_karpenter_to_launch_its_nodes():
    (elastic,) = steps("staging", **one_group("trn1.32xlarge")).values()
    (managed,) = steps("prod", **one_group("trn1.32xlarge", provisioning="managed", minSize=2, desiredSize=2, maxSize=4)).values()
    assert "Karpenter launches the nodes" in terms(elastic)
    assert "Karpenter launches the nodes" not in terms(managed)  # EKS creates a managed group with its nodes


def test_the_image_pull_is_counted_once_its_size_is_given_and_grows_with_the_nodes_sharing_the_endpoint():
    (unknown,) = steps("prod").values()
    assert terms(unknown)["training image pull"]["minutes"] is None
    assert "--image-gib" in terms(unknown)["training image pull"]["source"]
    (small,) = steps("prod", 10).values()
    (large,) = steps("prod", 20).values()
    pull = lambda step: terms(step)["training image pull"]["minutes"]  # noqa: E731
    assert pull(large) == pytest.approx(2 * pull(small))
    # prod's nodes pull together through one endpoint's 10 Gbps: each node's share shrinks as the group grows.
    nodes = small["nodes"]
    assert pull(small) == pytest.approx(nodes * 10 * first_step.GIB_BITS / (first_step.ENDPOINT_GBPS * 1e9) / 60)


def test_without_the_platforms_endpoints_the_pull_goes_through_nat_slower_and_billed_by_the_gb():
    through_endpoint, through_nat = steps("staging", 20), steps("staging", 20, **EXISTING)
    assert through_endpoint and through_endpoint.keys() == through_nat.keys()
    for group, step in through_endpoint.items():
        endpoint_pull, nat_pull = terms(step)["training image pull"], terms(through_nat[group])["training image pull"]
        assert "ECR interface endpoint" in endpoint_pull["source"] and "NAT gateway" in nat_pull["source"]
        assert nat_pull["minutes"] > endpoint_pull["minutes"]
    assert service_prices.NAT_GATEWAY_USD_PER_GB > service_prices.VPC_INTERFACE_ENDPOINT_USD_PER_GB


def test_each_group_compiles_as_its_training_stack_does_and_the_native_compile_is_named_not_invented():
    found = {step["group"].split("-")[1]: step for step in steps("staging", fixture=True, **TWO_GENERATIONS).values()}
    xla, native = terms(found["trn1"])["graph compilation"], terms(found["trn2"])["graph compilation"]
    assert TRN1_STACK.backend.precompiler and not TRN2_STACK.backend.precompiler
    # PyTorch/XLA: neuron_parallel_compile ahead of the job, the tutorial's figure; a warm cache skips it.
    assert xla["minutes"] == first_step.COMPILE_MINUTES and xla["coldOnly"]
    assert TRN1_STACK.name in xla["source"] and "neuron_parallel_compile" in xla["source"]
    # TorchNeuron: torch.compile at the first steps into the NEFF cache; no source gives a duration, so none is counted.
    assert native["minutes"] is None and native["coldOnly"]
    assert TRN2_STACK.name in native["source"] and 'torch.compile(backend="neuron")' in native["source"]
    assert "TORCH_NEURONX_NEFF_CACHE_DIR" in native["source"] and "not counted" in native["source"]
    assert "neuron_parallel_compile" not in native["source"]
    saved = {name: step["coldMinutes"] - step["warmMinutes"] for name, step in found.items()}
    assert saved["trn1"] - saved["trn2"] == pytest.approx(first_step.COMPILE_MINUTES, abs=0.11)  # the same dataset term


def test_interface_endpoints_are_in_the_monthly_cost_and_the_s3_gateway_is_free():
    plan = analysis.annotate(evaluate("prod").to_json())
    endpoints = [line for line in plan["cost"]["lines"] if "VPC endpoint" in line["description"]]
    interface = [
        r
        for r in plan["resources"]
        if r["type"] == "aws:ec2/vpcEndpoint:VpcEndpoint" and r["inputs"]["vpcEndpointType"] == "Interface"
    ]
    assert len(endpoints) == len(interface) and not any(".s3" in line["description"] for line in endpoints)
    hourly = sum(line["hourlyUsd"] for line in endpoints)
    assert hourly == pytest.approx(len(interface) * service_prices.VPC_INTERFACE_ENDPOINT_USD_PER_AZ_HOUR)  # one AZ each


def test_plan_prints_the_estimate_and_refuses_a_bad_image_size_in_one_line():
    text = run_preflight("plan", "staging", "--image-gib", "12.5").stdout
    as_json = json.loads(run_preflight("plan", "staging", "--image-gib", "12.5", "--json").stdout)
    assert as_json["firstStep"] and all(step["warmMinutes"] > 0 for step in as_json["firstStep"])
    for step in as_json["firstStep"]:
        assert f"Estimated `pulumi up` -> first training step on {step['group']}" in text
    assert "min cold" in text and "warm compile cache" in text and "training image pull (12.5 GiB)" in text
    for bad in ("0", "-3", "nan", "inf", "big"):
        result = run_preflight("plan", "staging", "--image-gib", bad)
        assert result.returncode == 2 and "--image-gib" in result.stderr, (bad, result.stderr)
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
