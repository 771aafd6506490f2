"""A CrossGuard policy pack as the repository declares it: name, description, level and policies.

Each pack's policies are assembled from the pure rules in ``policies/rules`` (through ``policies/adapters.py``) in a
module of its own: ``policies/trainium_topology.py``, ``policies/security_baseline.py``, ``policies/cost_guard.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from pulumi_policy import EnforcementLevel

POLICIES_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Pack:
    name: str
    description: str
    enforcement_level: EnforcementLevel
    policies: tuple

    @property
    def directory(self) -> Path:
        return POLICIES_DIR / self.name

    @property
    def version(self) -> str:
        return str(yaml.safe_load((self.directory / "PulumiPolicy.yaml").read_text())["version"])
