"""The mutation cases of upgrades: node groups without a stated Kubernetes version, newer than the control plane or
on another version's build, and node image releases whose Neuron driver the group's training stack cannot use.

``tests/test_policies.py`` merges them with the other tables.
"""

from __future__ import annotations

from elastic_mutations import edit_class
from generation_mutations import TRN1_STACK, refused_by
from mutation_case import Case, edit, edit_node_group

from plan_graph.trainium_groups import NODE_CLASS, NODE_GROUP

# The fixture stacks' groups are trn1 ones, on PyTorch/XLA: a recorded release whose driver its runtime does not
# initialise on (trainium_eks/versions.py), and a release the platform has no record of.
TOO_NEW = refused_by(TRN1_STACK)
DRIVER_TOO_NEW = TOO_NEW.tag.removeprefix("v")
UNRECORDED = "20250101"

UPGRADE_CASES: dict[str, list[Case]] = {
    "trainium-neuron-driver-compatible": [
        Case(
            "driver-too-new",
            "prod",
            edit_node_group("releaseVersion", to=f"1.35.6-{DRIVER_TOO_NEW}"),
            (TOO_NEW.neuron_driver, TRN1_STACK.runtime.library),
            NODE_GROUP,
            1,
        ),
        Case(
            "unrecorded",
            "prod",
            edit_node_group("releaseVersion", to=f"1.35.6-{UNRECORDED}"),
            ("does not record",),
            NODE_GROUP,
            1,
        ),
        Case(
            "pool-driver-too-new",
            "staging",
            edit_class("amiSelectorTerms", 0, "alias", to=f"al2023@v{DRIVER_TOO_NEW}"),
            (TOO_NEW.neuron_driver,),
            NODE_CLASS,
            1,
        ),
    ],
    "node-group-version-explicit": [
        Case("trainium-unstated", "prod", edit_node_group("version"), ("states no Kubernetes version",), NODE_GROUP, 1),
        Case("system-unstated", "dev", edit(NODE_GROUP, "system", "version"), ("keep the version",), NODE_GROUP, 1),
        Case(
            "newer-than-cluster",
            "prod",
            edit(NODE_GROUP, "system", "version", to="1.36"),
            ("newer than its cluster's 1.35",),
            NODE_GROUP,
            1,
        ),
        Case("other-build", "prod", edit_node_group("version", to="1.34"), ("build of another version",), NODE_GROUP, 1),
    ],
}
