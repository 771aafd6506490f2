"""CrossGuard pack cost-guard: `pulumi preview --policy-pack policies/cost-guard`.

The rules live in policies/rules and are assembled in policies/packs.py; this file only serves the pack.
"""

from policies.packs import serve  # the repository's package, installed into the pack's virtualenv

serve("cost-guard")
