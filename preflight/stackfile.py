"""Load a stack the way the Pulumi CLI does: Pulumi.yaml, then stacks/Pulumi.<stack>.yaml.

The result is the flat config map the CLI passes a program: keys ``<namespace>:<key>`` (project keys without
a namespace get the project's), every value a string (structured values JSON-encoded), project defaults
applied for keys the stack leaves out, and ``{secure: ...}`` values marked secret.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
# Secure values cannot be decrypted offline; the program sees this stand-in, marked secret.
SECRET_PLACEHOLDER = "preflight-secret"


class StackFileError(Exception):
    """A stack or project file that cannot be read; the message is one line naming the file and the fix."""


@dataclass(frozen=True)
class StackSettings:
    project: str
    stack: str
    path: Path
    config: dict[str, str]
    secret_keys: tuple[str, ...]


def cli_string(value: Any) -> str:
    """How the CLI hands a config value to a program."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _read_yaml(path: Path) -> dict:
    try:
        document = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise StackFileError(f"{path}: not found") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise StackFileError(f"{path}: invalid YAML{where}; fix the indentation or quoting there") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise StackFileError(f"{path}: expected a mapping at the top level")
    return document


def stack_names(root: Path = REPO_ROOT) -> list[str]:
    """The stacks that have a settings file in the project's stack config directory."""
    project = _read_yaml(root / "Pulumi.yaml")
    directory = root / project.get("stackConfigDir", ".")
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in directory.glob("Pulumi.*.yaml"))


def load(stack: str, stack_file: Path | None = None, root: Path = REPO_ROOT) -> StackSettings:
    project_doc = _read_yaml(root / "Pulumi.yaml")
    project = project_doc["name"]
    path = stack_file or root / project_doc.get("stackConfigDir", ".") / f"Pulumi.{stack}.yaml"
    if stack_file is None and not path.exists():
        known = ", ".join(stack_names(root)) or "none"
        raise StackFileError(f"stack '{stack}' has no {path.relative_to(root)}; known stacks: {known} (or pass --stack-file)")
    stack_doc = _read_yaml(path)
    unknown_sections = sorted(set(stack_doc) - {"config", "secretsprovider", "encryptionsalt", "encryptedkey", "environment"})
    if unknown_sections:
        raise StackFileError(f"{path}: unknown top-level key '{unknown_sections[0]}'; config keys belong under 'config:'")
    raw = stack_doc.get("config") or {}
    if not isinstance(raw, dict):
        raise StackFileError(f"{path}: 'config' must be a mapping of keys to values")

    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in raw.items():
        full_key = key if ":" in key else f"{project}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret_keys.append(full_key)
            value = SECRET_PLACEHOLDER
        config[full_key] = cli_string(value)
    for key, spec in (project_doc.get("config") or {}).items():
        full_key = key if ":" in key else f"{project}:{key}"
        if full_key not in config and isinstance(spec, dict) and "default" in spec:
            config[full_key] = cli_string(spec["default"])
    return StackSettings(project, stack, path, config, tuple(sorted(secret_keys)))
