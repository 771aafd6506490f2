"""The mutation cases of the teams' workspaces: a team namespace without Pod Security, a grant to a team's principal
beyond its namespace, a team Role that could loosen the team's bounds, a team volume at the file system's root, through
another team's directory or open to any claim, quotas above the capacity the node groups provide, teams' whole nodes of
a group beyond what it runs, and a quota or queue too small for one node of a group.

The cases declare their own team (``OVERRIDES``), so that the shipped stacks' teams do not matter.
``tests/test_policies.py`` merges them with the other tables.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from mutation_case import Case, edit, resource, without

from plan_graph.graph import Graph
from plan_graph.trainium_groups import trainium_groups
from policies.rules.teams import GROUP_NODES_ANNOTATION
from trainium_eks import layout, tokens

STACK = "staging"
TEAM, OTHER = "alpha", "beta"  # OTHER is any other team's name: the stack need not declare it
OVERRIDES = {"teams": [{"name": TEAM, "neuronShare": 1, "principalArns": ["arn:aws:iam::111122223333:role/alpha-researchers"]}]}
NAMESPACE_RESOURCE = f"teams-{TEAM}-namespace"
MEMBERS = f"teams-{TEAM}-members"
VOLUME = f"teams-{TEAM}-fsx"
QUOTA = f"teams-{TEAM}-quota"
TEAM_QUEUE = f"teams-{TEAM}-queue"


def team_case(case_id: str, mutate: Callable[[dict], object], words: tuple[str, ...], blames: str, count: int = 1) -> Case:
    return Case(case_id, STACK, mutate, words, blames, count, OVERRIDES)


def _member_arn(plan: dict) -> str:
    return resource(plan, tokens.EKS_ACCESS_ENTRY, f"teams-{TEAM}-member-0")["inputs"]["principalArn"]


def _added(plan: dict, like: dict, type_: str, name: str, inputs: dict) -> None:
    """A resource of ``type_`` next to ``like`` (same parent and provider), as a hand-written program would add it."""
    record = copy.deepcopy(like)
    record.update(
        type=type_,
        name=name,
        urn=like["urn"].rsplit("$", 1)[0] + f"${type_}::{name}",
        inputs=inputs,
        dependencies=[],
        propertyDependencies={key: [] for key in inputs},
    )
    plan["resources"].append(record)


def _access_policy(scope: dict) -> Callable[[dict], None]:
    def mutate(plan: dict) -> None:
        entry = resource(plan, tokens.EKS_ACCESS_ENTRY, f"teams-{TEAM}-member-0")
        inputs = {
            "clusterName": entry["inputs"]["clusterName"],
            "principalArn": _member_arn(plan),
            "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy",
            "accessScope": scope,
        }
        _added(plan, entry, tokens.EKS_ACCESS_POLICY_ASSOCIATION, f"{TEAM}-edit", inputs)

    return mutate


def _group_binding(type_: str, namespace: str | None) -> Callable[[dict], None]:
    def mutate(plan: dict) -> None:
        binding = resource(plan, tokens.K8S_ROLE_BINDING, MEMBERS)
        inputs = copy.deepcopy(binding["inputs"])
        inputs["metadata"] = {"name": f"{TEAM}-extra"} | ({"namespace": namespace} if namespace else {})
        inputs["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}
        _added(plan, binding, type_, f"{TEAM}-extra", inputs)

    return mutate


def _role_rule(api_group: str, resource_name: str, *verbs: str) -> Callable[[dict], None]:
    """The team's Role with one more rule."""

    def mutate(plan: dict) -> None:
        role = resource(plan, tokens.K8S_ROLE, MEMBERS)
        role["inputs"]["rules"].append({"apiGroups": [api_group], "resources": [resource_name], "verbs": list(verbs)})

    return mutate


def _unlabelled_role_in_namespace(plan: dict) -> None:
    """A Role in the team's namespace without the team's label, as a hand-written program would add it."""
    role = resource(plan, tokens.K8S_ROLE, MEMBERS)
    inputs = {
        "metadata": {"name": "escalate", "namespace": layout.team_namespace(TEAM)},
        "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]}],
    }
    _added(plan, role, tokens.K8S_ROLE, f"{TEAM}-escalate", inputs)


def _quota_above_capacity(plan: dict) -> None:
    """The team's Neuron quota one device above what the node groups provide (its share is all of it)."""
    hard = resource(plan, tokens.K8S_RESOURCE_QUOTA, QUOTA)["inputs"]["spec"]["hard"]
    key = f"requests.{layout.NEURON_DEVICE_RESOURCE}"
    hard[key] = str(int(float(hard[key])) + 1)


def _one_efa_interface_short(type_: str, name: str, *path: str, written: Callable[[int], object]) -> Callable[[dict], None]:
    """The team's quota or queue set to one EFA interface fewer than one node of the plan's Trainium group advertises
    (its instance type's, from the catalog), ``written`` as the object spells it."""

    def mutate(plan: dict) -> None:
        (group,) = trainium_groups(Graph.from_records(plan["resources"]))
        edit(type_, name, *path, to=written(group.spec.max_efa_interfaces - 1))(plan)

    return mutate


def _group_nodes(written: Callable[[int], str]) -> Callable[[dict], None]:
    """The team's namespace annotated with ``written(maxSize)`` whole nodes of the plan's Trainium group."""

    def mutate(plan: dict) -> None:
        (group,) = trainium_groups(Graph.from_records(plan["resources"]))
        key = GROUP_NODES_ANNOTATION + group.name
        edit(tokens.K8S_NAMESPACE, NAMESPACE_RESOURCE, "metadata", "annotations", key, to=written(group.max_size))(plan)

    return mutate


# Two teams of half a managed group each, which runs fewer nodes (desiredSize) than their halves of its maxSize.
MANAGED_GROUP = {"name": "trn1-32xl", "instanceType": "trn1.32xlarge", "minSize": 1, "desiredSize": 1, "maxSize": 2}
HALVES = [
    {"name": name, "neuronShare": 0.5, "principalArns": [f"arn:aws:iam::111122223333:role/{name}-researchers"]}
    for name in (TEAM, OTHER)
]


def _mount_name(path: str) -> Callable[[dict], None]:
    return edit(tokens.K8S_PERSISTENT_VOLUME, VOLUME, "spec", "csi", "volumeAttributes", "mountname", to=path)


TEAM_CASES: dict[str, list[Case]] = {
    "namespace-pod-security": [
        team_case(
            "team-unlabelled",
            edit(tokens.K8S_NAMESPACE, NAMESPACE_RESOURCE, "metadata", "labels", "pod-security.kubernetes.io/enforce"),
            (NAMESPACE_RESOURCE, "label it baseline or restricted"),
            tokens.K8S_NAMESPACE,
        )
    ],
    "team-access-namespaced": [
        team_case(
            "cluster-scoped-policy",
            _access_policy({"type": "cluster"}),
            ("AmazonEKSEditPolicy", f"beyond the namespace {layout.team_namespace(TEAM)}"),
            tokens.EKS_ACCESS_POLICY_ASSOCIATION,
        ),
        team_case(
            "other-namespace-policy",
            _access_policy({"type": "namespace", "namespaces": [layout.team_namespace(TEAM), layout.team_namespace(OTHER)]}),
            (f"beyond the namespace {layout.team_namespace(TEAM)}",),
            tokens.EKS_ACCESS_POLICY_ASSOCIATION,
        ),
        team_case(
            "cluster-role-binding",
            _group_binding(tokens.K8S_CLUSTER_ROLE_BINDING, None),
            ("cluster-wide",),
            tokens.K8S_CLUSTER_ROLE_BINDING,
        ),
        team_case(
            "binding-in-another-team",
            _group_binding(tokens.K8S_ROLE_BINDING, layout.team_namespace(OTHER)),
            (layout.team_namespace(OTHER), f"{layout.team_namespace(TEAM)} only"),
            tokens.K8S_ROLE_BINDING,
        ),
        team_case(
            "masters-group",
            edit(
                tokens.EKS_ACCESS_ENTRY,
                f"teams-{TEAM}-member-0",
                "kubernetesGroups",
                to=[layout.team_group(TEAM), "system:masters"],
            ),
            ("system:masters",),
            tokens.EKS_ACCESS_ENTRY,
        ),
        team_case(
            "principal-of-another-partition",
            edit(
                tokens.EKS_ACCESS_ENTRY,
                f"teams-{TEAM}-member-0",
                "principalArn",
                to="arn:aws-cn:iam::111122223333:role/researchers",
            ),
            ("of partition aws-cn",),
            tokens.EKS_ACCESS_ENTRY,
        ),
    ],
    "team-role-bounded": [
        team_case(
            "wildcards",
            _role_rule("*", "*", "*"),
            (f"team {TEAM}", "'*' in its apiGroups and resources and verbs"),
            tokens.K8S_ROLE,
        ),
        team_case(
            "quota-write", _role_rule("", "resourcequotas", "get", "update"), ("update on resourcequotas",), tokens.K8S_ROLE
        ),
        team_case(
            "network-policy-delete",
            _role_rule("networking.k8s.io", "networkpolicies", "delete"),
            ("delete on networkpolicies",),
            tokens.K8S_ROLE,
        ),
        team_case("queue-patch", _role_rule("scheduling.volcano.sh", "queues", "patch"), ("patch on queues",), tokens.K8S_ROLE),
        team_case(
            "pod-group-create",
            _role_rule("scheduling.volcano.sh", "podgroups", "create"),
            ("create on podgroups",),
            tokens.K8S_ROLE,
        ),
        team_case(
            "bind-cluster-roles",
            _role_rule("rbac.authorization.k8s.io", "clusterroles", "bind"),
            ("bind on clusterroles",),
            tokens.K8S_ROLE,
        ),
        team_case("unlabelled-role-in-the-namespace", _unlabelled_role_in_namespace, ("escalate on roles",), tokens.K8S_ROLE),
    ],
    "team-volume-own-directory": [
        team_case(
            "file-system-root",
            _mount_name("fsx"),
            ("not the team's directory", layout.team_directory(TEAM)),
            tokens.K8S_PERSISTENT_VOLUME,
        ),
        team_case(
            "inside-another-team",
            _mount_name(f"fsx{layout.team_directory(OTHER)}{layout.team_directory(TEAM)}"),
            ("not the team's directory",),
            tokens.K8S_PERSISTENT_VOLUME,
        ),
        team_case(
            "up-and-across",
            _mount_name(f"fsx{layout.team_directory(OTHER)}/../..{layout.team_directory(TEAM)}"),
            ("not the team's directory",),
            tokens.K8S_PERSISTENT_VOLUME,
        ),
        team_case(
            "any-claim",
            edit(tokens.K8S_PERSISTENT_VOLUME, VOLUME, "spec", "claimRef"),
            ("not reserved for its namespace",),
            tokens.K8S_PERSISTENT_VOLUME,
        ),
        team_case(
            "other-team-claim",
            edit(tokens.K8S_PERSISTENT_VOLUME, VOLUME, "spec", "claimRef", "namespace", to=layout.team_namespace(OTHER)),
            (f"'{layout.team_namespace(OTHER)}'",),
            tokens.K8S_PERSISTENT_VOLUME,
        ),
    ],
    "team-quotas-within-capacity": [
        team_case(
            "shares-above-capacity",
            _quota_above_capacity,
            ("add up to", layout.NEURON_DEVICE_RESOURCE, "neuronShare"),
            tokens.K8S_RESOURCE_QUOTA,
        ),
        team_case(
            "no-quota",
            without(lambda r: r["type"] == tokens.K8S_RESOURCE_QUOTA and QUOTA in r["name"]),
            ("has no ResourceQuota",),
            tokens.K8S_NAMESPACE,
        ),
        team_case(
            "group-nodes-beyond-the-group",
            _group_nodes(lambda max_size: str(max_size + 1)),
            ("whole nodes of node group", f"{TEAM} ", "(maxSize)", "neuronShare"),
            tokens.K8S_NAMESPACE,
        ),
        team_case(
            "group-nodes-not-a-number",
            _group_nodes(lambda max_size: f"{max_size} nodes"),
            (GROUP_NODES_ANNOTATION, "no whole number"),
            tokens.K8S_NAMESPACE,
        ),
        Case(
            "managed-group-below-the-teams-nodes",
            STACK,
            lambda plan: None,
            (f"node group {MANAGED_GROUP['name']}", f"{TEAM} ", f"{OTHER} ", "(desiredSize)"),
            tokens.K8S_NAMESPACE,
            1,
            {"teams": HALVES, "trainiumNodeGroups": [MANAGED_GROUP]},
        ),
    ],
    "team-quotas-hold-a-node": [
        team_case(
            "quota-below-one-node",
            _one_efa_interface_short(
                tokens.K8S_RESOURCE_QUOTA, QUOTA, "spec", "hard", f"requests.{layout.EFA_RESOURCE}", written=str
            ),
            (f"of team {TEAM}", layout.EFA_RESOURCE, "neuronShare"),
            tokens.K8S_RESOURCE_QUOTA,
        ),
        team_case(
            "queue-below-one-node",
            _one_efa_interface_short(tokens.VOLCANO_QUEUE, TEAM_QUEUE, "spec", "capability", layout.EFA_RESOURCE, written=float),
            (f"of team {TEAM}", layout.EFA_RESOURCE, "neuronShare"),
            tokens.VOLCANO_QUEUE,
        ),
    ],
}
