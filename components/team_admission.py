"""Team isolation at admission: what RBAC cannot hold, refused by the API server itself.

RBAC lets a member bind a Role they hold to anyone, and name any Volcano queue in a Job they may create; a pod that
tolerates the Trainium taint on ``default-scheduler`` skips the queues altogether. Each rule here is one
ValidatingAdmissionPolicy (``admissionregistration.k8s.io/v1``, GA since Kubernetes 1.30: Kubernetes docs, "Validating
Admission Policy") with one validation and its own message, and a binding that denies (``validationActions: [Deny]``)
in every namespace labelled ``trainium-eks/team``. The policies read the team from that label of the namespace
(``namespaceObject``), so four policies hold any number of teams, and a team gains nothing by renaming what it owns.
``failurePolicy: Fail``: an expression that cannot be evaluated refuses the request.

Every requester is held, the platform's controllers included: Volcano's job controller creates a Job's PodGroup with
the Job's queue, and its pods with the Job's ``schedulerName`` (``volcano``; Volcano
pkg/controllers/job/job_controller_util.go, createJobPod), so a team's own Jobs pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from trainium_eks import layout

PART_OF = {"app.kubernetes.io/part-of": "trainium-eks"}
WRITES = ["CREATE", "UPDATE"]


def cel(text: str) -> str:
    """``text`` as a CEL string literal: the platform's names, which hold no quote or backslash to escape."""
    if "'" in text or "\\" in text:
        raise ValueError(f"{text!r} needs escaping as a CEL string")
    return f"'{text}'"


# The namespace's team, as the platform labels the namespace (components/teams.py), and the names derived from it.
TEAM = {"name": "team", "expression": f"namespaceObject.metadata.labels[{cel(layout.TEAM_LABEL)}]"}
GROUP = {"name": "group", "expression": f"{cel(layout.team_group(''))} + variables.team"}
QUEUE = {"name": "queue", "expression": f"{cel(layout.team_namespace(''))} + variables.team"}  # TeamConfig.queue

# A container asks for Neuron devices or cores (every resource under aws.amazon.com/neuron) or EFA interfaces, in its
# requests or limits (an extended resource's limits are copied to requests when requests omit it).
_ASKS = f"r.startsWith({cel(layout.NEURON_DEVICE_RESOURCE)}) || r == {cel(layout.EFA_RESOURCE)}"
_CONTAINER_ASKS = (
    f"has(c.resources) && ((has(c.resources.requests) && c.resources.requests.exists(r, {_ASKS})) || "
    f"(has(c.resources.limits) && c.resources.limits.exists(r, {_ASKS})))"
)
ACCELERATORS = {
    "name": "accelerators",
    "expression": f"object.spec.containers.exists(c, {_CONTAINER_ASKS}) || "
    f"(has(object.spec.initContainers) && object.spec.initContainers.exists(c, {_CONTAINER_ASKS}))",
}
# A toleration of the Trainium taint: its key, or an empty key with operator Exists, which tolerates every taint.
TOLERATES_TRAINIUM = {
    "name": "toleratesTrainium",
    "expression": "has(object.spec.tolerations) && object.spec.tolerations.exists(t, "
    f"(has(t.key) && t.key == {cel(layout.NEURON_TAINT_KEY)}) || "
    "((!has(t.key) || t.key == '') && has(t.operator) && t.operator == 'Exists'))",
}


def _rule(group: str, resource: str, operations: list[str], version: str = "*") -> dict:
    return {"apiGroups": [group], "apiVersions": [version], "resources": [resource], "operations": operations}


@dataclass(frozen=True)
class AdmissionRule:
    """One ValidatingAdmissionPolicy: what it matches, the variables it reads, the rule and its message."""

    name: str
    resource_rules: tuple[dict, ...]
    variables: tuple[dict, ...]
    expression: str
    message: str  # shown when messageExpression cannot be evaluated
    message_expression: str


RULES = (
    AdmissionRule(
        name="trainium-eks-team-role-binding-subjects",
        resource_rules=(_rule("rbac.authorization.k8s.io", "rolebindings", WRITES, "v1"),),
        variables=(TEAM, GROUP),
        # A ServiceAccount subject without a namespace is the binding's namespace's (Kubernetes RBAC, "Referring to
        # subjects"); any other namespace's account, a User and any other Group are refused.
        expression="!has(object.subjects) || object.subjects.all(s, "
        "(s.kind == 'Group' && s.name == variables.group) || "
        "(s.kind == 'ServiceAccount' && (!has(s.namespace) || s.namespace == request.namespace)))",
        message="a RoleBinding in a team namespace names only the team's group and the namespace's own service accounts",
        message_expression="'a RoleBinding in ' + request.namespace + ' names only the group ' + variables.group + "
        "' and service accounts of ' + request.namespace + '; bind other principals through the platform stack'",
    ),
    AdmissionRule(
        name="trainium-eks-team-volcano-queue",
        resource_rules=(
            _rule("batch.volcano.sh", "jobs", WRITES),
            _rule("scheduling.volcano.sh", "podgroups", WRITES),
        ),
        variables=(TEAM, QUEUE),
        expression="has(object.spec.queue) && object.spec.queue == variables.queue",
        message="a Volcano Job or PodGroup in a team namespace names the team's own queue",
        message_expression="'a ' + request.kind.kind + ' in ' + request.namespace + ' names the queue ' + "
        "variables.queue + ', not ' + (has(object.spec.queue) ? object.spec.queue : 'none')",
    ),
    AdmissionRule(
        name="trainium-eks-team-accelerator-pods-volcano",
        resource_rules=(_rule("", "pods", WRITES, "v1"),),
        variables=(ACCELERATORS, TOLERATES_TRAINIUM),
        expression="!(variables.accelerators || variables.toleratesTrainium) || "
        f"(has(object.spec.schedulerName) && object.spec.schedulerName == {cel(layout.VOLCANO_SCHEDULER)})",
        message="a pod in a team namespace that requests Neuron or EFA devices or tolerates the Trainium taint is "
        f"scheduled by Volcano (schedulerName: {layout.VOLCANO_SCHEDULER})",
        message_expression="'a pod in ' + request.namespace + ' that requests Neuron or EFA devices or tolerates "
        f"the Trainium taint is scheduled by Volcano (schedulerName: {layout.VOLCANO_SCHEDULER}), so that the queue of "
        "its team admits it; submit it as a Volcano Job'",
    ),
    AdmissionRule(
        name="trainium-eks-team-pods-unbound",
        # Binding a pending pod goes through pods/binding, which this rule does not match.
        resource_rules=(_rule("", "pods", ["CREATE"], "v1"),),
        variables=(),
        # A pod created with spec.nodeName skips every scheduler, the taint's NoSchedule and the queues with it
        # (Kubernetes docs, "Assigning Pods to Nodes", nodeName).
        expression="!has(object.spec.nodeName) || object.spec.nodeName == ''",
        message="a pod in a team namespace is created without spec.nodeName, so that a scheduler places it",
        message_expression="'a pod in ' + request.namespace + ' is created without spec.nodeName (it names ' + "
        "object.spec.nodeName + '), so that a scheduler places it under the Trainium taint and the team queue'",
    ),
)


def policy_spec(rule: AdmissionRule) -> dict:
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [dict(r) for r in rule.resource_rules]},
        "variables": [dict(v) for v in rule.variables],
        "validations": [{"expression": rule.expression, "message": rule.message, "messageExpression": rule.message_expression}],
    }


def binding_spec(rule: AdmissionRule) -> dict:
    return {
        "policyName": rule.name,
        "validationActions": ["Deny"],
        "matchResources": {
            "namespaceSelector": {"matchExpressions": [{"key": layout.TEAM_LABEL, "operator": "Exists"}]},
        },
    }


class TeamAdmission(pulumi.ComponentResource):
    """The admission policies of ``RULES`` and their bindings to the team namespaces."""

    def __init__(self, name: str, depends_on: list[pulumi.Resource], opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:teams:TeamAdmission", name, None, opts)
        for rule in RULES:
            policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
                f"{name}-{rule.name}",
                metadata={"name": rule.name, "labels": PART_OF},
                spec=policy_spec(rule),
                # The custom resources' rules are type-checked against their CRDs: Volcano's come first.
                opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
            )
            k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                f"{name}-{rule.name}",
                metadata={"name": rule.name, "labels": PART_OF},
                spec=binding_spec(rule),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
            )
        self.register_outputs({})
