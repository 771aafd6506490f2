"""The mutation cases of the first training step's path: Trainium nodes whose images land on the root volume instead
of the instance store, and a VPC whose image pulls go through NAT.

``tests/test_policies.py`` merges them with the other tables.
"""

from __future__ import annotations

import base64

from elastic_mutations import edit_class
from mutation_case import Case, edit, edit_template, resource, without

from plan_graph.trainium_groups import LAUNCH_TEMPLATE, NODE_CLASS
from trainium_eks import nodeadm, tokens


def launch_template_user_data(strategy: str) -> str:
    """A launch template's user data whose NodeConfig asks for ``strategy``."""
    config = {
        "apiVersion": nodeadm.API_VERSION,
        "kind": "NodeConfig",
        "spec": {"instance": {"localStorage": {"strategy": strategy}}},
    }
    return base64.b64encode(nodeadm.user_data(config).encode()).decode()


ENDPOINT = tokens.EC2_VPC_ENDPOINT


def without_endpoint(suffix: str):
    """Remove the VPC endpoint named ``...-endpoints-<suffix>`` from the plan."""
    return without(lambda r: r["type"] == ENDPOINT and r["name"].endswith(f"-endpoints-{suffix}"))


def s3_on_the_trainium_route_table_only(plan: dict) -> None:
    endpoint = resource(plan, ENDPOINT, "-endpoints-s3")
    for where in (endpoint["inputs"], endpoint["propertyDependencies"]):
        where["routeTableIds"] = where["routeTableIds"][:1]


FIRST_STEP_CASES: dict[str, list[Case]] = {
    "trainium-instance-store-raid0": [
        Case("no-user-data", "prod", edit_template("userData"), ("7600 GB NVMe", "unset"), LAUNCH_TEMPLATE, 1),
        Case(
            "mount-only", "prod", edit_template("userData", to=launch_template_user_data("Mount")), ("Mount",), LAUNCH_TEMPLATE, 1
        ),
        Case("not-base64", "prod", edit_template("userData", to="#!/bin/bash\necho hi"), ("unset",), LAUNCH_TEMPLATE, 1),
        Case("pool-unset", "staging", edit_class("instanceStorePolicy"), ("instanceStorePolicy: unset",), NODE_CLASS, 1),
    ],
    "image-pulls-through-vpc-endpoints": [
        Case("no-s3-gateway", "prod", without_endpoint("s3"), ("S3 gateway endpoint",), tokens.EC2_VPC, 1),
        Case("s3-on-one-table", "staging", s3_on_the_trainium_route_table_only, ("private-trainium",), tokens.EC2_VPC, 1),
        Case("no-ecr-dkr", "dev", without_endpoint("ecr-dkr"), ("ecr.dkr",), tokens.EC2_VPC, 1),
        Case(
            "no-private-dns",
            "dev",
            edit(ENDPOINT, "-endpoints-ecr-api", "privateDnsEnabled", to=False),
            ("ecr.api",),
            tokens.EC2_VPC,
            1,
        ),
    ],
}
SPARED_FIRST_STEP: dict[str, list[Case]] = {
    "trainium-instance-store-raid0": [
        Case("raid10", "prod", edit_template("userData", to=launch_template_user_data("RAID10"))),
    ],
}
