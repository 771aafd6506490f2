"""Paths into a resource's inputs: where two versions of them differ, and the paths an update keeps (``ignoreChanges``).

A path is dotted, ``a.b[2].c``. Where two versions differ, an item of a list whose items are known by a name or a key
(``KEY_FIELDS``: a container's ``name``, a NodePool requirement's ``key``) reads by it, as in
``spec.template.spec.requirements[node.kubernetes.io/instance-type].values[0]``, when both versions hold the same
keys in the same order; any other item reads by its index. The paths a resource ignores are the program's own, by index.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator
from typing import Any

from preflight.engine import SECRET

# The fields a list item is known by, first match first: Kubernetes merges containers, ports, volumes and env by name,
# and a node selector requirement, toleration or taint is read by its key.
KEY_FIELDS = ("name", "key")


def changed_values(old: Any, new: Any, prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, old, new) where two input values differ; a list whose length changes is one path. A value that holds a
    secret on either side is ``[secret]`` on both: the other side holds the same secret, or the one it replaced,
    unmarked."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            yield from changed_values(old.get(key), new.get(key), f"{prefix}.{key}" if prefix else key)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        steps = item_keys(old, new) or range(len(old))
        for step, a, b in zip(steps, old, new, strict=True):
            yield from changed_values(a, b, f"{prefix}[{step}]")
    elif old != new:
        yield (prefix, SECRET, SECRET) if holds_secret(old) or holds_secret(new) else (prefix, old, new)


def item_keys(old: list, new: list) -> list[str] | None:
    """The key of each item, when every item of both lists holds a distinct string under the same ``KEY_FIELDS`` field
    and the two lists list the same keys in the same order; else None."""
    for key_field in KEY_FIELDS:
        keys = [item.get(key_field) if isinstance(item, dict) else None for item in old]
        same = keys == [item.get(key_field) if isinstance(item, dict) else None for item in new]
        if same and all(isinstance(key, str) for key in keys) and len(set(keys)) == len(keys):
            return keys
    return None


def holds_secret(value: Any) -> bool:
    """Whether the plan marks ``value``, or a value inside it, secret (``preflight.engine`` writes it as ``SECRET``)."""
    if isinstance(value, dict):
        return any(holds_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(holds_secret(v) for v in value)
    return value == SECRET


PATH_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def with_ignored_changes(old: dict, new: dict, ignored: Iterable[str]) -> dict:
    """``new`` with each ignored path (``a.b[0].c``) reset to its value in ``old``, or removed where ``old`` lacks it:
    the engine's processIgnoreChanges before it diffs an update. A path whose parent ``new`` lacks is left alone."""
    result = copy.deepcopy(new)
    for path in ignored:
        *parents, last = [key if key else int(index) for key, index in PATH_STEP.findall(path)]
        source, target = _walk(old, parents), _walk(result, parents)
        kept = _holds(source, last)
        if kept and (_holds(target, last) or (isinstance(target, dict) and isinstance(last, str))):
            target[last] = copy.deepcopy(source[last])
        elif not kept and _holds(target, last):
            del target[last]
    return result


def _holds(container: Any, step: str | int) -> bool:
    if isinstance(step, int):
        return isinstance(container, list) and step < len(container)
    return isinstance(container, dict) and step in container


def _walk(value: Any, steps: list[str | int]) -> Any:
    for step in steps:
        if not _holds(value, step):
            return None
        value = value[step]
    return value
