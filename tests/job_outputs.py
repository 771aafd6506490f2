"""What the launcher's tests share: stack outputs of the stacks they need, the launcher run as a user runs it, and
the checks of the Volcano Jobs it prints."""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys

import generation_mutations
import jsonschema
import kubernetes_validate
from support import evaluate, one_group

from jobs import launch
from jobs.rehearsal.volcano_lifecycle import Policy, admission_problem
from preflight.stackfile import REPO_ROOT
from trainium_eks import catalog, hardware, layout
from trainium_eks.backends import BACKENDS

# A fixture stack: one elastic group of two trn1.32xlarge (EFA), as the reference tutorial runs.
TWO_EFA_NODES = one_group("trn1.32xlarge")
# A fixture stack: one elastic group of trn1.2xlarge (no EFA).
NO_EFA = one_group("trn1.2xlarge")
# A fixture stack of both generations (tests/generation_mutations.py): a trn1.32xlarge pool and a trn2.48xlarge pool in
# a Capacity Block, two nodes each, and no team.
TWO_GENERATIONS = {**generation_mutations.TWO_GENERATIONS, "teams": []}
# A step time for the pods' grace period where no source gives one (`jobs.job_building.grace_period`).
GIVEN_STEP = ("--step-seconds", "7.5")


@functools.cache
def _cached_outputs(stack: str, overrides: str) -> str:
    return json.dumps(evaluate(stack, **json.loads(overrides)).outputs)


def stack_outputs(stack: str, **overrides) -> str:
    """The outputs of ``stack`` with ``overrides``, as JSON (evaluated once per process)."""
    return _cached_outputs(stack, json.dumps(overrides, sort_keys=True))


def outputs_file(tmp_path, stack: str = "staging", edit=None, **overrides):
    outputs = json.loads(stack_outputs(stack, **overrides))
    if edit:
        edit(outputs)
    path = tmp_path / f"{stack}-outputs.json"
    path.write_text(json.dumps(outputs))
    return path, outputs


def default_nodes(outputs: dict) -> int:
    """The nodes a job takes when it does not say: 2, or fewer if the first group holds fewer (README "Launch")."""
    group = outputs["trainiumNodeGroups"][0]
    elastic = outputs["trainiumNodeGroupScaling"][group["name"]]["provisioning"] == "karpenter"
    return min(2, int(group["maxSize"] if elastic else group["desiredSize"]))


def launch_json(*args):
    result = run_module("jobs.launch", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def run_module(module, *args, env=None):
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=env
    )


ROLE_LABEL = "torchx.pytorch.org/role-name"
# A Volcano Job's lifecycle as Volcano 1.15 admits it: the fields its Job CRD gives a policy and maxRetry
# (config/crd/volcano/bases/batch.volcano.sh_jobs.yaml: exitCode and maxRetry are "format: int32", which the API server
# enforces and jsonschema does not, hence the bounds), the actions its admission webhook lets a job name
# (pkg/webhooks/admission/jobs/validate/util.go, policyActionMap), and its validatePolicies rules
# (``jobs.rehearsal.volcano_lifecycle.admission_problem``).
INT32 = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
CRD_EVENTS = [
    "*", "PodPending", "PodRunning", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "OutOfSync", "CommandIssued",
    "JobUpdated", "TaskFailed",
]  # fmt: skip
VOLCANO_POLICIES_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["action"],
        "properties": {
            "event": {"type": "string", "enum": CRD_EVENTS},
            "events": {"type": "array", "items": {"type": "string", "enum": CRD_EVENTS}},
            "exitCode": INT32,
            "timeout": {"type": "string"},
            "action": {
                "enum": [
                    "AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob", "CompleteJob",
                    "ResumeJob",
                ]
            },
        },
    },
}  # fmt: skip
VOLCANO_MAX_RETRY_SCHEMA = {**INT32, "minimum": 0}


def assert_valid_policies(policies):
    jsonschema.validate(policies, VOLCANO_POLICIES_SCHEMA)
    assert admission_problem(tuple(Policy.model_validate(policy) for policy in policies)) is None, policies


def assert_valid_lifecycle(job):
    """``job``'s maxRetry and policies, its tasks' included, as Volcano's CRD and admission webhook accept them."""
    jsonschema.validate(job["spec"]["maxRetry"], VOLCANO_MAX_RETRY_SCHEMA)
    for policies in [job["spec"].get("policies", []), *(task.get("policies", []) for task in job["spec"]["tasks"])]:
        assert_valid_policies(policies)


def pod_templates(job):
    return [task["template"] for task in job["spec"]["tasks"]]


def assert_valid_pod(template):
    pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(template)}
    kubernetes_validate.validate(pod, "1.35", strict=True)


def assert_the_group_job(job: dict, outputs: dict, group: dict, nodes: int, precompile: bool = False) -> None:
    """``job`` runs whole nodes of ``group`` as the outputs describe it: the group's own image, workers, devices and
    interfaces, its backend's environment and compile cache, and the platform's services."""
    spec = catalog.INSTANCE_TYPES[group["instanceType"]]
    software = outputs["trainiumNodeGroupSoftware"][group["name"]]
    backend = BACKENDS[software["backend"]]
    cache = job["metadata"]["annotations"][launch.COMPILE_CACHE_ANNOTATION]
    assert (job["apiVersion"], job["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")
    assert job["spec"]["queue"] == outputs["volcanoQueues"][0]["name"]
    assert job["metadata"]["namespace"] == outputs["jobNamespace"]
    assert len(job["spec"]["tasks"]) == nodes
    for template in pod_templates(job):
        pod = template["spec"]
        (container,) = pod["containers"]
        command = container["command"]
        assert container["image"] == software["trainingImage"]
        assert (command[0] == "neuron_parallel_compile") is precompile
        assert f"--rdzv_endpoint={outputs['etcdEndpoint']}" in command and "--rdzv_backend=etcd-v2" in command
        # one worker per NeuronCore the node advertises, at its generation's default LNC
        assert f"--nproc_per_node={spec.neuron_cores_at(hardware.GENERATIONS[spec.generation].default_lnc)}" in command
        assert f"--nnodes={nodes}" in command and "--max-restarts=3" in command
        assert ("--steps-this-run" in command) is precompile
        limits, requests = container["resources"]["limits"], container["resources"]["requests"]
        assert limits[layout.NEURON_DEVICE_RESOURCE] == str(spec.neuron_devices)
        assert limits.get(layout.EFA_RESOURCE) == (str(spec.max_efa_interfaces) if spec.supports_efa else None)
        # Volcano checks the queue's capability against requests: devices are requested, not only limited.
        assert requests[layout.NEURON_DEVICE_RESOURCE] == limits[layout.NEURON_DEVICE_RESOURCE]
        assert requests.get(layout.EFA_RESOURCE) == limits.get(layout.EFA_RESOURCE)
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
        assert claims == [outputs["fsxClaimName"]]
        assert any(m["mountPath"] == outputs["fsxMountPath"] for m in container["volumeMounts"])
        taint = outputs["nodeTaints"][0]
        assert {"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": taint["effect"]} in pod[
            "tolerations"
        ]
        assert pod["nodeSelector"]["trainium-eks/node-group"] == group["name"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        efa = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1"} if spec.supports_efa else {}
        assert {key: env[key] for key in env if key.startswith("FI_")} == efa
        assert env["NEURON_RT_RESET_CORES"] == "1" and env["CCOM_SOCKET_IFNAME"] == "eth0"
        # the compiled graphs go to the cache on the shared volume, through the backend's own variable alone
        assert cache.startswith(f"{outputs['neuronCompileCachePath']}/bert-large-")
        assert env[backend.cache_variable] == backend.cache_value.format(cache)
        others = {b.cache_variable for b in BACKENDS.values()} - {backend.cache_variable}
        assert not others & set(env)
        assert {key: env[key] for key in env if key.startswith("XLA_")} == (
            {"XLA_TRANSFER_SEED_ASYNC": "1", "XLA_DOWNCAST_BF16": "1"} if software["backend"] == "xla" else {}
        )
        assert_valid_pod(template)
