"""The three policy packs, and the one entry point that serves them.

Only ``serve()``, called from each pack's ``__main__.py``, constructs a ``PolicyPack`` (which starts the
analyzer's gRPC server and never returns).
"""

from __future__ import annotations

from pulumi_policy import PolicyPack

from policies.cost_guard import COST_GUARD
from policies.pack import POLICIES_DIR, Pack
from policies.security_baseline import SECURITY_BASELINE
from policies.trainium_topology import TRAINIUM_TOPOLOGY

PACKS = (TRAINIUM_TOPOLOGY, SECURITY_BASELINE, COST_GUARD)
__all__ = ["COST_GUARD", "PACKS", "POLICIES_DIR", "Pack", "SECURITY_BASELINE", "TRAINIUM_TOPOLOGY", "serve"]


def serve(name: str) -> None:
    """Run pack ``name`` as a CrossGuard analyzer (blocks until the engine stops it)."""
    pack = next(p for p in PACKS if p.name == name)
    PolicyPack(
        name=pack.name, policies=list(pack.policies), enforcement_level=pack.enforcement_level, description=pack.description
    )
