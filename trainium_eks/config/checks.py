"""What every cross-key rule of the stack configuration is built from: one check, one line, the key and the fix."""

from __future__ import annotations

from collections.abc import Callable

from trainium_eks.config import platform as p
from trainium_eks.config.errors import ConfigError

# EKS CreateNodegroup: a node group name is up to 63 characters.
NODE_GROUP_NAME_MAX = 63

Key = Callable[[str], str]


def check(condition: bool, key: str, problem: str, fix: str) -> None:
    if not condition:
        raise ConfigError(key, problem, fix)


def scaling(key: Key, min_size: int, desired: int, max_size: int) -> p.Scaling:
    check(min_size >= 0, key("minSize"), f"{min_size} is negative", "use 0 or more")
    check(max_size >= 1, key("maxSize"), f"{max_size} is below 1", "allow at least one node")
    check(min_size <= max_size, key("minSize"), f"{min_size} is above maxSize {max_size}", "make minSize <= maxSize")
    check(
        min_size <= desired <= max_size,
        key("desiredSize"),
        f"{desired} is outside minSize..maxSize ({min_size}..{max_size})",
        "set desiredSize between minSize and maxSize",
    )
    return p.Scaling(min_size, desired, max_size)
