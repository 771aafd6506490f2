"""Team isolation at admission: what RBAC cannot hold, refused by the API server itself.

RBAC lets a member bind a Role they hold to anyone, and name any Volcano queue in a Job they may create; a pod that
tolerates the Trainium taint on ``default-scheduler`` skips the queues altogether. Each rule here is one
ValidatingAdmissionPolicy (``admissionregistration.k8s.io/v1``, GA since Kubernetes 1.30: Kubernetes docs, "Validating
Admission Policy") with one validation and its own message, and a binding that denies (``validationActions: [Deny]``)
in every namespace labelled ``trainium-eks/team``. The policies read the team from that label of the namespace
(``namespaceObject``), so the same policies hold any number of teams, and a team gains nothing by renaming what it
owns.
``failurePolicy: Fail``: an expression that cannot be evaluated refuses the request.

Every requester is held, the platform's controllers included: Volcano's job controller creates a Job's PodGroup with
the Job's queue, and its pods with the Job's ``schedulerName`` (``volcano``; Volcano
pkg/controllers/job/job_controller_util.go, createJobPod), so a team's own Jobs pass.

A team's share is of each Trainium group (docs/teams.md, "Capacity"): the namespace's annotation
``trainium-eks/nodes.<group>`` holds its whole nodes of the group, which the platform writes (``components/teams``)
and a member cannot change (the team's Role holds no verb on namespaces). ``namespaceObject`` carries the namespace's
labels and annotations (Kubernetes apiserver pkg/admission/plugin/cel/filter.go, CreateNamespaceObject). A pod on
Trainium names a group the team holds nodes of; a Volcano or batch Job puts its Trainium pods on one such group and asks
there at most what those nodes advertise. A policy sees one object: what the team's Jobs hold together on a group is
not bounded here, only by the namespace's quota and the team's queue, summed over the groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from trainium_eks import layout, shares

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


def asks_accelerators(spec: str) -> str:
    """Whether the pod spec ``spec`` (a CEL expression) has a container or init container that asks for any."""
    return (
        f"{spec}.containers.exists(c, {_CONTAINER_ASKS}) || "
        f"(has({spec}.initContainers) && {spec}.initContainers.exists(c, {_CONTAINER_ASKS}))"
    )


def tolerates_trainium(spec: str) -> str:
    """Whether ``spec`` tolerates the Trainium taint: by its key, or by an empty key with operator Exists (every taint)."""
    return (
        f"has({spec}.tolerations) && {spec}.tolerations.exists(t, "
        f"(has(t.key) && t.key == {cel(layout.NEURON_TAINT_KEY)}) || "
        "((!has(t.key) || t.key == '') && has(t.operator) && t.operator == 'Exists'))"
    )


def node_group_of(spec: str) -> str:
    """The node group ``spec``'s nodeSelector names ('' if none): nodeSelector and node affinity must both hold
    (Kubernetes docs, "Assigning Pods to Nodes"), so a pod that names one lands on that group's nodes alone."""
    label = cel(layout.NODE_GROUP_LABEL)
    return f"has({spec}.nodeSelector) && {label} in {spec}.nodeSelector ? {spec}.nodeSelector[{label}] : ''"


# The team's whole nodes of the group ``variables.group`` names, from the namespace's annotation (none: no node).
_KEY = f"{cel(layout.TEAM_GROUP_NODES_ANNOTATION)} + variables.group"
_ANNOTATIONS = "namespaceObject.metadata.annotations"
NODES = {
    "name": "nodes",
    "expression": f"has({_ANNOTATIONS}) && ({_KEY}) in {_ANNOTATIONS} ? int({_ANNOTATIONS}[{_KEY}]) : 0",
}
ACCELERATORS = {"name": "accelerators", "expression": asks_accelerators("object.spec")}
TOLERATES_TRAINIUM = {"name": "toleratesTrainium", "expression": tolerates_trainium("object.spec")}
ON_TRAINIUM = "variables.accelerators || variables.toleratesTrainium"


def _requested(container: str, resource: str) -> str:
    """What ``container`` asks for of ``resource`` (CEL expressions), its limit standing for a request it does not
    set; a whole number, or the expression cannot be evaluated and the request is refused (failurePolicy: Fail)."""

    def sets(kind: str) -> str:
        return f"has({container}.resources) && has({container}.resources.{kind}) && {resource} in {container}.resources.{kind}"

    def amount(kind: str) -> str:
        return f"int({container}.resources.{kind}[{resource}])"

    return f"({sets('requests')} ? {amount('requests')} : ({sets('limits')} ? {amount('limits')} : 0))"


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
        expression=f"!({ON_TRAINIUM}) || "
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
    AdmissionRule(
        name="trainium-eks-team-pods-node-group",
        resource_rules=(_rule("", "pods", WRITES, "v1"),),
        variables=(TEAM, ACCELERATORS, TOLERATES_TRAINIUM, {"name": "group", "expression": node_group_of("object.spec")}, NODES),
        expression=f"!({ON_TRAINIUM}) || variables.nodes > 0",
        message="a pod in a team namespace that requests Neuron or EFA devices or tolerates the Trainium taint names, in "
        f"its nodeSelector {layout.NODE_GROUP_LABEL}, a node group of which the team holds nodes",
        message_expression="'a pod in ' + request.namespace + ' that requests Neuron or EFA devices or tolerates the "
        f"Trainium taint names, in its nodeSelector {layout.NODE_GROUP_LABEL}, a node group of which team ' + "
        "variables.team + ' holds nodes, not ' + (variables.group == '' ? 'none' : variables.group) + "
        f"'; the namespace annotations {layout.TEAM_GROUP_NODES_ANNOTATION}<group> say which'",
    ),
)


@dataclass(frozen=True)
class JobShape:
    """Where a kind of Job keeps its pod templates (``t``, in CEL), and how many pods of each it runs at once."""

    kind: str  # as a message names it
    resource_rule: dict
    templates: str
    spec: str  # the pod spec of the template ``{t}``
    pods: str  # the pods at once of the template ``{t}``


JOB_SHAPES = (
    # Volcano's job controller creates ``replicas`` pods of each task (pkg/controllers/job/job_controller_actions.go,
    # syncJob); a task without replicas has none.
    JobShape(
        "Volcano Job",
        _rule("batch.volcano.sh", "jobs", WRITES),
        "(has(object.spec.tasks) ? object.spec.tasks : [])",
        "{t}.template.spec",
        "(has({t}.replicas) ? {t}.replicas : 0)",
    ),
    # A Job runs at most ``parallelism`` pods at once, 1 by default (Kubernetes docs, "Jobs", Parallel execution).
    JobShape(
        "Job",
        _rule("batch", "jobs", WRITES, "v1"),
        "[object.spec.template]",
        "{t}.spec",
        "(has(object.spec.parallelism) ? object.spec.parallelism : 1)",
    ),
)


def _fleet(groups: Sequence[shares.GroupNodes]) -> str:
    """What one node of each group advertises, as a CEL map of maps (every quota'd resource, zeros included)."""
    return "{" + ", ".join(f"{cel(g.name)}: {_per_node(g.per_node)}" for g in groups) + "}"


def _per_node(amounts: dict[str, int]) -> str:
    return "{" + ", ".join(f"{cel(r)}: {amounts.get(r, 0)}" for r in shares.QUOTAED_RESOURCES) + "}"


def share_rule(shape: JobShape, groups: Sequence[shares.GroupNodes]) -> AdmissionRule:
    """A Job's Trainium pods run on one node group the team holds nodes of, and ask there at most what those nodes
    advertise. Standard CEL has no sum (Kubernetes' list library adds one, which the CEL the tests evaluate with lacks),
    so each Trainium pod counts as the largest: the templates times the most pods of one times its largest container's
    ask (init containers apart, which count where larger: Kubernetes docs, "Init containers"). That bound is never
    below the sum, and is the sum for the tools' Jobs, whose templates are alike with one container asking."""
    spec, pods = shape.spec.format(t="t"), shape.pods.format(t="t")
    first = shape.spec.format(t="variables.trainium[0]")
    allowed = "variables.nodes * variables.perNode[r]"
    count = f"size(variables.trainium) * {pods}"
    containers = (
        f"{spec}.containers.all(c, {count} * {spec}.containers.filter(x, {_requested('x', 'r')} > 0).size() * "
        f"{_requested('c', 'r')} <= {allowed})"
    )
    init = f"(!has({spec}.initContainers) || {spec}.initContainers.all(c, {count} * {_requested('c', 'r')} <= {allowed}))"
    resources = "[" + ", ".join(map(cel, shares.QUOTAED_RESOURCES)) + "]"
    devices = cel(layout.NEURON_DEVICE_RESOURCE)
    return AdmissionRule(
        name=f"trainium-eks-team-{shape.kind.lower().replace(' ', '-')}-share",
        resource_rules=(shape.resource_rule,),
        variables=(
            TEAM,
            {"name": "fleet", "expression": _fleet(groups)},
            {
                "name": "trainium",
                "expression": f"{shape.templates}.filter(t, {asks_accelerators(spec)} || {tolerates_trainium(spec)})",
            },
            {"name": "group", "expression": f"size(variables.trainium) == 0 ? '' : ({node_group_of(first)})"},
            NODES,
            {
                "name": "perNode",
                "expression": f"variables.group in variables.fleet ? variables.fleet[variables.group] : {_per_node({})}",
            },
        ),
        expression="size(variables.trainium) == 0 || (variables.nodes > 0 && variables.trainium.all(t, "
        f"({node_group_of(spec)}) == variables.group && {resources}.all(r, {containers} && {init})))",
        message=f"a {shape.kind} in a team namespace runs its Trainium pods on one node group of which the team holds "
        "nodes, and asks there at most what those nodes advertise",
        message_expression=f"'a {shape.kind} in ' + request.namespace + ' runs its Trainium pods on one node group "
        f"(nodeSelector {layout.NODE_GROUP_LABEL}) of which team ' + variables.team + ' holds nodes, and asks there at "
        "most what they advertise, each Trainium pod counted as the largest: ' + (variables.group == '' ? 'its pods "
        "name no group' : 'the team holds ' + string(variables.nodes) + (variables.nodes == 1 ? ' node' : ' nodes') + "
        f"' of ' + variables.group + ' (' + string(variables.nodes * variables.perNode[{devices}]) + ' Neuron devices)') "
        "+ '; lower its pods, or run it on a group the team holds'",
    )


def rules(groups: Sequence[shares.GroupNodes]) -> tuple[AdmissionRule, ...]:
    """Every rule, the Jobs' bounds on the stack's Trainium groups ``groups``."""
    return (*RULES, *(share_rule(shape, groups) for shape in JOB_SHAPES))


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
    """The admission policies of ``rules`` and their bindings to the team namespaces."""

    def __init__(
        self,
        name: str,
        groups: Sequence[shares.GroupNodes],
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("trainium-eks:teams:TeamAdmission", name, None, opts)
        for rule in rules(groups):
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
