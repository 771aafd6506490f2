"""The API server's side of a ValidatingAdmissionPolicy, for tests: which policies a request meets (their bindings'
resource rules and namespace selectors), and their CEL expressions evaluated by CEL's C++ implementation
(cel-expr-python) with the variables Kubernetes binds: ``object``, ``oldObject``, ``request``, ``namespaceObject``,
``params`` and ``variables`` (Kubernetes docs, "Validating Admission Policy"; the expressions type-checked as ``dyn``).

A validation that evaluates to false refuses with its messageExpression (or message); one that cannot be evaluated is
reported as an error, which ``failurePolicy: Fail`` would turn into a refusal too: tests ask for neither by accident.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cel_expr_python import cel

BOUND = ("object", "oldObject", "request", "params", "namespaceObject", "variables")
ENVIRONMENT = cel.NewEnv(variables={name: cel.Type.DYN for name in BOUND})
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set on every namespace by the API server


class EvaluationError(Exception):
    """An expression that Kubernetes could not evaluate either (a missing field read without ``has``)."""


def evaluate(expression: str, bound: dict):
    result = ENVIRONMENT.compile(expression).eval(data=bound)
    if result.type() == cel.Type.ERROR:
        raise EvaluationError(f"{expression}: {result.value()}")
    return result.plain_value()


def selects(selector: dict, labels: dict) -> bool:
    """Kubernetes label selector semantics: every matchLabels pair and every matchExpressions term holds."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for term in selector.get("matchExpressions", []):
        key, operator, values = term["key"], term["operator"], term.get("values", [])
        held = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not held:
            return False
    return True


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    resource: str


@dataclass(frozen=True)
class Request:
    """One admission request: the object, the namespace it is in (as the API server holds it) and the operation."""

    kind: Kind
    object: dict
    namespace: dict  # the Namespace object
    operation: str = "CREATE"
    old_object: dict | None = None

    def bound(self) -> dict:
        name = self.namespace["metadata"]["name"]
        labels = {**self.namespace["metadata"].get("labels", {}), NAMESPACE_NAME_LABEL: name}
        return {
            "object": self.object,
            "oldObject": self.old_object,
            "request": {
                "kind": {"group": self.kind.group, "version": self.kind.version, "kind": self.kind.kind},
                "resource": {"group": self.kind.group, "version": self.kind.version, "resource": self.kind.resource},
                "name": self.object.get("metadata", {}).get("name", ""),
                "namespace": name,
                "operation": self.operation,
                "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            },
            "namespaceObject": {"metadata": {**self.namespace["metadata"], "labels": labels}},
            "params": None,
        }


@dataclass
class Policy:
    """A ValidatingAdmissionPolicy and its binding, as the plan declares them."""

    policy: dict
    binding: dict
    name: str = field(init=False)

    def __post_init__(self):
        self.name = self.policy["metadata"]["name"]

    def meets(self, request: Request) -> bool:
        """The policy's resource rules and the binding's namespace selector both match the request."""
        namespace_labels = {
            **request.namespace["metadata"].get("labels", {}),
            NAMESPACE_NAME_LABEL: request.namespace["metadata"]["name"],
        }
        selector = self.binding["spec"]["matchResources"].get("namespaceSelector", {})
        return selects(selector, namespace_labels) and any(
            _listed(request.kind.group, rule["apiGroups"])
            and _listed(request.kind.version, rule["apiVersions"])
            and _listed(request.kind.resource, rule["resources"])
            and _listed(request.operation, rule["operations"])
            for rule in self.policy["spec"]["matchConstraints"]["resourceRules"]
        )

    def refusals(self, request: Request) -> list[str]:
        """The messages of the validations ``request`` fails (none if the policy does not meet it)."""
        if not self.meets(request):
            return []
        bound = request.bound()
        variables: dict = {}
        for variable in self.policy["spec"].get("variables", []):
            variables[variable["name"]] = evaluate(variable["expression"], {**bound, "variables": variables})
        bound["variables"] = variables
        return [
            evaluate(v["messageExpression"], bound) if "messageExpression" in v else v["message"]
            for v in self.policy["spec"]["validations"]
            if evaluate(v["expression"], bound) is not True
        ]


def _listed(value: str, allowed: list[str]) -> bool:
    return "*" in allowed or value in allowed
