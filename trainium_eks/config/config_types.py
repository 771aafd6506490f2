"""The project's config declarations (``config:`` in Pulumi.yaml) and the type checks the Pulumi CLI makes with them.

Before any program runs, the CLI refuses a project whose ``array`` declaration has no ``items`` or whose default
is not of its declared type, and a stack whose value of a typed key is not of that type (pulumi/pulumi
``sdk/go/common/workspace/project.go``: ``Project.Validate``, ``ValidateConfigValue``, ``InferFullTypeName``;
``pkg/workspace/config.go``: ``validateStackConfigValue``; the ``object`` type since CLI 3.187.0). ``preflight``
makes the same checks, so that a stack it accepts is one the CLI accepts. The checks are the CLI's, shallow by
design: an ``object`` is any mapping; what a node group or queue must hold is the program's model
(``trainium_eks.config``).
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, model_validator

TypeName = Literal["string", "integer", "boolean", "array", "object"]


class ItemsType(BaseModel):
    model_config = ConfigDict(frozen=True)  # the CLI's schema allows other keys here

    type: TypeName
    items: ItemsType | None = None

    @model_validator(mode="after")
    def _array_has_items(self) -> ItemsType:
        if self.type == "array" and self.items is None:
            raise ValueError("an array needs 'items'")
        return self

    @property
    def full_name(self) -> str:
        return full_type_name(self.type, self.items)


class Declaration(BaseModel):
    """One key's declaration, as the CLI's project schema allows it (no other attributes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: TypeName | None = None
    items: ItemsType | None = None
    description: StrictStr | None = None
    secret: StrictBool = False
    default: Any = None
    value: Any = None

    @property
    def has_default(self) -> bool:
        return "default" in self.model_fields_set

    @property
    def full_type_name(self) -> str:
        return full_type_name(self.type or "string", self.items)


def full_type_name(type_name: str, items: ItemsType | None) -> str:
    """``array<array<string>>`` and the like, as the CLI names a type in its errors."""
    return f"array<{items.full_name}>" if items is not None else type_name


def conforms(type_name: str, items: ItemsType | None, value: Any) -> bool:
    """The CLI's ``ValidateConfigValue`` over values as YAML or JSON decode them."""
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        if isinstance(value, bool):
            return False
        if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value == math.trunc(value)):
            return True
        return isinstance(value, str) and _go_atoi(value)
    if type_name == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if type_name == "object":
        return isinstance(value, dict)
    return isinstance(value, list) and items is not None and all(conforms(items.type, items.items, v) for v in value)


def _go_atoi(text: str) -> bool:
    """Go's ``strconv.Atoi``: an optional sign and ASCII digits, nothing else."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    return digits.isascii() and digits.isdigit()


def declaration_problem(key: str, spec: Any) -> str | None:
    """Why the CLI would refuse ``key``'s declaration, as "<problem>; <fix>"; None when it accepts it."""
    if not isinstance(spec, dict):
        return None  # a plain value (string, integer, boolean), which the CLI accepts as the key's value
    try:
        declaration = Declaration.model_validate(spec)
    except ValueError as error:
        detail = error.errors()[0]  # type: ignore[attr-defined]
        where = ".".join(str(part) for part in detail["loc"])
        return f"config key '{key}': {where + ': ' if where else ''}{detail['msg']}; see the Pulumi project file reference"
    if declaration.type == "array" and declaration.items is None:
        return f"config key '{key}' declares an array but no 'items'; add items: {{type: <type>}}"
    if declaration.type and declaration.has_default and not conforms(declaration.type, declaration.items, declaration.default):
        return f"the default of config key '{key}' is not of type '{declaration.full_type_name}'; fix the default or the type"
    return None


def stack_value_problem(spec: Any, cli_value: str, structured: bool) -> str | None:
    """Why the CLI would refuse a stack value for a key declared as ``spec``, or None.

    ``cli_value`` is the string the CLI stores (and hands the program); a list or mapping is stored as JSON
    (``structured``), which the CLI decodes again before the check. So ``2`` passes as an integer (the string
    "2" parses) and any scalar passes as a string.
    """
    if not isinstance(spec, dict) or spec.get("type") is None:
        return None
    declaration = Declaration.model_validate(spec)  # read_project has checked it
    content = json.loads(cli_value) if structured else cli_value
    if conforms(declaration.type or "string", declaration.items, content):
        return None
    return f"must be of type '{declaration.full_type_name}' (the Pulumi CLI refuses the stack otherwise)"
