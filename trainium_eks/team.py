"""For a team's own Pulumi program: the platform stack through a typed StackReference, and the team's workspace in it.

    platform = PlatformReference("platform", "example-org/trainium-eks/staging")
    workspace = platform.workspace("nlp")           # fails in one line if the platform declares no team nlp
    k8s.core.v1.ServiceAccount("trainer", metadata={"name": "trainer"}, opts=workspace.resource_options)

The platform owns the team's namespace, queue, quota, access, etcd admission and volume (``components/teams.py``);
the team's program adds what is the team's in that namespace, with a provider whose default namespace is the
team's, so nothing it creates lands anywhere else by accident. Installed with the ``team`` extra of this package.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from trainium_eks.contract import ContractError, PlatformContract
from trainium_eks.contract_entries import Team

TEAMS_SINCE = "1.5.0"  # the contract version that introduced teams


class PlatformReference:
    """The platform stack's outputs, checked against the output contract ``requires`` (1.5.0 or a later 1.x)."""

    def __init__(self, name: str, stack: str, *, requires: str = TEAMS_SINCE):
        self.stack = stack
        self.requires = requires
        self.stack_reference = pulumi.StackReference(name, stack_name=stack)
        self.contract: pulumi.Output[PlatformContract] = self.stack_reference.outputs.apply(self._check)

    def _check(self, outputs: dict) -> PlatformContract:
        try:
            return PlatformContract.from_outputs(outputs, requires=self.requires)
        except ContractError as error:
            raise pulumi.RunError(f"platform stack {self.stack} outputs: {error}") from None

    def get(self, attribute: str) -> pulumi.Output:
        return self.contract.apply(lambda contract: getattr(contract, attribute))

    @property
    def kubeconfig(self) -> pulumi.Output[str]:
        return pulumi.Output.secret(self.get("kubeconfig"))

    def workspace(self, team: str, name: str | None = None) -> TeamWorkspace:
        return TeamWorkspace(self, team, name or f"{team}-workspace")


class TeamWorkspace:
    """Team ``team``'s workspace as the platform granted it, and a Kubernetes provider into its namespace."""

    def __init__(self, platform: PlatformReference, team: str, name: str):
        def granted(contract: PlatformContract) -> PlatformContract:
            try:
                return contract.for_team(team)
            except ContractError as error:
                raise pulumi.RunError(f"platform stack {platform.stack}: {str(error).removeprefix('teams: ')}") from None

        # The platform as the team sees it (its namespace, queue and claim), and what the platform granted the team.
        self.view: pulumi.Output[PlatformContract] = platform.contract.apply(granted)
        self.team: pulumi.Output[Team] = self.view.apply(lambda view: view.team(team))
        self.namespace: pulumi.Output[str] = self.team.apply(lambda t: t.namespace)
        self.queue: pulumi.Output[str] = self.team.apply(lambda t: t.queue)
        self.claim_name: pulumi.Output[str] = self.team.apply(lambda t: t.claim_name)
        self.provider = k8s.Provider(name, kubeconfig=platform.kubeconfig, namespace=self.namespace)
        self.resource_options = pulumi.ResourceOptions(provider=self.provider)
