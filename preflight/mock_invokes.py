"""The offline engine's answers to the invokes (provider functions) the program calls, in the mock account: from the
hardware catalog (AZ IDs and names, instance-type offerings), or in the format AWS answers (caller identity, public AMI
parameters, IAM policy documents, EKS add-on versions and clusters, an existing subnet).
"""

from __future__ import annotations

import hashlib
import json
import string
from typing import Any

from trainium_eks import catalog, tokens
from trainium_eks import sdk_internals as sdk
from trainium_eks.config import PlatformConfig

ACCOUNT_ID = "123456789012"


class UnmockedInvokeError(Exception):
    """The program called an invoke the offline engine does not answer; add it to ``MockInvokes``."""


def hex_digest(*parts: str, length: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


def az_names(region: str) -> dict[str, str]:
    """AZ ID -> AZ name for the mock account (real accounts map IDs to names in their own order)."""
    return {az_id: f"{region}{string.ascii_lowercase[i]}" for i, az_id in enumerate(catalog.REGIONS[region])}


class MockInvokes:
    """The invokes' half of ``PlatformMocks``: ``call`` answers for ``config``'s region."""

    config: PlatformConfig
    region: str

    # ---- invokes --------------------------------------------------------------------------------

    def call(self, args: sdk.MockCallArgs) -> tuple[dict, list]:
        handler = {
            tokens.INDEX_GET_AVAILABILITY_ZONES: self._availability_zones,
            tokens.INDEX_GET_AVAILABILITY_ZONE: self._availability_zone,
            tokens.EC2_GET_INSTANCE_TYPE_OFFERINGS: self._offerings,
            tokens.EC2_GET_SUBNET: self._get_subnet,
            tokens.IAM_GET_POLICY_DOCUMENT: self._policy_document,
            tokens.EKS_GET_ADDON_VERSION: self._addon_version,
            tokens.EKS_GET_CLUSTERS: self._clusters,
            tokens.SSM_GET_PARAMETER: self._parameter,
            tokens.INDEX_GET_CALLER_IDENTITY: lambda args: {
                "id": ACCOUNT_ID,
                "accountId": ACCOUNT_ID,
                "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/preflight",
                "userId": "AIDAPREFLIGHT",
            },
        }.get(args.token)
        if handler is None:
            raise UnmockedInvokeError(f"preflight has no answer for invoke {args.token}; add it to preflight/mock_invokes.py")
        return handler(args.args), []

    def _parameter(self, args: dict) -> dict:
        """A public parameter of an AMI (the only kind the platform reads): an image ID that follows the name."""
        name = args.get("name", "")
        if not name.startswith("/aws/service/ami-"):
            raise UnmockedInvokeError(f"preflight knows only public AMI parameters, not {name}")
        value = f"ami-{hex_digest(self.region, name)}"
        return {"id": name, "name": name, "type": "String", "value": value, "insecureValue": value, "version": 1}

    def _availability_zones(self, args: dict) -> dict:
        names = az_names(self.region)
        return {
            "id": self.region,
            "names": list(names.values()),
            "zoneIds": list(names),
            "groupNames": [self.region] * len(names),
        }

    def _availability_zone(self, args: dict) -> dict:
        az_id = args.get("zoneId")
        names = az_names(self.region)
        if az_id not in names:
            raise ValueError(f"no availability zone with ID {az_id} in {self.region}")
        return {
            "name": names[az_id],
            "zoneId": az_id,
            "region": self.region,
            "state": "available",
            "zoneType": "availability-zone",
        }

    def _offerings(self, args: dict) -> dict:
        filters = {f["name"]: f["values"] for f in args.get("filters", [])}
        locations = filters.get("location", [])
        offered = [
            (instance_type, az_id)
            for instance_type in filters.get("instance-type", [])
            for az_id in locations
            # EC2 lists an AZ where a type is sold in any way, Capacity Blocks included
            if catalog.INSTANCE_TYPES[instance_type].offered_in(self.region, az_id, capacity_block=True)
        ]
        return {
            "id": self.region,
            "instanceTypes": [t for t, _ in offered],
            "locations": [az for _, az in offered],
            "locationTypes": [args.get("locationType")] * len(offered),
        }

    def _clusters(self, args: dict) -> dict:
        # A new stack: EKS has none of its clusters yet (tests override this for a stack that exists).
        return {"id": self.region, "names": []}

    def _get_subnet(self, args: dict) -> dict:
        # Existing subnets are assumed to lie where the stack says; tests override this to exercise the check.
        return {"id": args.get("id"), "availabilityZoneId": self.config.network.trainium_az_id}

    @staticmethod
    def _policy_document(args: dict) -> dict:
        statements = []
        for s in args.get("statements", []):
            statement: dict[str, Any] = {"Effect": s.get("effect", "Allow"), "Action": s.get("actions", [])}
            for principal in s.get("principals", []):
                statement.setdefault("Principal", {})[principal["type"]] = principal["identifiers"]
            for condition in s.get("conditions", []):
                statement.setdefault("Condition", {}).setdefault(condition["test"], {})[condition["variable"]] = condition[
                    "values"
                ]
            if "resources" in s:
                statement["Resource"] = s["resources"]
            statements.append(statement)
        document = json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)
        return {"id": hex_digest(document), "json": document, "minifiedJson": document}

    @staticmethod
    def _addon_version(args: dict) -> dict:
        # EKS's add-on catalog is not known offline; the answer has the real format, names the mock and, as EKS's
        # default build does, changes with the cluster's version (so a diff shows the add-ons move with it).
        version = f"v0.0.0-eksbuild.preflight.k8s-{str(args.get('kubernetesVersion')).replace('.', '-')}"
        return {"id": args.get("addonName"), "addonName": args.get("addonName"), "version": version}
