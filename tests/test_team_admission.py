"""Team isolation at admission: the plan of a stack with teams holds one ValidatingAdmissionPolicy per rule, bound in
the team namespaces; each CEL expression, as the plan declares it, is evaluated (``admission_review``) against objects
it must admit (the team's own, the jobs the platform's tools build for the team, and their pods and PodGroups as
Volcano creates them: ``admitted_workloads``) and objects it must refuse (a binding to every signed-in user, another
team's queue, a Neuron pod on ``default-scheduler``...). A fixture stack (tests/fixture_stacks) with a team of the
test's own: the shipped stacks do not matter."""

from __future__ import annotations

import copy
import json

import kubernetes_validate
import pytest
from admission_review import ENVIRONMENT, Kind, Policy, Request
from admitted_workloads import POD, POD_GROUP, VOLCANO_JOB, admitted_pod, workloads
from support import evaluate, manifest, settings

from jobs import acceptance, launch
from jobs.workloads import bert_job
from trainium_eks import layout, tokens
from trainium_eks.config import parse
from trainium_eks.contract import PlatformContract

TEAM, OTHER = "alpha", "beta"  # OTHER is any other team: the rules name no team
FIXTURE_TEAMS = [{"name": TEAM, "neuronShare": 1, "principalArns": ["arn:aws:iam::111122223333:role/alpha-researchers"]}]
STACK = "dev"  # a fixture stack: any would do, as the rules name no stack
# The fixture's Trainium group, all of whose nodes the team holds (its share is 1), and a group the stack has not.
(GROUP,) = parse(settings(STACK, fixture=True, teams=FIXTURE_TEAMS).config, stack=STACK).trainium_node_groups
GROUP_NODES, NODE_DEVICES = GROUP.scaling.max_size, GROUP.spec.neuron_devices
OTHER_GROUP = f"{GROUP.name}-other"

ROLE_BINDING = Kind("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings")
BATCH_JOB = Kind("batch", "v1", "Job", "jobs")

POLICIES = {
    "role-binding": "trainium-eks-team-role-binding-subjects",
    "queue": "trainium-eks-team-volcano-queue",
    "scheduler": "trainium-eks-team-accelerator-pods-volcano",
    "unbound": "trainium-eks-team-pods-unbound",
    "node-group": "trainium-eks-team-pods-node-group",
    "volcano-job-share": "trainium-eks-team-volcano-job-share",
    "job-share": "trainium-eks-team-job-share",
}


@pytest.fixture(scope="module")
def plan():
    return evaluate(STACK, fixture=True, teams=FIXTURE_TEAMS)


@pytest.fixture(scope="module")
def policies(plan) -> dict[str, Policy]:
    bindings = {b.inputs["spec"]["policyName"]: manifest(b) for b in plan.find(tokens.K8S_VALIDATING_ADMISSION_POLICY_BINDING)}
    declared = [manifest(p) for p in plan.find(tokens.K8S_VALIDATING_ADMISSION_POLICY)]
    return {p["metadata"]["name"]: Policy(p, bindings[p["metadata"]["name"]]) for p in declared}


@pytest.fixture(scope="module")
def contract(plan) -> PlatformContract:
    return PlatformContract.from_outputs(json.loads(json.dumps(plan.outputs))).for_team(TEAM)


@pytest.fixture(scope="module")
def namespaces(plan) -> dict[str, dict]:
    """The team's Namespace as the plan declares it, and an unlabelled one of no team."""
    (team,) = [
        manifest(n) for n in plan.find(tokens.K8S_NAMESPACE) if n.inputs["metadata"]["name"] == layout.team_namespace(TEAM)
    ]
    return {"team": team, "default": {"metadata": {"name": "default"}}}


def review(policies: dict[str, Policy], request: Request) -> dict[str, list[str]]:
    """Every policy that refuses ``request``, with its messages: the API server admits it when this is empty."""
    return {name: messages for name, policy in policies.items() if (messages := policy.refusals(request))}


# ---- the plan -----------------------------------------------------------------------------------------------------


def test_the_plan_of_a_stack_with_teams_holds_the_admission_policies(plan, policies):
    assert set(policies) == set(POLICIES.values())
    for policy in policies.values():
        spec = policy.policy["spec"]
        assert spec["failurePolicy"] == "Fail" and len(spec["validations"]) == 1, policy.name
        validation = spec["validations"][0]
        assert validation["message"] and validation["messageExpression"], policy.name
        binding = policy.binding["spec"]
        assert binding["validationActions"] == ["Deny"] and binding["policyName"] == policy.name
        assert binding["matchResources"]["namespaceSelector"] == {
            "matchExpressions": [{"key": layout.TEAM_LABEL, "operator": "Exists"}]
        }
    # The team's namespace carries the label the bindings select and the policies read the team from.
    (namespace,) = [n for n in plan.find(tokens.K8S_NAMESPACE) if n.inputs["metadata"]["name"] == layout.team_namespace(TEAM)]
    assert namespace.inputs["metadata"]["labels"][layout.TEAM_LABEL] == TEAM
    # A member is given access only once the policies hold.
    admission = {p.urn for p in plan.find(tokens.K8S_VALIDATING_ADMISSION_POLICY)}
    members = [e for e in plan.find(tokens.EKS_ACCESS_ENTRY) if e.inputs["principalArn"] in FIXTURE_TEAMS[0]["principalArns"]]
    assert admission and len(members) == len(FIXTURE_TEAMS[0]["principalArns"]), members
    for entry in members:
        assert admission <= set(entry.dependencies)


def test_the_policies_pass_strict_schema_validation(plan):
    version = settings(STACK, fixture=True).config["trainium-eks:kubernetesVersion"]
    for kind in (tokens.K8S_VALIDATING_ADMISSION_POLICY, tokens.K8S_VALIDATING_ADMISSION_POLICY_BINDING):
        resources = plan.find(kind)
        assert resources, kind
        for resource in resources:
            kubernetes_validate.validate(manifest(resource), version, strict=True)


def test_every_expression_compiles(policies):
    """What the API server compiles when it stores a policy: a syntax error would refuse the policy itself."""
    assert set(policies) == set(POLICIES.values())
    for policy in policies.values():
        spec = policy.policy["spec"]
        for expression in [v["expression"] for v in spec["variables"]] + [
            e for v in spec["validations"] for e in (v["expression"], v["messageExpression"])
        ]:
            ENVIRONMENT.compile(expression)


def test_a_stack_without_teams_has_no_admission_policies():
    plan = evaluate(STACK, fixture=True, teams=[])
    assert plan.find(tokens.K8S_VALIDATING_ADMISSION_POLICY) == []
    assert plan.find(tokens.K8S_VALIDATING_ADMISSION_POLICY_BINDING) == []


# ---- each expression: what it admits and what it refuses -----------------------------------------------------------


def _binding(*subjects: dict) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "extra", "namespace": layout.team_namespace(TEAM)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team-members"},
        **({"subjects": list(subjects)} if subjects else {}),
    }


def _group(name: str) -> dict:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name}


def _account(name: str, namespace: str | None = None) -> dict:
    return {"kind": "ServiceAccount", "name": name, **({"namespace": namespace} if namespace else {})}


def _neuron_container(resources: dict) -> dict:
    return {"name": "c", "image": "busybox", "resources": resources}


def _pod_spec(scheduler: str | None = None, **spec) -> dict:
    return {"containers": [_neuron_container({})], **({"schedulerName": scheduler} if scheduler else {}), **spec}


def _on(group: str, **spec) -> dict:
    """A pod spec whose nodeSelector names the Trainium group ``group``."""
    return {**spec, "nodeSelector": {layout.NODE_GROUP_LABEL: group}}


NEURON = {"limits": {layout.NEURON_DEVICE_RESOURCE: "1"}}
TRAINIUM_TOLERATION = {"key": layout.NEURON_TAINT_KEY, "operator": "Exists", "effect": layout.NEURON_TAINT_EFFECT_K8S}
OWN_NAMESPACE = layout.team_namespace(TEAM)


def _whole_node_spec(group: str = GROUP.name, **spec) -> dict:
    """A pod spec that asks for every Neuron device of one node of the fixture's group, on ``group``."""
    container = _neuron_container({"limits": {layout.NEURON_DEVICE_RESOURCE: str(NODE_DEVICES)}})
    return _on(group, containers=[container], tolerations=[TRAINIUM_TOLERATION], **spec)


def _volcano_job(*tasks: tuple[int, dict]) -> dict:
    """A Volcano Job on the team's queue with a task of ``replicas`` pods of each pod spec."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "job", "namespace": OWN_NAMESPACE},
        "spec": {
            "queue": layout.team_namespace(TEAM),
            "schedulerName": layout.VOLCANO_SCHEDULER,
            "tasks": [
                {"name": f"t{i}", "replicas": replicas, "template": {"spec": spec}} for i, (replicas, spec) in enumerate(tasks)
            ],
        },
    }


def _batch_job(parallelism: int, spec: dict) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job", "namespace": OWN_NAMESPACE},
        "spec": {"parallelism": parallelism, "template": {"spec": {"restartPolicy": "Never", **spec}}},
    }


# (case id, kind, object, the policy that must refuse it or None, words of its message)
CASES = [
    ("binding-to-the-team-group", ROLE_BINDING, _binding(_group(layout.team_group(TEAM))), None, ()),
    ("binding-to-own-accounts", ROLE_BINDING, _binding(_account("trainer", OWN_NAMESPACE), _account("ci")), None, ()),
    ("binding-without-subjects", ROLE_BINDING, _binding(), None, ()),
    (
        "binding-to-every-signed-in-user",
        ROLE_BINDING,
        _binding(_group(layout.team_group(TEAM)), _group("system:authenticated")),
        "role-binding",
        (OWN_NAMESPACE, layout.team_group(TEAM)),
    ),
    ("binding-to-another-team", ROLE_BINDING, _binding(_group(layout.team_group(OTHER))), "role-binding", ()),
    (
        "binding-to-a-user",
        ROLE_BINDING,
        _binding({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}),
        "role-binding",
        (),
    ),
    ("binding-to-another-namespace-account", ROLE_BINDING, _binding(_account("default", "kube-system")), "role-binding", ()),
    (
        "pod-group-on-the-team-queue",
        POD_GROUP,
        {"metadata": {"name": "pg", "namespace": OWN_NAMESPACE}, "spec": {"queue": layout.team_namespace(TEAM), "minMember": 1}},
        None,
        (),
    ),
    (
        "pod-group-on-another-queue",
        POD_GROUP,
        {"metadata": {"name": "pg", "namespace": OWN_NAMESPACE}, "spec": {"queue": layout.team_namespace(OTHER), "minMember": 1}},
        "queue",
        ("PodGroup", layout.team_namespace(TEAM), f"not {layout.team_namespace(OTHER)}"),
    ),
    (
        "pod-group-without-queue",
        POD_GROUP,
        {"metadata": {"name": "pg", "namespace": OWN_NAMESPACE}, "spec": {"minMember": 1}},
        "queue",
        ("not none",),
    ),
    ("data-shell-on-default-scheduler", POD, _pod_spec(), None, ()),
    (
        "neuron-pod-on-volcano",
        POD,
        _pod_spec("volcano", **_on(GROUP.name, containers=[_neuron_container(NEURON)], tolerations=[TRAINIUM_TOLERATION])),
        None,
        (),
    ),
    (
        "neuron-pod-on-default-scheduler",
        POD,
        _pod_spec(**_on(GROUP.name, containers=[_neuron_container(NEURON)], tolerations=[TRAINIUM_TOLERATION])),
        "scheduler",
        ("Neuron or EFA", "schedulerName: volcano"),
    ),
    (
        "neuroncores-requested-by-an-init-container",
        POD,
        _pod_spec(**_on(GROUP.name, initContainers=[_neuron_container({"requests": {layout.NEURON_CORE_RESOURCE: "2"}})])),
        "scheduler",
        (),
    ),
    (
        "efa-on-default-scheduler",
        POD,
        _pod_spec(**_on(GROUP.name, containers=[_neuron_container({"limits": {layout.EFA_RESOURCE: "1"}})])),
        "scheduler",
        (),
    ),
    (
        "trainium-toleration-on-default-scheduler",
        POD,
        _pod_spec(**_on(GROUP.name, tolerations=[TRAINIUM_TOLERATION])),
        "scheduler",
        (),
    ),
    (
        "every-taint-tolerated-on-default-scheduler",
        POD,
        _pod_spec(**_on(GROUP.name, tolerations=[{"operator": "Exists"}])),
        "scheduler",
        (),
    ),
    (
        "pod-created-on-a-node",
        POD,
        _pod_spec("volcano", nodeName="ip-10-0-0-1.ec2.internal"),
        "unbound",
        ("ip-10-0-0-1.ec2.internal",),
    ),
    (
        "neuron-pod-on-no-group",
        POD,
        _pod_spec("volcano", containers=[_neuron_container(NEURON)], tolerations=[TRAINIUM_TOLERATION]),
        "node-group",
        (layout.NODE_GROUP_LABEL, f"team {TEAM}", "not none"),
    ),
    (
        "neuron-pod-on-a-group-the-team-holds-no-node-of",
        POD,
        _pod_spec("volcano", **_whole_node_spec(OTHER_GROUP)),
        "node-group",
        (f"not {OTHER_GROUP}",),
    ),
    ("volcano-job-of-a-task-a-node", VOLCANO_JOB, _volcano_job(*[(1, _whole_node_spec())] * GROUP_NODES), None, ()),
    ("volcano-job-of-one-task", VOLCANO_JOB, _volcano_job((GROUP_NODES, _whole_node_spec())), None, ()),
    (
        "volcano-job-a-node-beyond-the-teams-nodes",
        VOLCANO_JOB,
        _volcano_job((GROUP_NODES, _whole_node_spec()), (1, _whole_node_spec())),
        "volcano-job-share",
        (f"team {TEAM}", f"of {GROUP.name} ({GROUP_NODES * NODE_DEVICES} Neuron devices)"),
    ),
    (
        "volcano-job-on-two-groups",
        VOLCANO_JOB,
        _volcano_job((1, _whole_node_spec()), (1, _whole_node_spec(OTHER_GROUP))),
        "volcano-job-share",
        ("one node group",),
    ),
    (
        "volcano-job-on-no-group",
        VOLCANO_JOB,
        _volcano_job((1, {"containers": [_neuron_container(NEURON)], "tolerations": [TRAINIUM_TOLERATION]})),
        "volcano-job-share",
        ("name no group",),
    ),
    ("job-on-the-teams-nodes", BATCH_JOB, _batch_job(GROUP_NODES, _whole_node_spec()), None, ()),
    (
        "job-a-node-beyond-the-teams-nodes",
        BATCH_JOB,
        _batch_job(GROUP_NODES + 1, _whole_node_spec()),
        "job-share",
        (f"a Job in {OWN_NAMESPACE}", GROUP.name),
    ),
    (
        "job-on-a-group-the-team-holds-no-node-of",
        BATCH_JOB,
        _batch_job(1, _whole_node_spec(OTHER_GROUP)),
        "job-share",
        (f"holds 0 nodes of {OTHER_GROUP}",),
    ),
]


def _request(kind: Kind, obj: dict, namespace: dict, operation: str = "CREATE", old: dict | None = None) -> Request:
    body = admitted_pod(obj, namespace["metadata"]["name"]) if kind == POD else obj
    return Request(kind, body, namespace, operation, old)


@pytest.mark.parametrize(("case", "kind", "obj", "refused_by", "words"), CASES, ids=[c[0] for c in CASES])
def test_each_rule_admits_the_teams_own_and_refuses_what_crosses_its_bounds(
    policies, namespaces, case, kind, obj, refused_by, words
):
    refusals = review(policies, _request(kind, obj, namespaces["team"]))
    assert list(refusals) == ([POLICIES[refused_by]] if refused_by else []), refusals
    for word in words:
        assert word in refusals[POLICIES[refused_by]][0], (word, refusals)


def test_every_policy_admits_and_refuses_something_in_the_table(policies, namespaces):
    met = {name: {"admitted": 0, "refused": 0} for name in policies}
    for _, kind, obj, refused_by, _ in CASES:
        request = _request(kind, obj, namespaces["team"])
        for name, policy in policies.items():
            if policy.meets(request):
                met[name]["refused" if refused_by and POLICIES[refused_by] == name else "admitted"] += 1
    assert all(counts["admitted"] and counts["refused"] for counts in met.values()), met


def test_the_platforms_own_binding_is_admitted(plan, policies, namespaces):
    own = [b for b in plan.find(tokens.K8S_ROLE_BINDING) if b.inputs["metadata"]["namespace"] == layout.team_namespace(TEAM)]
    assert own
    for binding in own:
        assert review(policies, _request(ROLE_BINDING, manifest(binding), namespaces["team"])) == {}


def test_the_rules_hold_only_in_team_namespaces(policies, namespaces):
    anyone = _binding(_group("system:authenticated"))
    assert review(policies, _request(ROLE_BINDING, anyone, namespaces["default"])) == {}
    assert review(policies, _request(POD, _pod_spec(tolerations=[TRAINIUM_TOLERATION]), namespaces["default"])) == {}


def test_updates_are_held_too(policies, namespaces):
    own = _binding(_group(layout.team_group(TEAM)))
    widened = _binding(_group(layout.team_group(TEAM)), _group("system:authenticated"))
    refused = review(policies, _request(ROLE_BINDING, widened, namespaces["team"], "UPDATE", own))
    assert list(refused) == [POLICIES["role-binding"]]
    # A pending pod given the Trainium toleration later is refused; a scheduled Volcano pod's updates are not.
    pending = admitted_pod(_pod_spec(**_on(GROUP.name)), OWN_NAMESPACE)
    tolerating = copy.deepcopy(pending)
    tolerating["spec"]["tolerations"].append(TRAINIUM_TOLERATION)
    assert list(review(policies, Request(POD, tolerating, namespaces["team"], "UPDATE", pending))) == [POLICIES["scheduler"]]
    on_group = _on(GROUP.name, containers=[_neuron_container(NEURON)], nodeName="ip-10-0-0-1")
    bound = admitted_pod(_pod_spec("volcano", **on_group), OWN_NAMESPACE)
    annotated = copy.deepcopy(bound)
    annotated["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "pg"}
    assert review(policies, Request(POD, annotated, namespaces["team"], "UPDATE", bound)) == {}


# ---- the jobs the platform's tools build for a team --------------------------------------------------------------


def test_a_team_job_naming_another_queue_is_refused_and_its_own_admitted(policies, namespaces, contract, plan):
    job = bert_job.volcano_job(contract, launch.JobRequest(name="berttrain"))
    assert review(policies, _request(VOLCANO_JOB, job, namespaces["team"])) == {}
    platform_queues = [
        q.inputs["metadata"]["name"]
        for q in plan.find(tokens.VOLCANO_QUEUE)
        if layout.TEAM_LABEL not in q.inputs["metadata"].get("labels", {})
    ]
    for queue in (layout.team_namespace(OTHER), *platform_queues, "default"):
        elsewhere = copy.deepcopy(job)
        elsewhere["spec"]["queue"] = queue
        refusals = review(policies, _request(VOLCANO_JOB, elsewhere, namespaces["team"]))
        assert list(refusals) == [POLICIES["queue"]] and f"not {queue}" in refusals[POLICIES["queue"]][0], (queue, refusals)


def test_every_job_the_tools_build_for_a_team_is_admitted_with_its_pods(policies, namespaces, contract):
    group = contract.node_groups[0]
    jobs = [bert_job.volcano_job(contract, launch.JobRequest(name="berttrain"))]
    jobs += [job for _, job in acceptance.build(contract, group, list(acceptance.CHECKS), None)[0]]
    checked = 0
    for job in jobs:
        for kind, obj in workloads(job):
            assert obj["metadata"]["namespace"] == layout.team_namespace(TEAM)
            refusals = review(policies, Request(kind, obj, namespaces["team"]))
            assert refusals == {}, (job["metadata"]["name"], kind.kind, refusals)
            checked += 1
    assert checked > len(jobs)
