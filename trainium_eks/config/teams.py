"""The rules of ``teams``: unique names, shares that fit the capacity together, and one access entry per principal."""

from __future__ import annotations

import math

from trainium_eks.config import platform as p
from trainium_eks.config.checks import Key, check
from trainium_eks.config.stack import StackInput

# Shares are fractions written in a stack file; their sum is compared after rounding so that 0.7 + 0.2 + 0.1 fits.
SHARE_DIGITS = 9


def teams(s: StackInput, key: Key, groups: tuple[p.TrainiumNodeGroupConfig, ...]) -> tuple[p.TeamConfig, ...]:
    # The platform's jobs take whole nodes: a share below one node of the smallest group could never run one.
    provisioned = sum(g.scaling.max_size * g.spec.neuron_devices for g in groups)
    smallest = min(groups, key=lambda g: g.spec.neuron_devices)
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
        devices = math.floor(provisioned * config.neuron_share)  # the quota, as components/teams.py rounds it
        check(
            devices >= smallest.spec.neuron_devices,
            at("neuronShare"),
            f"{team.neuron_share:g} of {provisioned} Neuron devices is {devices}, less than one {smallest.instance_type} "
            f"node ({smallest.spec.neuron_devices}), so no job of the team could start",
            "raise the share, or the node groups' maxSize",
        )
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
    total = round(sum(c.neuron_share for c in configs), SHARE_DIGITS)
    check(
        total <= 1,
        key("teams"),
        f"the neuronShare values add up to {total:g}, more than the whole provisioned Neuron capacity (1)",
        "lower the teams' neuronShare so that they add up to 1 or less",
    )
    return tuple(configs)
