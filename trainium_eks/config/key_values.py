"""The allowed values and bounds of stack keys that need more than a type: retention periods, FSx deployment types,
etcd member counts, repair counts, the public endpoint's CIDR quota, node Kubernetes versions. The stack model
(``trainium_eks/config/stack.py``) declares its keys with them; policies and components that must agree with a key
import them from here.
"""

from __future__ import annotations

from typing import Annotated

from trainium_eks import versions
from trainium_eks.config import fields as f

FSX_DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
# etcd needs a majority of its members: 3 survive the loss of one, 5 of two; an even count adds no tolerance.
ETCD_MEMBER_COUNTS = (1, 3, 5)
# CloudWatch Logs retention values (PutRetentionPolicy; listed in pulumi-aws's cloudwatch.LogGroup
# retention_in_days). 0 ("never expire") is left out: the key exists so that logs stop costing after a while.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
RetentionDays = Annotated[
    f.Integer,
    f.rule(
        lambda v: v in LOG_RETENTION_DAYS,
        "{value} is not a CloudWatch Logs retention period",
        "use one of " + ", ".join(map(str, LOG_RETENTION_DAYS)),
    ),
    f.Shown({"enum": list(LOG_RETENTION_DAYS)}),
]
# Days of control-plane (audit, API, authenticator ...) logs kept by default: terraform-aws-modules/eks's default for
# the same group (variables.tf, cloudwatch_log_group_retention_in_days: 90).
CONTROL_PLANE_LOG_RETENTION_DAYS = 90
# EKS NodeRepairConfig counts (maxParallelNodesRepairedCount, maxUnhealthyNodeThresholdCount): a minimum of 1 and no
# maximum (EKS API reference, NodeRepairConfig).
RepairCount = Annotated[
    f.Integer, f.rule(lambda v: v >= 1, "{value} is below 1", "use a count of 1 or more"), f.Shown({"minimum": 1})
]

PUBLIC_ACCESS_CIDRS_MAX = 40
NodeKubernetesVersion = f.one_of(
    ("", *versions.SUPPORTED_KUBERNETES_VERSIONS),
    'use "" (kubernetesVersion) or one of ' + ", ".join(versions.SUPPORTED_KUBERNETES_VERSIONS),
    what="a supported Kubernetes version",
)
