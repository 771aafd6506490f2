"""What Karpenter does to a training pod when a node of a pool goes: for each kind of disruption, whether it takes a
node a job runs on, when the pod is evicted, deleted or left, and how much of its grace period it has before the
instance is gone. ``jobs.rehearsal.volcano_lifecycle`` models what Volcano then does with the job; this models the
step before, and the pools' ``terminationGracePeriod`` (``pool_termination_grace_seconds``) is chosen by it.

Sources: "core" is kubernetes-sigs/karpenter at 6e7eab7a0f48, the version karpenter-provider-aws v1.14.1 pins in its
go.mod; "aws" is aws/karpenter-provider-aws at v1.14.1.

- The drain (core ``pkg/controllers/node/termination/terminator/terminator.go`` Drain 96-117): a pod is queued for
  eviction only if evictable, and a pod with an active ``karpenter.sh/do-not-disrupt`` is not
  (``pkg/utils/pod/scheduling.go`` IsEvictable 58-63, IsDoNotDisruptActive 210-252: "true" is always active), though
  the drain still waits for it (IsDrainable 73-85). Without a termination time such a pod is never deleted: the
  drain requeues each second (``node/termination/controller.go`` awaitDrain 207-213) until the pod ends or the
  instance does.
- The termination time (the NodeClaim's ``karpenter.sh/nodeclaim-termination-timestamp``): the deletion time plus the
  NodeClaim's ``terminationGracePeriod``, which it takes from its pool's template (core
  ``nodeclaim/lifecycle/controller.go`` 289-304); "now" where a repair or a failed instance forces it (core
  ``node/health/controller.go`` annotateTerminationGracePeriod 208-225; aws
  ``pkg/controllers/interruption/utils.go`` annotateTerminationTimestamp 174-186). By then Karpenter deletes every pod
  still there at termination time minus its own ``terminationGracePeriodSeconds``, with the time left as the
  deletion's grace, at least 1 s (terminator.go DeleteExpiringPods 140-166, podDeleteTimeWithGracePeriod 169-178).
- Voluntary disruption: drift is "eventual", which a pool's terminationGracePeriod lets past do-not-disrupt pods;
  emptiness and consolidation are "graceful" and never do (core ``pkg/controllers/disruption/types.go`` 48-51,
  NewCandidate 188-197; ``drift.go`` 110-115, ``emptiness.go`` 117). Drift stops at a budget of 0 nodes for the
  reason ``Drifted`` (drift.go 80-82; ``pkg/apis/v1/nodepool.go`` GetAllowedDisruptionsByReason 364-377).
- Who deletes NodeClaims: a Capacity Block's expiry (aws ``pkg/controllers/capacityreservation/expiration/
  controller.go`` 96-127, a block "expiring" 40 minutes before its end, ``pkg/apis/v1/ec2nodeclass_status.go``
  238-264, checked once a minute); interruption messages (aws ``interruption/utils.go`` actionForMessage 207-216:
  a scheduled change, a Spot or interruptible-ODCR warning, a stopped or terminated instance drain the node; a failed
  instance status terminates it at once; a rebalance recommendation does nothing); a pool's deletion cascades to its
  NodeClaims (aws ``website/content/en/docs/concepts/disruption.md`` 58, "NodePool Deletion").
- EC2: "With 30 minutes (for instance types) or 60 minutes (for UltraServer types) left in your Capacity Block
  reservation, we begin terminating any instances" (aws ``website/content/en/docs/tasks/odcrs.md`` 95-96); an
  interruptible ODCR's instances get "a 2-minute interruption warning" (odcrs.md 105-108), as Spot's do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
# Capacity Block timing (module docstring): Karpenter deletes a block's NodeClaims once it is 40 minutes from its
# end, looking once a minute; EC2 terminates its instances 30 minutes (an UltraServer's 60) before the end.
KARPENTER_EXPIRES_BLOCK_BEFORE_END_SECONDS = 40 * 60
EXPIRATION_POLL_SECONDS = 60
EC2_TERMINATES_BLOCK_BEFORE_END_SECONDS = {"instance": 30 * 60, "ultraserver": 60 * 60}
# What a drain surely has on a block's node: from the latest the controller sees the expiry to EC2's termination.
CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS = (
    KARPENTER_EXPIRES_BLOCK_BEFORE_END_SECONDS - EC2_TERMINATES_BLOCK_BEFORE_END_SECONDS["instance"] - EXPIRATION_POLL_SECONDS
)
INTERRUPTION_WARNING_SECONDS = 2 * 60
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}
# The longest grace period the launcher gives a pod: a day, the shortest Capacity Block a trn2 group runs in (EC2 API
# Reference, DescribeCapacityBlockOfferings, CapacityDurationHours: "in 1-day increments up 14 days, and in 7-day
# increments up to 182 days"); a longer drain means a misstated step, checkpoint or throughput.
LONGEST_DRAIN_SECONDS = 24 * 60 * 60


def pool_termination_grace_seconds(capacity_block: bool) -> int:
    """A pool's ``terminationGracePeriod``: the longest grace period the launcher gives a pod there, so that a node
    Karpenter must take deletes each training pod that long before the node's termination time and the pod drains in
    full. On a Capacity Block's node the termination time must also come before EC2's: the block's drain window, which
    the launcher holds the pods' grace period to."""
    return CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS if capacity_block else LONGEST_DRAIN_SECONDS


Actor = Literal["karpenter", "kubectl", "ec2"]


@dataclass(frozen=True)
class Disruption:
    """One way a node goes: who acts, whether Karpenter chose it (voluntary, within budgets), whether it forces the
    termination time to now, and when the instance is gone after the NodeClaim's deletion (None: when Karpenter
    terminates it, once drained)."""

    name: str
    actor: Actor
    voluntary_reason: str | None = None  # the budget reason of a voluntary disruption: Drifted, Empty, Underutilized
    terminates_now: bool = False
    instance_gone_after: float | None = None
    source: str = ""


DISRUPTIONS = {
    d.name: d
    for d in (
        Disruption(
            "capacity-block-expiry",
            "karpenter",
            instance_gone_after=CAPACITY_BLOCK_DRAIN_WINDOW_SECONDS,
            source="aws capacityreservation/expiration/controller.go 96-127",
        ),
        Disruption(
            "interruption",
            "karpenter",
            instance_gone_after=INTERRUPTION_WARNING_SECONDS,
            source="aws interruption/utils.go 207-216 (Spot, interruptible ODCR)",
        ),
        Disruption("scheduled-change", "karpenter", source="aws interruption/utils.go 207-216 (AWS Health)"),
        Disruption("nodepool-deletion", "karpenter", source="aws disruption.md 58 (a destroy's first step)"),
        Disruption("node-repair", "karpenter", terminates_now=True, source="core node/health/controller.go 208-225 (nodeRepair)"),
        Disruption(
            "instance-status-failure", "karpenter", terminates_now=True, source="aws interruption/utils.go 174-186, 207-216"
        ),
        Disruption("drift", "karpenter", voluntary_reason="Drifted", source="core disruption/drift.go, types.go 189-196"),
        Disruption("consolidation", "karpenter", voluntary_reason="Empty", source="core disruption/emptiness.go 117"),
        Disruption("expiry", "karpenter", source="core nodeclaim/expiration/controller.go (expireAfter; forceful)"),
        Disruption("manual-drain", "kubectl", source="kubectl drain: the Eviction API, with the pod's grace period"),
        Disruption("hard-node-loss", "ec2", instance_gone_after=0.0, source="the instance ends with no warning"),
    )
}


def duration_seconds(text: str) -> int:
    """A NodePool duration (the CRD's pattern ``^([0-9]+(s|m|h))+$``, as the pools spell it) in seconds."""
    return sum(int(count) * UNIT_SECONDS[unit] for count, unit in re.findall(r"([0-9]+)([smh])", text))


def drift_held(budgets: Any) -> bool:
    """Whether a NodePool's ``disruption.budgets`` hold drift at 0 nodes: a budget of "0" (or "0%") that applies to
    Drifted, as one with no reasons does, and one with an empty list does not (core nodepool.go
    GetAllowedDisruptionsByReason 372: ``budget.Reasons == nil || lo.Contains(budget.Reasons, reason)``)."""
    return isinstance(budgets, list) and any(
        isinstance(b, dict) and b.get("nodes") in ("0", "0%") and (b.get("reasons") is None or "Drifted" in b["reasons"])
        for b in budgets
    )


@dataclass(frozen=True)
class Pool:
    """What of a NodePool's spec decides how its nodes go."""

    termination_grace: int | None  # spec.template.spec.terminationGracePeriod in seconds; None: unset
    drift_blocked: bool  # a budget of 0 nodes applies to Drifted
    consolidation_policy: str
    expire_after: str

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> Pool:
        template = spec["template"]["spec"]
        disruption = spec.get("disruption", {})
        budgets = disruption.get("budgets", [{"nodes": "10%"}])  # the CRD's default budget
        blocked = drift_held(budgets)
        grace = template.get("terminationGracePeriod")
        return cls(
            None if grace is None else duration_seconds(grace),
            blocked,
            disruption.get("consolidationPolicy", "WhenEmptyOrUnderutilized"),
            template.get("expireAfter", "720h"),
        )


@dataclass(frozen=True)
class PodFate:
    """What a disruption does to a training pod on a node of the pool: whether the node goes at all, and if it
    does, when after the NodeClaim's deletion the pod gets SIGTERM (None: never, before the instance ends) and how
    long it then has before the instance is gone."""

    node_taken: bool
    sigterm_after: float | None = None
    drain_seconds: float = 0.0
    grace_seconds: int = 0

    @property
    def drained_in_full(self) -> bool:
        """The pod had its whole grace period: it checkpoints its last step and loses none."""
        return self.node_taken and self.sigterm_after is not None and self.drain_seconds >= self.grace_seconds


def pod_fate(disruption: Disruption, pool: Pool, grace_seconds: int, do_not_disrupt: bool) -> PodFate:
    """What ``disruption`` does to a busy node of ``pool`` and its training pod (``grace_seconds`` its
    terminationGracePeriodSeconds; ``do_not_disrupt`` its annotation)."""
    # A job's node is not empty, and only Underutilized consolidation (graceful: never past do-not-disrupt) takes a
    # busy node; drift only as ``_drifts`` says; expiry only where the pool expires nodes at all.
    consolidated = pool.consolidation_policy == "WhenEmptyOrUnderutilized" and not do_not_disrupt
    kept = (
        (disruption.voluntary_reason == "Empty" and not consolidated)
        or (disruption.name == "drift" and not _drifts(pool, do_not_disrupt))
        or (disruption.name == "expiry" and pool.expire_after == "Never")
    )
    if kept:
        return PodFate(node_taken=False, grace_seconds=grace_seconds)
    gone = disruption.instance_gone_after
    if disruption.actor != "karpenter" or not do_not_disrupt:
        sigterm, grace = 0.0, float(grace_seconds)  # evicted at once, with its own grace period
    else:
        termination = 0.0 if disruption.terminates_now else pool.termination_grace
        if termination is None:  # never deleted by Karpenter: it trains on until the instance ends
            return PodFate(node_taken=True, sigterm_after=None, grace_seconds=grace_seconds)
        sigterm = max(0.0, termination - grace_seconds)
        grace = max(termination - sigterm, 1.0)  # DeleteExpiringPods' clamp
    if gone is not None and gone <= sigterm:
        return PodFate(node_taken=True, sigterm_after=None, grace_seconds=grace_seconds)
    drain = grace if gone is None else min(grace, gone - sigterm)
    return PodFate(node_taken=True, sigterm_after=sigterm, drain_seconds=drain, grace_seconds=grace_seconds)


def _drifts(pool: Pool, do_not_disrupt: bool) -> bool:
    """Whether drift takes a node with a training pod: past do-not-disrupt only with a terminationGracePeriod, and
    only where no budget holds drift at 0."""
    return not pool.drift_blocked and (not do_not_disrupt or pool.termination_grace is not None)


def platform_pool(capacity_block: bool) -> Pool:
    """A pool as the platform writes it (``components/trainium_node_group.py`` node_pool_spec, which a test holds to
    this): the launcher reads the contract, not the pool."""
    return Pool(pool_termination_grace_seconds(capacity_block), True, "WhenEmpty", "Never")


def disruption_summary(grace_seconds: int, capacity_block: bool) -> str:
    """What each way a node of a platform pool goes does to a job whose pods have ``grace_seconds``, in words: the
    disruptions it drains in full through, those after which it resumes from its last checkpoint, and those that
    never take its nodes."""
    pool = platform_pool(capacity_block)
    fates = {name: pod_fate(d, pool, grace_seconds, do_not_disrupt=True) for name, d in DISRUPTIONS.items()}
    if not capacity_block:
        fates.pop("capacity-block-expiry")
    drained = [name for name, fate in fates.items() if fate.drained_in_full]
    kept = [name for name, fate in fates.items() if not fate.node_taken]
    lost = [name for name in fates if name not in drained and name not in kept]
    return (
        f"a {grace_seconds} s drain loses no step on {', '.join(drained)}; the run resumes from its last checkpoint "
        f"after {', '.join(lost)}; {', '.join(kept)} never take a node from it"
    )
