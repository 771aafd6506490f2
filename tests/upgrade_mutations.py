"""The mutation cases of upgrades: node groups without a stated Kubernetes version, newer than the control plane or
on another version's build, and node image releases whose Neuron driver the training image's runtime cannot use.

``tests/test_policies.py`` merges them with the other tables.
"""

from __future__ import annotations

from elastic_mutations import edit_class
from mutation_case import Case, edit, edit_node_group

from trainium_eks.trainium_groups import NODE_CLASS, NODE_GROUP

# The newest release the platform records ships Neuron driver 2.29, which the training image's runtime 2.32 does not
# initialise on (trainium_eks/versions.py); the other is a release the platform has no record of.
DRIVER_TOO_NEW = "20260714"
UNRECORDED = "20250101"

UPGRADE_CASES: dict[str, list[Case]] = {
    "trainium-neuron-driver-compatible": [
        Case(
            "driver-too-new",
            "prod",
            edit_node_group("releaseVersion", to=f"1.35.6-{DRIVER_TOO_NEW}"),
            ("2.29.0.0", "2.32.31.0"),
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
            ("2.29.0.0",),
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
