"""Every way a node goes, through Karpenter's termination path (``trainium_eks.karpenter_termination``), on the
platform's own pools and the launcher's own jobs: on every elastic group of the shipped and fixture stacks, and on a
trn2 Capacity Block group, nothing voluntary takes a node from a job, and what Karpenter must take (a block's end, a
scheduled change, the pool's deletion) or an operator drains gives each training pod its whole grace period before
the instance goes; what gives no warning (a repair, a failed instance, a lost node) is the run's last checkpoint."""

from __future__ import annotations

import pytest
from support import STACKS, cached_plan, evaluate, one_group

from jobs import launch
from jobs.errors import LaunchError
from jobs.job_building.platform_job import JobRequest
from jobs.workloads import registry
from jobs.workloads.workload import launched_job
from plan_graph.trainium_groups import NODE_POOL
from trainium_eks import karpenter_termination as kt
from trainium_eks.contract import PlatformContract

DRAINED = ("scheduled-change", "nodepool-deletion", "manual-drain")
KEPT = ("drift", "consolidation", "expiry")
NO_WARNING = ("node-repair", "instance-status-failure", "hard-node-loss")
PLANS = [(stack, False) for stack in STACKS] + [(stack, True) for stack in ("dev", "staging", "prod")]


def pools_and_jobs(plan) -> list[tuple[str, kt.Pool, bool, dict]]:
    """Each elastic group's pool, whether its nodes run in a Capacity Block, and each job the launcher submits there."""
    contract = PlatformContract.from_outputs(plan.outputs)
    pools = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in plan.resources if r.type == NODE_POOL}
    found = []
    for group in contract.node_groups:
        if group.name not in pools:
            continue
        block = launch.in_capacity_block(contract, group)
        for workload in registry.workloads().values():
            try:
                run = workload.plan(contract, JobRequest(name=workload.default_name, node_group=group.name))
                job, _ = launched_job(contract, run)
            except LaunchError:
                continue  # refused there: no job of it runs on the group
            found.append((group.name, kt.Pool.of(pools[group.name]), block, job))
    assert {name for name, *_ in found} == set(pools), "every pool runs some job of the launcher's"
    return found


def training_pods(job: dict) -> list[tuple[int, bool]]:
    """Each task's pods' grace period and whether they carry karpenter.sh/do-not-disrupt."""
    return [
        (
            task["template"]["spec"]["terminationGracePeriodSeconds"],
            task["template"]["metadata"]["annotations"].get(kt.DO_NOT_DISRUPT) == "true",
        )
        for task in job["spec"]["tasks"]
    ]


def check_every_disruption(pool: kt.Pool, block: bool, job: dict) -> None:
    # the pool as the launcher and the rehearsal read it from the contract alone is the pool the program writes
    assert pool == kt.platform_pool(block)
    for grace, do_not_disrupt in training_pods(job):
        fate = {name: kt.pod_fate(d, pool, grace, do_not_disrupt) for name, d in kt.DISRUPTIONS.items()}
        assert all(fate[name].drained_in_full for name in DRAINED), fate
        assert not any(fate[name].node_taken for name in KEPT), fate
        assert not any(fate[name].drained_in_full for name in NO_WARNING), fate
        if block:
            assert fate["capacity-block-expiry"].drained_in_full, fate["capacity-block-expiry"]
        # a Spot or interruptible-ODCR warning's two minutes end before the pool's period less the pod's grace: the
        # run resumes from its last periodic checkpoint (the platform buys neither kind of capacity)
        assert not fate["interruption"].drained_in_full, fate["interruption"]


@pytest.mark.parametrize(("stack", "fixture"), PLANS)
def test_every_pool_drains_the_launchers_jobs_in_full_and_keeps_them_from_voluntary_disruption(stack, fixture):
    for _, pool, block, job in pools_and_jobs(cached_plan(stack, False, fixture)):
        check_every_disruption(pool, block, job)


def test_a_capacity_block_groups_jobs_drain_before_ec2_reclaims_the_node():
    plan = evaluate("staging", fixture=True, **one_group("trn2.48xlarge"))
    found = pools_and_jobs(plan)
    assert found and all(block for _, _, block, _ in found)
    for _, pool, block, job in found:
        assert pool.termination_grace == kt.CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS
        check_every_disruption(pool, block, job)


def test_without_a_termination_grace_period_a_blocks_end_takes_the_pods_mid_training():
    """Release 0.18.0's pools: Karpenter never deletes a do-not-disrupt pod, and EC2 ends the instance under it."""
    pool = kt.Pool(termination_grace=None, drift_blocked=False, consolidation_policy="WhenEmpty", expire_after="Never")
    fate = kt.pod_fate(kt.DISRUPTIONS["capacity-block-expiry"], pool, 450, do_not_disrupt=True)
    assert fate.node_taken and fate.sigterm_after is None and not fate.drained_in_full


def test_a_termination_grace_period_without_a_drift_budget_lets_drift_take_a_busy_node():
    pool = kt.Pool(termination_grace=540, drift_blocked=False, consolidation_policy="WhenEmpty", expire_after="Never")
    assert kt.pod_fate(kt.DISRUPTIONS["drift"], pool, 450, do_not_disrupt=True).node_taken
    held = kt.Pool(termination_grace=540, drift_blocked=True, consolidation_policy="WhenEmpty", expire_after="Never")
    assert not kt.pod_fate(kt.DISRUPTIONS["drift"], held, 450, do_not_disrupt=True).node_taken


def test_expiry_and_underutilized_consolidation_would_take_a_node_the_platforms_pools_keep():
    """What the pool's expireAfter: Never and WhenEmpty keep off: expiry is forceful, and consolidating an
    underutilized node evicts a pod without do-not-disrupt."""
    expiring = kt.Pool(termination_grace=540, drift_blocked=True, consolidation_policy="WhenEmpty", expire_after="720h")
    assert kt.pod_fate(kt.DISRUPTIONS["expiry"], expiring, 450, do_not_disrupt=True).node_taken
    packing = kt.Pool(540, True, "WhenEmptyOrUnderutilized", "Never")
    assert kt.pod_fate(kt.DISRUPTIONS["consolidation"], packing, 450, do_not_disrupt=False).node_taken
    assert not kt.pod_fate(kt.DISRUPTIONS["consolidation"], packing, 450, do_not_disrupt=True).node_taken


def test_a_grace_period_longer_than_the_pools_is_cut_short():
    """Karpenter deletes such a pod as the drain starts, with the pool's period as its grace (DeleteExpiringPods)."""
    pool = kt.Pool(termination_grace=540, drift_blocked=True, consolidation_policy="WhenEmpty", expire_after="Never")
    fate = kt.pod_fate(kt.DISRUPTIONS["nodepool-deletion"], pool, 900, do_not_disrupt=True)
    assert fate.sigterm_after == 0 and fate.drain_seconds == 540 and not fate.drained_in_full


def test_the_capacity_block_window_is_ten_minutes_less_the_controllers_polling():
    block_end_lead = kt.KARPENTER_EXPIRES_BLOCK_BEFORE_END_SECONDS - kt.EC2_TERMINATES_BLOCK_BEFORE_END_SECONDS["instance"]
    assert block_end_lead - kt.EXPIRATION_POLL_SECONDS == kt.CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS
    # an UltraServer's block: EC2 begins terminating before Karpenter sees it expire, so no drain window opens
    ultraserver = kt.KARPENTER_EXPIRES_BLOCK_BEFORE_END_SECONDS - kt.EC2_TERMINATES_BLOCK_BEFORE_END_SECONDS["ultraserver"]
    assert ultraserver < 0


@pytest.mark.parametrize(
    ("budgets", "held"),
    [
        ([{"nodes": "0", "reasons": ["Drifted"]}], True),
        ([{"nodes": "0"}], True),  # no reasons: every reason
        ([{"nodes": "0", "reasons": []}], False),  # an empty list: none (a non-nil slice in Go)
        ([{"nodes": "0", "reasons": ["Empty"]}], False),
        ([{"nodes": "10%"}], False),
    ],
)
def test_drift_is_held_only_by_a_zero_budget_that_applies_to_drifted(budgets, held):
    assert kt.drift_held(budgets) is held


@pytest.mark.parametrize(("text", "seconds"), [("540s", 540), ("86400s", 86400), ("1h30m", 5400), ("9m", 540)])
def test_pool_durations_read_as_the_crd_spells_them(text, seconds):
    assert kt.duration_seconds(text) == seconds
