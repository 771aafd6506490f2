"""The mutation cases of Trainium generations: a stack with a trn1 group and a trn2 group, each on its own training
stack and node image release, where a group is checked against its own stack and the other group is left alone.

``tests/test_policies.py`` merges them with the other tables; ``tests/test_node_rules.py`` checks that the unmutated
plan passes.
"""

from __future__ import annotations

import functools

from mutation_case import Case, edit, edit_node_group

from plan_graph.trainium_groups import NODE_CLASS, NODE_GROUP, NODE_POOL
from trainium_eks import catalog, layout, versions

TRN1, TRN2 = catalog.INSTANCE_TYPES["trn1.32xlarge"], catalog.INSTANCE_TYPES["trn2.48xlarge"]
# Where the catalog offers trn1.32xlarge on demand and sells trn2.48xlarge in Capacity Blocks.
REGION, AZ_ID = next(
    (region, az_id)
    for region, az_ids in TRN1.az_ids.items()
    for az_id in az_ids
    if TRN2.offered_in(region, az_id, capacity_block=True)
)
CAPACITY_BLOCK = {"type": "capacity-block", "id": "cr-0a1b2c3d4e5f60718", "azId": AZ_ID, "instanceCount": 2, "hourlyUsd": 30}
TWO_GENERATIONS = {
    "aws:region": REGION,
    "trainiumAzId": AZ_ID,
    "trainiumNodeGroups": [
        {"name": "trn1-32xl", "instanceType": TRN1.name, "provisioning": "karpenter", "maxSize": 2},
        {
            "name": "trn2-48xl",
            "instanceType": TRN2.name,
            "provisioning": "karpenter",
            "maxSize": 2,
            "capacityReservation": CAPACITY_BLOCK,
        },
    ],
}
TRN1_STACK, TRN2_STACK = versions.training_stack_of(TRN1.generation), versions.training_stack_of(TRN2.generation)


def refused_by(stack: versions.TrainingStack) -> versions.NodeImageRelease:
    """A release with a sourced driver that ``stack``'s runtime does not initialise on."""
    return next(
        versions.NODE_IMAGE_RELEASES[tag]
        for tag in versions.sourced_releases()
        if not stack.runtime.runs_on(versions.NODE_IMAGE_RELEASES[tag].neuron_driver)
    )


UNSOURCED = next(release for release in versions.NODE_IMAGE_RELEASES.values() if release.neuron_driver is None)


def pinned(group: str, release: versions.NodeImageRelease):
    """The EC2NodeClass of the group named ``group`` pinned to ``release``."""
    return edit(NODE_CLASS, f"-{group}-nodeclass", "spec", "amiSelectorTerms", 0, "alias", to=f"al2023@{release.tag}")


def labelled(group: str, stack: str | None):
    """The training-stack label of the NodePool of the group named ``group`` set to ``stack`` (None: removed)."""
    label = ("spec", "template", "metadata", "labels", layout.TRAINING_STACK_LABEL)
    return edit(NODE_POOL, f"-{group}-nodepool", *label, **({} if stack is None else {"to": stack}))


two_generations = functools.partial(Case, stack="staging", overrides=TWO_GENERATIONS)

GENERATION_CASES: dict[str, list[Case]] = {
    "trainium-neuron-driver-compatible": [
        two_generations(
            id="trn1-driver-too-new",
            mutate=pinned("trn1-32xl", refused_by(TRN1_STACK)),
            words=("trn1-32xl", refused_by(TRN1_STACK).tag, refused_by(TRN1_STACK).neuron_driver, TRN1_STACK.name),
            blames=NODE_CLASS,
            count=1,
        ),
        two_generations(
            id="trn2-driver-too-old",
            mutate=pinned("trn2-48xl", refused_by(TRN2_STACK)),
            words=("trn2-48xl", refused_by(TRN2_STACK).neuron_driver, TRN2_STACK.name),
            blames=NODE_CLASS,
            count=1,
        ),
        two_generations(
            id="no-sourced-driver",
            mutate=pinned("trn2-48xl", UNSOURCED),
            words=("trn2-48xl", UNSOURCED.tag, "no source states"),
            blames=NODE_CLASS,
            count=1,
        ),
    ],
    "trainium-training-stack-fits-generation": [
        two_generations(
            id="trn2-given-the-xla-stack",
            mutate=labelled("trn2-48xl", TRN1_STACK.name),
            words=("trn2-48xl", TRN1_STACK.name, f"not {TRN2.generation}", TRN2_STACK.name),
            blames=NODE_POOL,
            count=1,
        ),
        two_generations(
            id="unlabelled",
            mutate=labelled("trn1-32xl", None),
            words=("trn1-32xl", f"no {layout.TRAINING_STACK_LABEL} label", TRN1_STACK.name),
            blames=NODE_POOL,
            count=1,
        ),
        Case(
            "managed-undeclared-stack",
            "prod",
            edit_node_group("labels", layout.TRAINING_STACK_LABEL, to="pytorch-xla-9.99"),
            ("'pytorch-xla-9.99'", "does not declare"),
            NODE_GROUP,
            1,
        ),
    ],
}
