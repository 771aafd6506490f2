"""The mutation cases of the limits' policies: system pods that the system nodes at their minimum size cannot hold.

``tests/test_policies.py`` merges them with the other tables.
"""

from __future__ import annotations

from mutation_case import Case, edit

from plan_graph.trainium_groups import NODE_GROUP
from policies.rules.security import HELM_RELEASE

LIMITS_CASES: dict[str, list[Case]] = {
    "system-pods-fit-system-nodes": [
        # dev's Karpenter replicas require a node each; a third has none at systemNodeMinSize 2
        Case(
            "three-karpenter-replicas",
            "dev",
            edit(HELM_RELEASE, "karpenter-karpenter", "values", "replicas", to=3.0),
            ("karpenter controller (3 of 3)",),
            NODE_GROUP,
            1,
        ),
        Case(
            "a-controller-larger-than-a-node",
            "dev",
            edit(HELM_RELEASE, "karpenter-karpenter", "values", "controller", "resources", "requests", "cpu", to="64"),
            ("karpenter controller (1 of 2)", "karpenter controller (2 of 2)"),
            NODE_GROUP,
            1,
        ),
    ],
}
