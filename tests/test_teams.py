"""Teams, walked as a team would: staging declares nlp and vision; each gets a namespace, queue, quota, access, etcd
admission and a directory of its own in the plan; the contract hands them to the team; the launcher builds the team's
job where the platform made room for it; and the NetworkPolicies, evaluated on that job's pods, admit what they
should and nothing of another team."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from support import cached_plan, one, run_preflight, settings
from test_jobs import outputs_file, run_module
from test_preflight_bad_input import one_line

from jobs import launch
from preflight.stackfile import REPO_ROOT
from trainium_eks import layout, tokens
from trainium_eks.config import ConfigError, parse
from trainium_eks.contract import PlatformContract

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set on every namespace by the API server
QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
PREFIX = "trainium-teams-"


@pytest.fixture(scope="module")
def plan():
    return cached_plan("staging", False)


@pytest.fixture(scope="module")
def contract(plan) -> PlatformContract:
    return PlatformContract.from_outputs(json.loads(json.dumps(plan.outputs)))


def of_team(plan, type_: str, team: str, suffix: str):
    return one(plan.find(type_, f"{PREFIX}{team}-{suffix}"))


def team_job(contract: PlatformContract, team: str, *, nodes: int | None = None) -> dict:
    request = launch.JobRequest(name="berttrain", nodes=nodes)
    return launch.volcano_job(contract.for_team(team), request)


# ---- a label selector and a NetworkPolicy, evaluated as the API server and the network policy agent do ------------


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
    assert [team.name for team in contract.teams] == ["nlp", "vision"]
    for team in contract.teams:
        namespace = of_team(plan, tokens.K8S_NAMESPACE, team.name, "namespace").inputs["metadata"]
        assert namespace["name"] == team.namespace != contract.job_namespace
        security = {k: v for k, v in namespace["labels"].items() if k.startswith("pod-security.kubernetes.io/")}
        assert security and security.items() <= job_namespace.inputs["metadata"]["labels"].items()

        queue = of_team(plan, QUEUE, team.name, "queue").inputs
        assert queue["metadata"]["name"] == team.queue and queue["spec"]["capability"] == team.quota
        quota = of_team(plan, tokens.K8S_RESOURCE_QUOTA, team.name, "quota").inputs
        assert quota["metadata"]["namespace"] == team.namespace
        assert quota["spec"]["hard"] == {f"requests.{resource}": str(amount) for resource, amount in team.quota.items()}
        assert set(team.quota) == {layout.NEURON_DEVICE_RESOURCE, layout.NEURON_CORE_RESOURCE, layout.EFA_RESOURCE}

        entries = [e.inputs for e in plan.find(tokens.EKS_ACCESS_ENTRY) if e.inputs["principalArn"] in team.principal_arns]
        assert len(entries) == len(team.principal_arns) == 1
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
    team = contract.team("nlp")
    job = team_job(contract, "nlp")
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
    claim = of_team(plan, tokens.K8S_PERSISTENT_VOLUME_CLAIM, "nlp", "fsx").inputs
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
    platform_job = launch.volcano_job(contract, launch.JobRequest(name="berttrain"))
    for job in (platform_job, team_job(contract, "nlp"), team_job(contract, "vision")):
        assert admits(etcd, member, worker_pod(plan, job), layout.ETCD_CLIENT_PORT), job["metadata"]["namespace"]
    stranger = pod(plan, "default", platform_job["spec"]["tasks"][0]["template"]["metadata"]["labels"])
    assert not admits(etcd, member, stranger, layout.ETCD_CLIENT_PORT)
    assert not admits(etcd, member, worker_pod(plan, team_job(contract, "nlp")), 2380)  # the peers' port is the members'


def test_a_team_reaches_its_own_pods_and_nothing_of_another_team(plan, contract):
    nlp, vision = worker_pod(plan, team_job(contract, "nlp")), worker_pod(plan, team_job(contract, "vision"))
    nlp_policy = network_policy(plan, contract.team("nlp").namespace, "own-pods-only")
    vision_policy = network_policy(plan, contract.team("vision").namespace, "own-pods-only")
    assert admits(nlp_policy, nlp, nlp) and admits(vision_policy, vision, vision)
    assert not admits(nlp_policy, nlp, vision) and not admits(vision_policy, vision, nlp)
    platform = worker_pod(plan, launch.volcano_job(contract, launch.JobRequest(name="berttrain")))
    assert not admits(nlp_policy, nlp, platform)


def test_the_launcher_builds_the_team_job_and_refuses_what_its_quota_cannot_admit(tmp_path):
    path, outputs = outputs_file(tmp_path)
    result = run_module("jobs.launch", "--outputs", str(path), "--team", "nlp", "--dryrun", "--json")
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    (nlp,) = [t for t in outputs["teams"] if t["name"] == "nlp"]
    assert (job["metadata"]["namespace"], job["spec"]["queue"]) == (nlp["namespace"], nlp["queue"])
    one_line(
        run_module("jobs.launch", "--outputs", str(path), "--team", "nlp", "--nodes", "2", "--dryrun"),
        "--nodes 2",
        "queue team-nlp admits",
        "neuronShare",
    )
    one_line(
        run_module("jobs.launch", "--outputs", str(path), "--team", "search", "--dryrun"),
        "--team search",
        "declares no team 'search' (teams: nlp, vision)",
    )


def test_acceptance_checks_a_team_workspace_and_needs_the_team(tmp_path):
    path, outputs = outputs_file(tmp_path)
    one_line(run_module("jobs.acceptance", "team-volume", "--outputs", str(path), "--dryrun"), "team-volume", "--team")
    result = run_module("jobs.acceptance", "all", "--outputs", str(path), "--team", "vision", "--dryrun", "--json")
    assert result.returncode == 0, result.stderr
    jobs = {job["metadata"]["name"]: job for job in json.loads(result.stdout)}
    assert {job["metadata"]["namespace"] for job in jobs.values()} == {"team-vision"}
    volume = jobs["acceptance-team-volume"]["spec"]["template"]["spec"]
    assert volume["volumes"][0]["persistentVolumeClaim"]["claimName"] == outputs["teams"][1]["claimName"]
    script = volume["containers"][0]["command"][-1]
    assert f"{outputs['fsxMountPath']}{layout.TEAMS_DIR}" in script  # the root, where the teams' directories are, must not show
    assert "acceptance-etcd-rendezvous" in jobs  # etcd, reached from the team's namespace
    assert "efa-allreduce: skipped" in result.stderr  # one node's share: a two-node check cannot run there


# ---- config ---------------------------------------------------------------------------------------------------------

TEAM = {"name": "nlp", "neuronShare": 0.5, "principalArns": ["arn:aws:iam::111122223333:role/nlp-researchers"]}
OTHER = {"name": "vision", "neuronShare": 0.5, "principalArns": ["arn:aws:iam::111122223333:role/vision-researchers"]}
BAD_TEAMS = [
    ({"teams": [TEAM, {**OTHER, "neuronShare": 0.75}]}, "teams", "add up to 1.25"),
    ({"teams": [TEAM, {**OTHER, "name": "nlp"}]}, "teams[1].name", "used twice"),
    ({"teams": [TEAM, {**OTHER, "principalArns": TEAM["principalArns"]}]}, "teams[1].principalArns[0]", "already in team 'nlp'"),
    ({"teams": [{**TEAM, "neuronShare": 0.25}]}, "teams[0].neuronShare", "less than one trn1.32xlarge node"),
    ({"teams": [TEAM], "volcanoQueues": [{"name": "team-nlp"}]}, "teams[0].name", "also in volcanoQueues"),
    ({"teams": [{**TEAM, "neuronShar": 0.5}]}, "teams[0].neuronShar", "did you mean 'neuronShare'"),
    ({"teams": [{**TEAM, "neuronShare": "half"}]}, "teams[0].neuronShare", "number"),
    ({"teams": [{**TEAM, "name": "NLP_team"}]}, "teams[0].name", "DNS label"),
    ({"teams": [{**TEAM, "principalArns": ["nlp-researchers"]}]}, "teams[0].principalArns[0]", "ARN"),
]


@pytest.mark.parametrize(("overrides", "key", "words"), BAD_TEAMS, ids=[f"{key}:{words}" for _, key, words in BAD_TEAMS])
def test_bad_teams_name_the_key_and_the_fix(overrides, key, words):
    with pytest.raises(ConfigError) as caught:
        parse(settings("staging", **overrides).config, stack="staging")
    message = str(caught.value)
    assert "\n" not in message and "; " in message, message
    assert message.split(": ")[0].endswith(key) and words in message, message


def test_shares_above_capacity_stop_preflight_in_one_line(tmp_path):
    stack = yaml.safe_load((REPO_ROOT / "stacks" / "Pulumi.staging.yaml").read_text())
    stack["config"]["trainium-eks:teams"][1]["neuronShare"] = 0.75
    path = Path(tmp_path) / "Pulumi.staging.yaml"
    path.write_text(yaml.safe_dump(stack))
    one_line(run_preflight("plan", "staging", "--stack-file", str(path)), "trainium-eks:teams", "add up to 1.25", "lower")
