"""Load a stack the way the Pulumi CLI does: Pulumi.yaml, then stacks/Pulumi.<stack>.yaml.

The result is the flat config map the CLI passes a program: keys ``<namespace>:<key>`` (project keys without
a namespace get the project's), every value a string (structured values JSON-encoded), project defaults
applied for keys the stack leaves out, and ``{secure: ...}`` values marked secret.

Both files are untrusted input: reading is bounded in size and nesting, YAML anchors and aliases are refused
(stack files do not need them, and they are how a small file expands into a huge one), and every problem is
one line ``<path>: <problem>; <fix>``.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from trainium_eks import files
from trainium_eks.config import config_types

REPO_ROOT = Path(__file__).resolve().parent.parent
# Secure values cannot be decrypted offline; the program sees this stand-in, marked secret.
SECRET_PLACEHOLDER = "preflight-secret"
# The shipped stack files are a few KiB; a megabyte is far beyond any real one.
MAX_STACK_FILE_BYTES = 2**20
# The shipped files nest a few levels deep; the bound keeps the YAML composer far from Python's recursion limit.
MAX_YAML_DEPTH = 64
# What the Pulumi CLI accepts as a stack name; it also keeps the name from leaving the stack config directory.
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
STACK_SECTIONS = frozenset({"config", "secretsprovider", "encryptionsalt", "encryptedkey", "environment"})
STACK_FILE_FIX = "pass a Pulumi stack settings file (UTF-8 YAML)"
# A directory read instead of Pulumi.yaml's stackConfigDir, for the repository's project, with the stacks' policy
# configs in its policy-config/ instead of policies/config/: edited copies of the stacks are planned and checked
# (tests/test_user_edits.py runs the suite on them) without touching the checkout. Read once; the CLI's subprocesses
# inherit it. The Pulumi CLI does not read it.
STACK_DIR_VARIABLE = "PREFLIGHT_STACK_DIR"
STACK_DIR_OVERRIDE = os.environ.get(STACK_DIR_VARIABLE) or None
POLICY_CONFIG_DIR = REPO_ROOT / "policies" / "config"


class StackFileError(Exception):
    """A stack or project file (or, from ``read_text``, any input file) that cannot be read; the message is one
    line naming the file and the fix."""


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


def read_text(path: Path, max_bytes: int, fix: str) -> str:
    """``trainium_eks.files.read_text``, its refusals as ``StackFileError``."""
    try:
        return files.read_text(path, max_bytes, fix)
    except files.UnreadableFile as error:
        raise StackFileError(str(error)) from None


class RefusedYAML(yaml.MarkedYAMLError):
    """YAML that parses but that a stack file may not contain; ``problem`` reads "<problem>; <fix>"."""


class StackFileLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without anchors and aliases, with bounded nesting, and timestamps left as the
    strings the Pulumi CLI (Go's YAML decoder into ``interface{}``) sees."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.depth = 0

    def construct_mapping(self, node, deep=False):
        # The CLI reads stack files with gopkg.in/yaml.v3 (pulumi sdk/go/common/encoding/marshal.go), whose decoder
        # refuses a key given twice ("mapping key ... already defined at line N", decode.go, uniqueKeys) where
        # PyYAML would keep the last value.
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                if key in seen:
                    problem = f"mapping key '{key}' already defined at line {seen[key] + 1}; keep one of the two"
                    raise RefusedYAML(problem=problem, problem_mark=key_node.start_mark)
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
            problem = "YAML anchors and aliases are not supported; write the value out"
            raise RefusedYAML(problem=problem, problem_mark=event.start_mark)
        if self.depth >= MAX_YAML_DEPTH:
            problem = f"nested deeper than {MAX_YAML_DEPTH} levels; flatten the value"
            raise RefusedYAML(problem=problem, problem_mark=event.start_mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


StackFileLoader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)
# Booleans as the CLI's decoder reads them into interface{}: true and false alone (in three spellings); YAML 1.1's
# yes, no, on and off stay strings (gopkg.in/yaml.v3 README, "Compatibility"). PyYAML would read them as booleans.
StackFileLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
StackFileLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _plain(value: Any, where: str = "") -> str | None:
    """What in ``value`` the CLI cannot pass a program (a key that is not a string, a binary or set value), as
    "<problem>; <fix>"; None when it is plain data. ``where`` is the dotted path, empty at the top level."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                shown = json.dumps(key) if isinstance(key, (int, float, type(None))) else repr(key)
                place = f"under '{where}'" if where else "at the top level"
                return f'key {shown} {place} is not a string; quote it ("{shown}") or rename it'
            problem = _plain(item, f"{where}.{key}" if where else key)
            if problem:
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            problem = _plain(item, f"{where}[{index}]")
            if problem:
                return problem
    elif not isinstance(value, (str, int, float, type(None))):  # bool is an int
        kind = type(value).__name__
        return f"'{where}': a {kind} value (from a YAML tag) is not supported; write a string, number, list or mapping"
    return None


def _read_yaml(path: Path, text: str | None = None) -> dict:
    text = read_text(path, MAX_STACK_FILE_BYTES, STACK_FILE_FIX) if text is None else text
    try:
        document = yaml.load(text, Loader=StackFileLoader)  # a SafeLoader subclass
    except RefusedYAML as error:
        raise StackFileError(f"{path}: line {error.problem_mark.line + 1}: {error.problem}") from None
    except yaml.reader.ReaderError as error:
        where = f"character U+{error.character:04X} at offset {error.position}"
        raise StackFileError(f"{path}: {where} is not allowed in YAML; remove it or write it escaped in double quotes") from None
    except yaml.YAMLError as error:
        mark, problem = getattr(error, "problem_mark", None), getattr(error, "problem", None)
        where = f" at line {mark.line + 1}" if mark else ""
        why = f" ({' '.join(problem.split())})" if problem else ""
        raise StackFileError(f"{path}: invalid YAML{where}{why}; fix the indentation or quoting there") from None
    except ValueError as error:  # int() of a number longer than Python converts (sys.get_int_max_str_digits)
        raise StackFileError(f"{path}: a value cannot be read ({str(error).split(':')[0]}); quote it") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise StackFileError(f"{path}: expected a mapping at the top level; write key: value pairs")
    problem = _plain(document)
    if problem:
        raise StackFileError(f"{path}: {problem}")
    return document


@dataclass(frozen=True)
class Project:
    name: str
    stack_config_dir: Path  # relative to the project's root, as written in Pulumi.yaml
    config: Mapping[str, Any]  # key -> its declaration (type, default, description); read-only, as parses are shared


def read_project(root: Path = REPO_ROOT) -> Project:
    path = root / "Pulumi.yaml"
    return _project(path, read_text(path, MAX_STACK_FILE_BYTES, STACK_FILE_FIX))


@functools.lru_cache(maxsize=8)
def _project(path: Path, text: str) -> Project:
    """Pulumi.yaml parsed, once per text: a stack's load reads it twice, and a batch's workers inherit the parse."""
    document = _read_yaml(path, text)
    name, stack_config_dir, config = document.get("name"), document.get("stackConfigDir"), document.get("config")
    if not isinstance(name, str) or not name:
        raise StackFileError(f"{path}: 'name' must be the project's name (a string); set name: <project>")
    if stack_config_dir is not None and not isinstance(stack_config_dir, str):
        raise StackFileError(f"{path}: 'stackConfigDir' must be a directory path (a string); fix or remove it")
    if config is not None and not isinstance(config, dict):
        raise StackFileError(f"{path}: 'config' must be a mapping of keys to their declarations")
    for key, spec in (config or {}).items():
        problem = config_types.declaration_problem(key, spec)
        if problem:
            raise StackFileError(f"{path}: {problem}")
    return Project(name, Path("." if stack_config_dir is None else stack_config_dir), MappingProxyType(config or {}))


def stack_directory(root: Path = REPO_ROOT) -> Path:
    """Where the project's stack files are: ``$PREFLIGHT_STACK_DIR`` for the repository's, else its stackConfigDir."""
    if STACK_DIR_OVERRIDE is not None and root == REPO_ROOT:
        return Path(STACK_DIR_OVERRIDE).resolve()
    return root / read_project(root).stack_config_dir


def policy_config_directory() -> Path:
    """Where the stacks' policy configs (``--policy-pack-config``) are: policies/config, or ``$PREFLIGHT_STACK_DIR``'s."""
    return POLICY_CONFIG_DIR if STACK_DIR_OVERRIDE is None else Path(STACK_DIR_OVERRIDE).resolve() / "policy-config"


def stack_names(root: Path = REPO_ROOT) -> list[str]:
    """The stacks that have a settings file in the project's stack config directory."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in stack_directory(root).glob("Pulumi.*.yaml"))


def check_stack_name(stack: str) -> str:
    if not STACK_NAME.fullmatch(stack):
        raise StackFileError(f"stack {stack!r}: not a stack name; use letters, digits, '-', '_' and '.' (at most 100)")
    return stack


def _full_key(key: str, project: str) -> str:
    return key if ":" in key else f"{project}:{key}"


def load(
    stack: str, stack_file: Path | None = None, root: Path = REPO_ROOT, *, otherwise: str = "or pass --stack-file"
) -> StackSettings:
    """``stack``'s settings from its stack file (or ``stack_file``); ``otherwise`` is the way out a missing one names."""
    check_stack_name(stack)
    project = read_project(root)
    path = stack_directory(root) / f"Pulumi.{stack}.yaml" if stack_file is None else stack_file
    if stack_file is None and not path.exists():
        known = ", ".join(stack_names(root)) or "none"
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        raise StackFileError(f"stack '{stack}' has no {shown}; known stacks: {known} ({otherwise})")
    stack_doc = _read_yaml(path)
    unknown_sections = sorted(set(stack_doc) - STACK_SECTIONS)
    if unknown_sections:
        raise StackFileError(f"{path}: unknown top-level key '{unknown_sections[0]}'; config keys belong under 'config:'")
    raw = stack_doc.get("config")
    if raw is None:  # `config:` with nothing under it
        raw = {}
    if not isinstance(raw, dict):
        raise StackFileError(f"{path}: 'config' must be a mapping of keys to values")

    declared = {_full_key(key, project.name): spec for key, spec in project.config.items()}
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in raw.items():
        full_key = _full_key(key, project.name)
        if value is None:  # `key:` or `key: null`: nothing the program could read as the key's type
            raise StackFileError(f"{path}: '{full_key}' has no value (null); give it one, or remove the key for its default")
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret_keys.append(full_key)
            config[full_key] = SECRET_PLACEHOLDER  # ciphertext: the CLI checks its type once decrypted
            continue
        config[full_key] = cli_string(value)
        problem = config_types.stack_value_problem(declared.get(full_key), config[full_key], isinstance(value, (dict, list)))
        if problem:
            raise StackFileError(f"{path}: '{full_key}' {problem}; write it as Pulumi.yaml declares it")
    for full_key, spec in declared.items():
        if full_key not in config and isinstance(spec, dict) and "default" in spec:
            config[full_key] = cli_string(spec["default"])
    return StackSettings(project.name, stack, path, config, tuple(sorted(secret_keys)))
