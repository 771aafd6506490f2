"""The acceptance jobs, built from a stack's outputs alone: valid, restricted, one-shot, on the platform's nodes."""

from __future__ import annotations

import copy
import json
import subprocess

import kubernetes_validate
import pytest
from job_outputs import (
    NO_EFA,
    ROLE_LABEL,
    TWO_EFA_NODES,
    TWO_GENERATIONS,
    assert_valid_pod,
    assert_valid_policies,
    outputs_file,
    pod_templates,
    run_module,
    stack_outputs,
)

from jobs import acceptance, launch
from jobs.errors import LaunchError
from jobs.job_building import platform_job
from jobs.job_building.torchx_component import AGENT_COMMAND
from jobs.workloads import bert_job
from trainium_eks import catalog, hardware, layout, versions
from trainium_eks.contract import PlatformContract

pytestmark = pytest.mark.stacks

A_TEAM = [{"name": "research", "neuronShare": 1.0}]


def checked_in(contract: PlatformContract, name: str) -> PlatformContract:
    """The workspace a check runs in: the platform's, or for the team check (which needs --team) the first team's."""
    return contract.for_team(contract.teams[0].name) if name == "team-volume" else contract


def staging_contract() -> PlatformContract:
    """staging as a fixture: two EFA nodes (trn1) and a team, whatever the shipped stack holds."""
    return PlatformContract.from_outputs(json.loads(stack_outputs("staging", **{**TWO_EFA_NODES, "teams": A_TEAM})))


def two_generations_contract() -> PlatformContract:
    """A trn1.32xlarge pool and a trn2.48xlarge pool in a Capacity Block, two nodes each, and a team."""
    return PlatformContract.from_outputs(json.loads(stack_outputs("staging", **{**TWO_GENERATIONS, "teams": A_TEAM})))


def group_of(contract: PlatformContract, generation: str):
    (group,) = [g for g in contract.node_groups if catalog.INSTANCE_TYPES[g.instance_type].generation == generation]
    return group


# The checks that time torch.distributed's collectives call by call: only on a backend whose collectives run when called.
EAGER_ONLY = {"collective-bandwidth"}


def built_checks(contract: PlatformContract, group) -> dict[str, dict]:
    """Every check's job for ``group`` in the workspace it runs in; a check that refuses the group is left out (the
    tests name which)."""
    jobs = {}
    for name, build in acceptance.CHECKS.items():
        try:
            jobs[name] = build(checked_in(contract, name), group)
        except LaunchError:
            continue
    return jobs


@pytest.mark.parametrize("generation", ["trn1", "trn2"])
def test_acceptance_jobs_are_valid_and_target_the_platform(generation):
    contract = staging_contract() if generation == "trn1" else two_generations_contract()
    group = contract.node_groups[0] if generation == "trn1" else group_of(contract, "trn2")
    jobs = built_checks(contract, group)
    # XLA's collectives cannot be timed call by call: trn1 has every check but those
    assert set(jobs) == set(acceptance.CHECKS) - (EAGER_ONLY if generation == "trn1" else set())
    for name, job in jobs.items():
        if job["apiVersion"] == "batch/v1":
            kubernetes_validate.validate(copy.deepcopy(job), "1.35", strict=True)
        else:
            for template in pod_templates(job):
                assert_valid_pod(template)
        assert job["metadata"]["namespace"] == checked_in(contract, name).job_namespace, name
    devices = jobs["neuron-devices"]
    assert devices["spec"]["completions"] == group.max_size  # an elastic pool: every node it can hold
    assert "podAntiAffinity" in devices["spec"]["template"]["spec"]["affinity"]
    efa_command = pod_templates(jobs["efa-allreduce"])[0]["spec"]["containers"][0]["command"]
    assert "training.allreduce_check" in efa_command
    assert (
        jobs["fsx-shared"]["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
        == contract.fsx_claim_name
    )
    etcd_command = jobs["etcd-rendezvous"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert contract.etcd_endpoint.split(":")[0] in etcd_command[-1]


@pytest.mark.parametrize("generation", ["trn1", "trn2"])
def test_acceptance_checks_run_restricted_with_requests(generation):
    contract = staging_contract() if generation == "trn1" else two_generations_contract()
    group = contract.node_groups[0] if generation == "trn1" else group_of(contract, "trn2")
    for name, job in built_checks(contract, group).items():
        templates = pod_templates(job) if "tasks" in job["spec"] else [job["spec"]["template"]]
        for template in templates:
            pod = template["spec"]
            if name == "efa-bandwidth" and template["metadata"]["labels"][ROLE_LABEL] != acceptance.LAUNCHER:
                continue  # the nodes run sshd for MPI: test_the_bandwidth_check_runs_nccom_test_over_mpi_across_two_whole_nodes
            # they write to the shared volume (its owner is root), or read the SSH key Volcano mounts for root
            runs_as_root = name in (
                "fsx-shared",
                "team-volume",
                "efa-allreduce",
                "efa-bandwidth",
                "collective-bandwidth",
                "train-step",
            )
            assert pod["securityContext"]["runAsNonRoot"] is not runs_as_root, name
            assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            for container in pod["containers"]:
                context = container["securityContext"]
                assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
                assert context["readOnlyRootFilesystem"] is True
                requests, limits = container["resources"]["requests"], container["resources"]["limits"]
                assert requests["cpu"] and requests["memory"] and limits["memory"], name
                for device in (layout.NEURON_DEVICE_RESOURCE, layout.EFA_RESOURCE):
                    assert requests.get(device) == limits.get(device), (name, device)


def test_the_bandwidth_check_runs_nccom_test_over_mpi_across_two_whole_nodes():
    contract = staging_contract()
    (group,) = contract.node_groups
    job = acceptance.efa_bandwidth(contract, contract.node_groups[0])
    assert {"ssh", "svc"} <= set(job["spec"]["plugins"])  # one key pair and the peers' host names for MPI over SSH
    tasks = {task["name"]: task for task in job["spec"]["tasks"]}
    nodes = [t for name, t in tasks.items() if name.startswith(acceptance.NODE)]
    (launcher,) = [t for name, t in tasks.items() if name.startswith(acceptance.LAUNCHER)]
    assert len(nodes) == 2
    for node in nodes:
        pod = node["template"]["spec"]
        (container,) = pod["containers"]
        limits = container["resources"]["limits"]
        assert limits[layout.NEURON_DEVICE_RESOURCE] == str(group.neuron_devices_per_node)
        assert limits[layout.EFA_RESOURCE] == str(group.efa_interfaces_per_node)
        assert "/usr/sbin/sshd -D" in container["command"][-1]
        assert pod["securityContext"]["runAsUser"] == 0 and pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert pod["nodeSelector"][layout.NODE_GROUP_LABEL] == group.name
    script = launcher["template"]["spec"]["containers"][0]["command"][-1]
    ranks = 2 * group.neuron_cores_per_node
    assert f"nccom-test -r {ranks} -N 2 " in script and " allr " in script and "--hosts" in script
    assert "NEURON_RT_ROOT_COMM_ID" in script
    floor = catalog.INSTANCE_TYPES[group.instance_type].acceptance_bus_bandwidth_fraction
    line_rate = catalog.INSTANCE_TYPES[group.instance_type].network_bandwidth_gbps
    assert f"training.bus_bandwidth_check /tmp/nccom-test.txt --line-rate-gbps {line_rate:g} --min-fraction {floor:g}" in script
    assert launcher["policies"] == [{"event": "TaskCompleted", "action": "CompleteJob"}]  # the nodes' sshd never exits


def test_the_bandwidth_check_needs_two_efa_nodes(tmp_path):
    path, _ = outputs_file(tmp_path, "dev", **NO_EFA)
    result = run_module("jobs.acceptance", "efa-bandwidth", "--outputs", str(path), "--dryrun")
    assert result.returncode == 2 and "efa-bandwidth: node group trn1-2xl needs two or more EFA nodes" in result.stderr


def test_the_bandwidth_check_prints_its_manifest(tmp_path):
    path, _ = outputs_file(tmp_path, **TWO_EFA_NODES)
    result = run_module("jobs.acceptance", "efa-bandwidth", "--outputs", str(path), "--dryrun", "--json")
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert job["kind"] == "Job" and job["metadata"]["name"].startswith("acceptance-efa-bandwidth")


def test_a_check_runs_once_and_a_failure_ends_its_job():
    contract = two_generations_contract()
    jobs = built_checks(contract, group_of(contract, "trn2"))
    volcano = {name: job for name, job in jobs.items() if job["apiVersion"] == "batch.volcano.sh/v1alpha1"}
    assert set(volcano) == {"efa-allreduce", "efa-bandwidth", "collective-bandwidth", "train-step"}
    for name, job in volcano.items():
        assert job["spec"]["maxRetry"] == 1, name  # 0 would become Volcano's default 3
        assert job["spec"]["policies"] == [
            {"event": "PodFailed", "action": "TerminateJob"},
            {"event": "PodEvicted", "action": "TerminateJob"},
        ], name
        for policies in [job["spec"]["policies"], *(task.get("policies", []) for task in job["spec"]["tasks"])]:
            assert_valid_policies(policies)
            assert "RestartJob" not in {policy["action"] for policy in policies}, name
    for name, job in jobs.items():
        if name not in volcano:
            assert job["spec"]["backoffLimit"] == 0 and job["spec"]["template"]["spec"]["restartPolicy"] == "Never", name
    # The training job keeps its restarts.
    training = bert_job.volcano_job(contract, launch.JobRequest(name="berttrain"))
    assert training["spec"]["maxRetry"] == platform_job.JOB_RESTARTS
    assert "RestartJob" in {policy["action"] for policy in training["spec"]["policies"]}
    assert_valid_policies(training["spec"]["policies"])


def test_the_node_pods_hand_the_image_and_pod_environment_to_ssh_sessions(tmp_path):
    contract = staging_contract()
    job = acceptance.efa_bandwidth(contract, contract.node_groups[0])
    nodes = [task for task in job["spec"]["tasks"] if task["name"].startswith(acceptance.NODE)]
    assert len(nodes) == 2
    image_environment = {"PATH": "/opt/aws/neuron/bin:/usr/bin:/bin", "LD_LIBRARY_PATH": "/opt/aws/neuron/lib"}
    for index, node in enumerate(nodes):
        (container,) = node["template"]["spec"]["containers"]
        script = container["command"][-1]
        assert script.index(">> /etc/environment") < script.index("exec /usr/sbin/sshd")
        # Run the part before sshd against a scratch file, with the pod's variables over the image's.
        environment_file = tmp_path / f"environment-{index}"
        writer = script[: script.index(" && ssh-keygen")].replace("/etc/environment", str(environment_file))
        pod_environment = {e["name"]: e["value"] for e in container["env"] if "value" in e}
        subprocess.run(["bash", "-c", writer], env={**image_environment, "HOME": "/root", **pod_environment}, check=True)
        written = dict(line.split("=", 1) for line in environment_file.read_text().splitlines())
        forwarded = {k: v for k, v in pod_environment.items() if k.startswith(("FI_", "CCOM_", "NEURON_"))}
        assert {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "CCOM_SOCKET_IFNAME"} <= set(forwarded)
        assert written == {**image_environment, **forwarded}  # and nothing else (HOME stays the session's own)


def test_all_runs_what_applies_to_the_group_and_names_what_it_skipped(tmp_path):
    """trn1.2xlarge has no EFA: `all` runs the other checks, says in one line which it skipped and why, and ends
    with one verdict line per check (exit 0); a skipped check asked for alone is an error."""
    path, _ = outputs_file(tmp_path, "dev", **NO_EFA)
    result = run_module("jobs.acceptance", "all", "--outputs", str(path), "--dryrun", "--json")
    assert result.returncode == 0, result.stderr
    names = [job["metadata"]["name"] for job in json.loads(result.stdout)]
    # a Volcano Job's name carries TorchX's suffix
    expected = ["acceptance-neuron-devices", "acceptance-train-step", "acceptance-fsx-shared", "acceptance-etcd-rendezvous"]
    assert len(names) == len(expected) and all(name.startswith(prefix) for name, prefix in zip(names, expected, strict=True))
    skipped, *verdicts = result.stderr.splitlines()
    assert skipped.startswith("skipped on node group trn1-2xl: efa-allreduce: ") and "efa-bandwidth: " in skipped
    assert "collective-bandwidth: times torch.distributed on the neuron backend" in skipped
    # every check of the platform's workspace; team-volume only with --team (tests/test_teams.py)
    assert sorted(line.split(":")[0] for line in verdicts) == sorted(set(acceptance.CHECKS) - {"team-volume"})
    assert {line for line in verdicts if line.endswith("skipped")} == {
        "efa-allreduce: skipped",
        "efa-bandwidth: skipped",
        "collective-bandwidth: skipped",
    }
    alone = run_module("jobs.acceptance", "efa-allreduce", "--outputs", str(path), "--dryrun")
    assert alone.returncode == 2 and "needs two or more EFA nodes" in alone.stderr


def test_the_node_group_is_named_when_there_are_several(tmp_path):
    def two_groups(outputs):
        first = outputs["trainiumNodeGroups"][0]
        spare = {**first, "name": "spare", "nodeSelector": {"trainium-eks/node-group": "spare"}}
        outputs["trainiumNodeGroups"] = [first, spare]
        outputs["trainiumNodeGroupScaling"]["spare"] = outputs["trainiumNodeGroupScaling"][first["name"]]
        outputs["trainiumNodeGroupSoftware"]["spare"] = outputs["trainiumNodeGroupSoftware"][first["name"]]

    path, outputs = outputs_file(tmp_path, "staging", edit=two_groups)
    result = run_module("jobs.acceptance", "neuron-devices", "--outputs", str(path), "--dryrun")
    first = outputs["trainiumNodeGroups"][0]["name"]
    assert result.returncode == 2 and f"2 node groups ({first}, spare); name one" in result.stderr
    chosen = run_module(
        "jobs.acceptance", "neuron-devices", "--outputs", str(path), "--dryrun", "--json", "--node-group", "spare"
    )
    assert chosen.returncode == 0, chosen.stderr
    selector = json.loads(chosen.stdout)["spec"]["template"]["spec"]["nodeSelector"]
    assert selector == {"trainium-eks/node-group": "spare"}
    unknown = run_module("jobs.acceptance", "neuron-devices", "--outputs", str(path), "--dryrun", "--node-group", "gpu")
    assert unknown.returncode == 2 and "--node-group gpu: no such node group" in unknown.stderr


@pytest.mark.parametrize("generation", ["trn1", "trn2"])
def test_the_checks_of_each_generation_run_its_image_on_its_devices_cores_and_interfaces(generation):
    """On a stack of both generations, every check of a group runs that group's training image; the EFA checks take
    its devices, one rank per NeuronCore it advertises (64 on trn2.48xlarge at LNC=2) and all its EFA interfaces,
    judged against its type's floor (an engineering choice: the catalog's acceptance_bus_bandwidth_fraction)."""
    contract = two_generations_contract()
    group = group_of(contract, generation)
    spec = catalog.INSTANCE_TYPES[group.instance_type]
    stack = versions.training_stack_of(generation)
    image = f"{contract.ecr_repository_url}:{stack.image_tag}"
    cores = spec.neuron_cores_at(hardware.GENERATIONS[generation].default_lnc)
    jobs = {name: job for name, job in built_checks(contract, group).items() if name != "team-volume"}
    assert set(jobs) == set(acceptance.CHECKS) - {"team-volume"} - (EAGER_ONLY if generation == "trn1" else set())
    for name, job in jobs.items():
        templates = pod_templates(job) if "tasks" in job["spec"] else [job["spec"]["template"]]
        assert {c["image"] for t in templates for c in t["spec"]["containers"]} == {image}, name
    (devices,) = jobs["neuron-devices"]["spec"]["template"]["spec"]["containers"]
    assert devices["resources"]["limits"][layout.NEURON_DEVICE_RESOURCE] == str(spec.neuron_devices)

    for template in pod_templates(jobs["efa-allreduce"]):
        (container,) = template["spec"]["containers"]
        assert f"--nproc_per_node={cores}" in container["command"]
        limits = container["resources"]["limits"]
        assert limits[layout.NEURON_DEVICE_RESOURCE] == str(spec.neuron_devices)
        assert limits[layout.EFA_RESOURCE] == str(spec.max_efa_interfaces)
        assert stack.backend.cache_variable in {e["name"] for e in container["env"]}
    tasks = jobs["efa-bandwidth"]["spec"]["tasks"]
    (launcher,) = [t for t in tasks if t["name"].startswith(acceptance.LAUNCHER)]
    script = launcher["template"]["spec"]["containers"][0]["command"][-1]
    floor = catalog.INSTANCE_TYPES[group.instance_type].acceptance_bus_bandwidth_fraction
    assert f"nccom-test -r {2 * cores} -N 2 " in script and f"--min-fraction {floor:g}" in script
    for node in [t for t in tasks if t["name"].startswith(acceptance.NODE)]:
        limits = node["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert limits[layout.EFA_RESOURCE] == str(spec.max_efa_interfaces)


def torchrun_command(job: dict) -> list[str]:
    """torchrun's arguments in the job's command, after the pods' entrypoint that runs it."""
    (container,) = pod_templates(job)[0]["spec"]["containers"]
    assert tuple(container["command"][: len(AGENT_COMMAND)]) == AGENT_COMMAND
    return container["command"][len(AGENT_COMMAND) :]


@pytest.mark.parametrize("generation", ["trn1", "trn2"])
def test_the_training_step_check_trains_on_one_whole_node_of_the_group_with_its_backend(generation):
    """train-step: torchrun on one node, a worker per NeuronCore, the group's image and backend (XLA on trn1, neuron on
    trn2: their compile caches on the shared volume), bf16 as training computes, once."""
    contract = two_generations_contract()
    group = group_of(contract, generation)
    stack = versions.training_stack_of(generation)
    job = acceptance.train_step(contract, group)
    (task,) = job["spec"]["tasks"]
    assert task["replicas"] == 1
    command = torchrun_command(job)
    assert command[command.index("-m") + 1] == "training.smoke_step" and "--bf16" in command
    assert "--nnodes=1" in command and f"--nproc_per_node={group.neuron_cores_per_node}" in command
    assert "--max-restarts=0" in command  # a failed step is not retried
    (container,) = task["template"]["spec"]["containers"]
    assert container["image"] == f"{contract.ecr_repository_url}:{stack.image_tag}"
    assert container["resources"]["limits"][layout.NEURON_DEVICE_RESOURCE] == str(group.neuron_devices_per_node)
    environment = {e["name"]: e.get("value") for e in container["env"]}
    assert environment[stack.backend.cache_variable].startswith(
        stack.backend.cache_value.format(contract.neuron_compile_cache_path)
    )
    assert all(environment.get(k) == v for k, v in stack.backend.bf16_environment.items())
    assert job["spec"]["policies"] == [
        {"event": "PodFailed", "action": "TerminateJob"},
        {"event": "PodEvicted", "action": "TerminateJob"},
    ]


def test_the_collective_bandwidth_check_times_torch_distributed_on_two_trn2_nodes_against_the_floor():
    contract = two_generations_contract()
    group = group_of(contract, "trn2")
    job = acceptance.collective_bandwidth(contract, group)
    assert sum(task["replicas"] for task in job["spec"]["tasks"]) == 2  # two whole nodes
    command = torchrun_command(job)
    assert command[command.index("-m") + 1] == "training.collective_bandwidth"
    assert "--nnodes=2" in command and f"--nproc_per_node={group.neuron_cores_per_node}" in command
    floor = catalog.INSTANCE_TYPES[group.instance_type].acceptance_bus_bandwidth_fraction
    line_rate = catalog.INSTANCE_TYPES[group.instance_type].network_bandwidth_gbps
    arguments = command[command.index("-m") + 2 :]
    # the launcher names the group's backend; the check refuses an image without it
    device = ["--device", contract.software(group).backend]
    assert arguments == [*device, "--line-rate-gbps", f"{line_rate:g}", "--min-fraction", f"{floor:g}"]
    assert "--max-restarts=0" in command  # a rerun after a result below the floor could pass by luck
    for template in pod_templates(job):
        limits = template["spec"]["containers"][0]["resources"]["limits"]
        assert limits[layout.NEURON_DEVICE_RESOURCE] == str(group.neuron_devices_per_node)
        assert limits[layout.EFA_RESOURCE] == str(group.efa_interfaces_per_node)
    assert job["spec"]["maxRetry"] == 1


def test_the_collective_bandwidth_check_refuses_trn1_and_names_nccom_test(tmp_path):
    path, _ = outputs_file(tmp_path, **TWO_GENERATIONS)
    result = run_module(
        "jobs.acceptance", "collective-bandwidth", "--outputs", str(path), "--node-group", "trn1-32xl", "--dryrun"
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "pytorch-xla-2.30 (xla backend)" in result.stderr and "efa-bandwidth" in result.stderr
    trn2 = run_module(
        "jobs.acceptance", "collective-bandwidth", "--outputs", str(path), "--node-group", "trn2-48xl", "--dryrun", "--json"
    )
    assert trn2.returncode == 0, trn2.stderr
    assert json.loads(trn2.stdout)["metadata"]["name"].startswith("acceptance-collective-bandwidth")
