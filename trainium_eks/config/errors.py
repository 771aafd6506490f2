"""One line per configuration problem: ``<key>: <problem>; <fix>``, from a pydantic error or a platform rule."""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import Any

from pulumi.errors import RunError
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from trainium_eks.cli import one_line

# A rule's own error: its message already reads "<problem>; <fix>".
RULE_ERROR = "platform_rule"


class ConfigError(RunError):
    """A stack configuration problem. ``RunError`` makes the Pulumi CLI print it without a traceback."""

    def __init__(self, key: str, problem: str, fix: str):
        self.key, self.problem, self.fix = key, problem, fix
        super().__init__(one_line(f"{key}: {problem}; {fix}"))  # keys and values may come straight from the file


def suggest(word: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(sorted(candidates))}"


def _shown(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


# pydantic error type -> (problem, fix); {input} is the offending value as JSON.
_TYPE_ERRORS = {
    "int_type": ("expected an integer, got {input}", "write a whole number"),
    "int_parsing": ("expected an integer, got {input}", "write a whole number"),
    "int_from_float": ("expected an integer, got {input}", "write a whole number"),
    "bool_type": ("expected a boolean, got {input}", "write true or false"),
    "bool_parsing": ("expected a boolean, got {input}", "write true or false"),
    "float_type": ("expected a number, got {input}", "write a number such as 0.5"),
    "float_parsing": ("expected a number, got {input}", "write a number such as 0.5"),
    "string_type": ("expected a string, got {input}", "quote the value in the stack file"),
    "list_type": ("expected a list, got {input}", "write a YAML list"),
    "tuple_type": ("expected a list, got {input}", "write a YAML list"),
    "dict_type": ("expected a mapping, got {input}", "write key: value pairs"),
    "model_type": ("expected a mapping, got {input}", "write key: value pairs"),
    "model_attributes_type": ("expected a mapping, got {input}", "write key: value pairs"),
    "json_invalid": ("not valid structured data", "write it as a YAML list or mapping"),
    "too_long": ("has more than {max_length} entries", "list at most {max_length}"),
    "too_short": ("empty", "list at least {min_length}"),
}


def key_path(prefix: str, loc: tuple) -> str:
    """``trainium-eks:trainiumNodeGroups[0].labels.team`` from pydantic's location tuple."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part != "[key]":
            text += f".{part}" if text else str(part)
    return text if ":" in text else prefix + text


def _field_names(model: type[BaseModel], loc: tuple) -> list[str]:
    """The keys a mapping at ``loc`` may hold, for did-you-mean."""
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = next((f for name, f in model.model_fields.items() if (f.alias or name) == part), None)
        inner = getattr(field, "annotation", None) if field else None
        for candidate in (inner, *getattr(inner, "__args__", ())):
            for arg in (candidate, *getattr(candidate, "__args__", ())):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    model = arg
    return [f.alias or name for name, f in model.model_fields.items()]


def from_validation(error: ValidationError, model: type[BaseModel], prefix: str, missing_fix) -> ConfigError:
    """The first error of a failed validation as one ConfigError."""
    detail: ErrorDetails = error.errors(include_url=False)[0]
    key, kind, context = key_path(prefix, detail["loc"]), detail["type"], detail.get("ctx") or {}
    if kind == RULE_ERROR:
        return ConfigError(key, context["problem"], context["fix"])
    if kind == "extra_forbidden":
        return ConfigError(key, "unknown key", suggest(str(detail["loc"][-1]), _field_names(model, detail["loc"])))
    if kind == "missing":
        return ConfigError(key, "missing", missing_fix(detail["loc"]))
    if kind in _TYPE_ERRORS:
        problem, fix = _TYPE_ERRORS[kind]
        values = {"input": _shown(detail.get("input")), **context}
        return ConfigError(key, problem.format(**values), fix.format(**values))
    return ConfigError(key, detail["msg"], "see docs/configuration.md")
