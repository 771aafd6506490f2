"""The rules of ``teams``: unique names, shares that hold a node of every group and fit the capacity together, and
one access entry per principal."""

from __future__ import annotations

from trainium_eks import shares
from trainium_eks.config import platform as p
from trainium_eks.config.checks import Key, check
from trainium_eks.config.errors import ConfigError
from trainium_eks.config.stack import StackInput


def teams(s: StackInput, key: Key, groups: tuple[p.TrainiumNodeGroupConfig, ...]) -> tuple[p.TeamConfig, ...]:
    fleet = shares.fleet(groups)
    platform_queues = {q.name for q in s.volcano_queues}
    # EKS keeps one access entry per principal and cluster: a member of two teams, or an admin, would need two.
    entries = {arn: "clusterAdminPrincipalArns" for arn in s.cluster_admin_principal_arns}
    configs: list[p.TeamConfig] = []
    for index, team in enumerate(s.teams):

        def at(name: str, index=index) -> str:
            return f"{key('teams')}[{index}].{name}"

        check(
            team.name not in {c.name for c in configs},
            at("name"),
            f"'{team.name}' is used twice",
            "give each team its own name",
        )
        config = p.TeamConfig(team.name, team.weight, float(team.neuron_share), tuple(team.principal_arns))
        check(
            config.queue not in platform_queues,
            at("name"),
            f"its queue '{config.queue}' is also in volcanoQueues",
            "rename the team or the platform queue",
        )
        check(
            config.namespace != s.job_namespace,
            at("name"),
            f"its namespace '{config.namespace}' is the jobNamespace",
            "rename the team or the jobNamespace",
        )
        share_holds_a_node(config.neuron_share, fleet, at("neuronShare"))
        for position, arn in enumerate(team.principal_arns):
            holder = entries.get(arn)
            check(
                holder is None,
                f"{at('principalArns')}[{position}]",
                f"'{arn}' is already in {holder}",
                "list each principal once: EKS gives a principal one access entry per cluster",
            )
            entries[arn] = f"team '{team.name}'"
        configs.append(config)
    total = round(sum(c.neuron_share for c in configs), shares.SHARE_DIGITS)
    check(
        total <= 1,
        key("teams"),
        f"the neuronShare values add up to {total:g}, more than the whole provisioned Neuron capacity (1)",
        "lower the teams' neuronShare so that they add up to 1 or less",
    )
    return tuple(configs)


def share_holds_a_node(share: float, fleet: tuple[shares.GroupNodes, ...], where: str) -> None:
    """A share entitles its holder to whole nodes of each group (``trainium_eks.shares``): one that rounds down to no
    node of some group leaves its quota or capability unable to hold any job there."""
    short = shares.groups_short_of_a_node(share, fleet)
    if short:
        group = short[0]
        raise ConfigError(
            where,
            f"{share:g} of {group.name}'s maxSize {group.max_size} is {round(share * group.max_size, shares.SHARE_DIGITS):g} "
            f"nodes, less than one {group.instance_type}",
            f"raise neuronShare to {shares.smallest_share_for_a_node(group.max_size):g} or maxSize to "
            f"{shares.smallest_max_size_for_a_node(share)}",
        )
