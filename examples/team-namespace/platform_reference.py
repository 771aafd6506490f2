"""A typed reference to a trainium-eks platform stack.

Reads the stack's outputs through a ``StackReference`` and checks them against the output contract the
platform publishes (``trainium_eks/contract.py``): a missing or renamed output, or an incompatible contract
version, fails the deployment with one line naming the key and both versions.
"""

from __future__ import annotations

import pulumi

# The platform's package (requirements.txt installs it from this repository; a team outside it pins the
# platform repository at a release tag instead).
from trainium_eks.contract import ContractError, PlatformContract

REQUIRES = "1.1.0"  # the contract version whose keys this program reads (fsxDnsName, fsxMountName)


class PlatformReference:
    def __init__(self, name: str, stack: str):
        self.stack_reference = pulumi.StackReference(name, stack_name=stack)
        self.contract: pulumi.Output[PlatformContract] = self.stack_reference.outputs.apply(self._check)

    @staticmethod
    def _check(outputs: dict) -> PlatformContract:
        try:
            return PlatformContract.from_outputs(outputs, requires=REQUIRES)
        except ContractError as error:
            raise pulumi.RunError(f"platform stack outputs: {error}") from None

    def get(self, attribute: str) -> pulumi.Output:
        return self.contract.apply(lambda contract: getattr(contract, attribute))

    @property
    def kubeconfig(self) -> pulumi.Output[str]:
        return pulumi.Output.secret(self.get("kubeconfig"))
