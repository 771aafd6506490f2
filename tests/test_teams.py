"""Teams, walked as a team would: a fixture stack declares two teams; each gets a namespace, queue, quota, access, etcd
admission and a directory of its own in the plan; the contract hands them to the team; the launcher builds the team's
job where the platform made room for it; and the NetworkPolicies, evaluated on that job's pods, admit what they
should and nothing of another team.

The fixture is a shipped stack with its teams and Trainium groups replaced (``FIXTURE``), so that the teams a user
declares, renames or removes in the shipped stacks do not matter; the rest of the stack is read as it is."""

from __future__ import annotations

import json

import pytest
from admission_review import NAMESPACE_NAME_LABEL, selects
from job_outputs import run_module
from support import PROJECT, evaluate, one, one_group, one_line, run_preflight, settings, stack_copy

from jobs import launch
from jobs.workloads import bert_job
from trainium_eks import layout, tokens
from trainium_eks.config import ConfigError, parse
from trainium_eks.contract import PlatformContract

pytestmark = pytest.mark.stacks  # the fixture keeps every key of the stack it reads but the teams and Trainium groups

QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
PREFIX = "trainium-teams-"

STACK = "staging"
NODE_TYPE = "trn1.32xlarge"
FIRST, SECOND = TEAMS = [
    {"name": "alpha", "neuronShare": 0.5, "weight": 2, "principalArns": ["arn:aws:iam::111122223333:role/alpha-researchers"]},
    {"name": "beta", "neuronShare": 0.5, "weight": 1, "principalArns": ["arn:aws:iam::111122223333:role/beta-researchers"]},
]
# Two elastic nodes (one_group): half the capacity is one node, so each team's jobs fit its quota on one node.
FIXTURE = {**one_group(NODE_TYPE), "teams": TEAMS}


@pytest.fixture(scope="module")
def plan():
    return evaluate(STACK, **FIXTURE)


@pytest.fixture(scope="module")
def contract(plan) -> PlatformContract:
    return PlatformContract.from_outputs(json.loads(json.dumps(plan.outputs)))


def of_team(plan, type_: str, team: str, suffix: str):
    return one(plan.find(type_, f"{PREFIX}{team}-{suffix}"))


def team_job(contract: PlatformContract, team: str, *, nodes: int | None = None) -> dict:
    request = launch.JobRequest(name="berttrain", nodes=nodes)
    return bert_job.volcano_job(contract.for_team(team), request)


def outputs_file(tmp_path, plan) -> tuple:
    """The fixture stack's outputs, as a file the job tools read, and as data."""
    path = tmp_path / f"{STACK}-outputs.json"
    path.write_text(json.dumps(plan.outputs))
    return path, json.loads(path.read_text())


# ---- a NetworkPolicy, evaluated as the network policy agent does (label selectors: admission_review.selects) ------


def admits(policy: dict, target: dict, source: dict, port: int | None = None) -> bool:
    """Whether NetworkPolicy ``policy`` lets ``source`` reach ``target`` (pods as namespace, namespace labels and pod
    labels). A policy that does not select the target says nothing of it; that case is not asked here."""
    spec, namespace = policy["spec"], policy["metadata"]["namespace"]
    assert target["namespace"] == namespace and selects(spec["podSelector"], target["labels"]), (
        "the policy must select the target"
    )
    for rule in spec.get("ingress", []):
        ports = [p["port"] for p in rule.get("ports", [])]
        if ports and port not in ports:
            continue
        peers = rule.get("from")
        if not peers:
            return True
        for peer in peers:
            in_namespace = (
                selects(peer["namespaceSelector"], source["namespaceLabels"])
                if "namespaceSelector" in peer
                else source["namespace"] == namespace
            )
            if in_namespace and selects(peer.get("podSelector", {}), source["labels"]):
                return True
    return False


def pod(plan, namespace: str, labels: dict) -> dict:
    declared = [n for n in plan.find(tokens.K8S_NAMESPACE) if n.inputs["metadata"]["name"] == namespace]
    namespace_labels = declared[0].inputs["metadata"].get("labels", {}) if declared else {}
    return {"namespace": namespace, "namespaceLabels": {**namespace_labels, NAMESPACE_NAME_LABEL: namespace}, "labels": labels}


def worker_pod(plan, job: dict) -> dict:
    return pod(plan, job["metadata"]["namespace"], job["spec"]["tasks"][0]["template"]["metadata"]["labels"])


def network_policy(plan, namespace: str, name: str) -> dict:
    (policy,) = [
        p.inputs
        for p in plan.find(tokens.K8S_NETWORK_POLICY)
        if p.inputs["metadata"]["name"] == name and p.inputs["metadata"]["namespace"] == namespace
    ]
    return policy


# ---- the plan ---------------------------------------------------------------------------------------------------


def test_each_team_has_its_workspace_in_the_plan(plan, contract):
    job_namespace = one([n for n in plan.find(tokens.K8S_NAMESPACE) if n.inputs["metadata"]["name"] == contract.job_namespace])
    assert [team.name for team in contract.teams] == [declared["name"] for declared in TEAMS]
    for team, declared in zip(contract.teams, TEAMS, strict=True):
        namespace = of_team(plan, tokens.K8S_NAMESPACE, team.name, "namespace").inputs["metadata"]
        assert namespace["name"] == team.namespace != contract.job_namespace
        security = {k: v for k, v in namespace["labels"].items() if k.startswith("pod-security.kubernetes.io/")}
        assert security and security.items() <= job_namespace.inputs["metadata"]["labels"].items()

        queue = of_team(plan, QUEUE, team.name, "queue").inputs
        assert queue["metadata"]["name"] == team.queue and queue["spec"]["capability"] == team.quota
        assert queue["spec"]["weight"] == team.weight == declared["weight"]
        quota = of_team(plan, tokens.K8S_RESOURCE_QUOTA, team.name, "quota").inputs
        assert quota["metadata"]["namespace"] == team.namespace
        assert quota["spec"]["hard"] == {f"requests.{resource}": str(amount) for resource, amount in team.quota.items()}
        assert set(team.quota) == {layout.NEURON_DEVICE_RESOURCE, layout.NEURON_CORE_RESOURCE, layout.EFA_RESOURCE}

        entries = [e.inputs for e in plan.find(tokens.EKS_ACCESS_ENTRY) if e.inputs["principalArn"] in team.principal_arns]
        assert list(team.principal_arns) == declared["principalArns"] and len(entries) == len(team.principal_arns)
        assert entries[0]["kubernetesGroups"] == [layout.team_group(team.name)] and entries[0]["type"] == "STANDARD"
        binding = of_team(plan, tokens.K8S_ROLE_BINDING, team.name, "members").inputs
        assert binding["metadata"]["namespace"] == team.namespace and binding["roleRef"]["kind"] == "Role"
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": layout.team_group(team.name)}
        ]

        volume = of_team(plan, tokens.K8S_PERSISTENT_VOLUME, team.name, "fsx").inputs["spec"]
        assert volume["csi"]["volumeAttributes"]["mountname"].endswith(team.file_system_path)
        assert volume["claimRef"] == {"namespace": team.namespace, "name": team.claim_name}
    # No team principal holds an access policy, and no team group a cluster-wide binding.
    assert plan.find(tokens.EKS_ACCESS_POLICY_ASSOCIATION) == [] or all(
        a.inputs["principalArn"] not in {arn for t in contract.teams for arn in t.principal_arns}
        for a in plan.find(tokens.EKS_ACCESS_POLICY_ASSOCIATION)
    )
    assert not [b for b in plan.find(tokens.K8S_CLUSTER_ROLE_BINDING) if "team" in json.dumps(b.inputs.get("subjects"))]


def test_the_teams_volumes_are_distinct_directories_the_platform_creates_first(plan, contract):
    volumes = [of_team(plan, tokens.K8S_PERSISTENT_VOLUME, team.name, "fsx") for team in contract.teams]
    handles = [v.inputs["spec"]["csi"]["volumeHandle"] for v in volumes]
    mounts = [v.inputs["spec"]["csi"]["volumeAttributes"]["mountname"] for v in volumes]
    assert len(set(handles)) == len(set(mounts)) == len(contract.teams)
    directories = one([j for j in plan.find(tokens.K8S_JOB) if j.name == f"{PREFIX[:-1]}-directories"])
    pod_spec = directories.inputs["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    assert container["command"][:2] == ["mkdir", "-p"]
    assert container["command"][2:] == [contract.fsx_mount_path + team.file_system_path for team in contract.teams]
    assert container["volumeMounts"][0]["mountPath"] == contract.fsx_mount_path
    assert pod_spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == contract.fsx_claim_name  # the platform's root
    assert all(directories.urn in v.dependencies for v in volumes)  # Lustre mounts a directory only once it exists


# ---- a team's job, end to end -------------------------------------------------------------------------------------


def test_a_team_job_lands_where_the_platform_made_room_for_it(plan, contract):
    team = contract.team(FIRST["name"])
    job = team_job(contract, team.name)
    assert job["metadata"]["namespace"] == team.namespace and job["spec"]["queue"] == team.queue
    assert one([q for q in plan.find(QUEUE) if q.inputs["metadata"]["name"] == job["spec"]["queue"]])
    # The quota admits every pod of the job together.
    asked: dict[str, int] = {}
    for task in job["spec"]["tasks"]:
        for container in task["template"]["spec"]["containers"]:
            for resource, amount in container["resources"].get("limits", {}).items():
                if resource in team.quota:
                    asked[resource] = asked.get(resource, 0) + task["replicas"] * int(amount)
    assert asked and all(amount <= team.quota[resource] for resource, amount in asked.items()), (asked, team.quota)
    # The job's claim is the team's, bound to the volume on the team's directory, mounted where the paths point.
    template = job["spec"]["tasks"][0]["template"]["spec"]
    claims = [v["persistentVolumeClaim"]["claimName"] for v in template["volumes"] if "persistentVolumeClaim" in v]
    assert claims == [team.claim_name]
    claim = of_team(plan, tokens.K8S_PERSISTENT_VOLUME_CLAIM, team.name, "fsx").inputs
    assert claim["metadata"] == {**claim["metadata"], "namespace": team.namespace, "name": team.claim_name}
    mounts = [m["mountPath"] for m in template["containers"][0]["volumeMounts"]]
    assert contract.fsx_mount_path in mounts
    assert job["metadata"]["annotations"]["trainium-eks/compile-cache"].startswith(contract.fsx_mount_path + "/")
    # Its pods reach etcd, at the endpoint the contract hands the team.
    etcd_labels = one(plan.find(tokens.K8S_STATEFUL_SET)).inputs["spec"]["template"]["metadata"]["labels"]
    etcd = network_policy(plan, contract.job_namespace, "etcd")
    assert admits(etcd, pod(plan, contract.job_namespace, etcd_labels), worker_pod(plan, job), layout.ETCD_CLIENT_PORT)


def test_etcd_admits_the_job_namespace_and_the_teams_and_no_other_namespace(plan, contract):
    etcd_labels = one(plan.find(tokens.K8S_STATEFUL_SET)).inputs["spec"]["template"]["metadata"]["labels"]
    etcd = network_policy(plan, contract.job_namespace, "etcd")
    member = pod(plan, contract.job_namespace, etcd_labels)
    platform_job = bert_job.volcano_job(contract, launch.JobRequest(name="berttrain"))
    for job in (platform_job, *(team_job(contract, team.name) for team in contract.teams)):
        assert admits(etcd, member, worker_pod(plan, job), layout.ETCD_CLIENT_PORT), job["metadata"]["namespace"]
    stranger = pod(plan, "default", platform_job["spec"]["tasks"][0]["template"]["metadata"]["labels"])
    assert not admits(etcd, member, stranger, layout.ETCD_CLIENT_PORT)
    assert not admits(etcd, member, worker_pod(plan, team_job(contract, FIRST["name"])), 2380)  # the peers' port is the members'


def test_a_team_reaches_its_own_pods_and_nothing_of_another_team(plan, contract):
    first, second = contract.team(FIRST["name"]), contract.team(SECOND["name"])
    first_pod, second_pod = worker_pod(plan, team_job(contract, first.name)), worker_pod(plan, team_job(contract, second.name))
    first_policy = network_policy(plan, first.namespace, "own-pods-only")
    second_policy = network_policy(plan, second.namespace, "own-pods-only")
    assert admits(first_policy, first_pod, first_pod) and admits(second_policy, second_pod, second_pod)
    assert not admits(first_policy, first_pod, second_pod) and not admits(second_policy, second_pod, first_pod)
    platform = worker_pod(plan, bert_job.volcano_job(contract, launch.JobRequest(name="berttrain")))
    assert not admits(first_policy, first_pod, platform)


def test_the_launcher_builds_the_team_job_and_refuses_what_its_quota_cannot_admit(tmp_path, plan):
    path, outputs = outputs_file(tmp_path, plan)
    (team,) = [t for t in outputs["teams"] if t["name"] == FIRST["name"]]
    result = run_module("jobs.launch", "--outputs", str(path), "--team", team["name"], "--dryrun", "--json")
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert (job["metadata"]["namespace"], job["spec"]["queue"]) == (team["namespace"], team["queue"])
    one_line(
        run_module("jobs.launch", "--outputs", str(path), "--team", team["name"], "--nodes", "2", "--dryrun"),
        "--nodes 2",
        f"team {team['name']}'s quota admits",
        "neuronShare",
    )
    undeclared = "search"
    assert undeclared not in {t["name"] for t in TEAMS}
    one_line(
        run_module("jobs.launch", "--outputs", str(path), "--team", undeclared, "--dryrun"),
        f"--team {undeclared}",
        f"declares no team '{undeclared}' (teams: {', '.join(t['name'] for t in TEAMS)})",
    )


def test_acceptance_checks_a_team_workspace_and_needs_the_team(tmp_path, plan):
    path, outputs = outputs_file(tmp_path, plan)
    (team,) = [t for t in outputs["teams"] if t["name"] == SECOND["name"]]
    one_line(run_module("jobs.acceptance", "team-volume", "--outputs", str(path), "--dryrun"), "team-volume", "--team")
    result = run_module("jobs.acceptance", "all", "--outputs", str(path), "--team", team["name"], "--dryrun", "--json")
    assert result.returncode == 0, result.stderr
    jobs = {job["metadata"]["name"]: job for job in json.loads(result.stdout)}
    assert {job["metadata"]["namespace"] for job in jobs.values()} == {team["namespace"]}
    volume = jobs["acceptance-team-volume"]["spec"]["template"]["spec"]
    assert volume["volumes"][0]["persistentVolumeClaim"]["claimName"] == team["claimName"]
    script = volume["containers"][0]["command"][-1]
    assert f"{outputs['fsxMountPath']}{layout.TEAMS_DIR}" in script  # the root, where the teams' directories are, must not show
    assert "acceptance-etcd-rendezvous" in jobs  # etcd, reached from the team's namespace
    assert "efa-allreduce: skipped" in result.stderr  # one node's share: a two-node check cannot run there


# ---- config ---------------------------------------------------------------------------------------------------------

OVERSHARED = [FIRST, {**SECOND, "neuronShare": 0.75}]  # shares that add up to 1.25 of the capacity
BAD_TEAMS = [
    ({"teams": OVERSHARED}, "teams", "add up to 1.25"),
    ({"teams": [FIRST, {**SECOND, "name": FIRST["name"]}]}, "teams[1].name", "used twice"),
    (
        {"teams": [FIRST, {**SECOND, "principalArns": FIRST["principalArns"]}]},
        "teams[1].principalArns[0]",
        f"already in team '{FIRST['name']}'",
    ),
    # A quarter of the fixture's two nodes is half a node.
    ({"teams": [{**FIRST, "neuronShare": 0.25}]}, "teams[0].neuronShare", f"less than one {NODE_TYPE};"),
    (  # a team's queue is named as its namespace
        {"teams": [FIRST], "volcanoQueues": [{"name": layout.team_namespace(FIRST["name"])}]},
        "teams[0].name",
        "also in volcanoQueues",
    ),
    ({"teams": [{**FIRST, "neuronShar": 0.5}]}, "teams[0].neuronShar", "did you mean 'neuronShare'"),
    ({"teams": [{**FIRST, "neuronShare": "half"}]}, "teams[0].neuronShare", "number"),
    ({"teams": [{**FIRST, "name": "NLP_team"}]}, "teams[0].name", "DNS label"),
    ({"teams": [{**FIRST, "principalArns": ["nlp-researchers"]}]}, "teams[0].principalArns[0]", "ARN"),
]


@pytest.mark.parametrize(("overrides", "key", "words"), BAD_TEAMS, ids=[f"{key}:{words}" for _, key, words in BAD_TEAMS])
def test_bad_teams_name_the_key_and_the_fix(overrides, key, words):
    with pytest.raises(ConfigError) as caught:
        parse(settings(STACK, **{**FIXTURE, **overrides}).config, stack=STACK)
    message = str(caught.value)
    assert "\n" not in message and "; " in message, message
    assert message.split(": ")[0].endswith(key) and words in message, message


def test_shares_above_capacity_stop_preflight_in_one_line(tmp_path):
    def overshare(config: dict) -> None:
        for key, value in {**FIXTURE, "teams": OVERSHARED}.items():
            config[key if ":" in key else f"{PROJECT}:{key}"] = value

    path = stack_copy(tmp_path, STACK, overshare)
    one_line(run_preflight("plan", STACK, "--stack-file", path), f"{PROJECT}:teams", "add up to 1.25", "lower")
