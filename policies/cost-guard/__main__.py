"""CrossGuard pack cost-guard: `pulumi preview --policy-pack policies/cost-guard`.

The rules live in policies/rules and are assembled in policies/packs.py; this file only serves the pack.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: policies/, trainium_eks/

from policies.packs import serve  # noqa: E402

serve("cost-guard")
