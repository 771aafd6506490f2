"""The launcher and acceptance jobs, built from a stack's outputs alone: the shipped stacks' (what is expected derived
from their outputs), and fixture stacks' where a test needs a kind of node group."""

from __future__ import annotations

import json

import pytest
from job_outputs import (
    NO_EFA,
    TWO_EFA_NODES,
    assert_the_group_job,
    default_nodes,
    launch_json,
    outputs_file,
    pod_templates,
    run_module,
    stack_outputs,
)
from support import STACKS, run_preflight

from jobs.workloads import bert_job
from training import crash_budget
from trainium_eks import catalog, layout
from trainium_eks.backends import BACKENDS
from trainium_eks.contract import ContractError, PlatformContract

pytestmark = pytest.mark.stacks


def test_dryrun_prints_the_volcano_job_of_each_group_the_stack_describes(tmp_path):
    """Each group's job, and its precompile where its backend precompiles; elsewhere --precompile is one line."""
    path, outputs = outputs_file(tmp_path)
    assert outputs["trainiumNodeGroups"]
    for group in outputs["trainiumNodeGroups"]:
        elastic = outputs["trainiumNodeGroupScaling"][group["name"]]["provisioning"] == "karpenter"
        nodes = min(2, int(group["maxSize"] if elastic else group["desiredSize"]))
        chosen = ("--node-group", group["name"])
        assert_the_group_job(launch_json("--outputs", str(path), *chosen, "--dryrun", "--json"), outputs, group, nodes)
        software = outputs["trainiumNodeGroupSoftware"][group["name"]]
        if BACKENDS[software["backend"]].precompiler:
            job = launch_json("--outputs", str(path), *chosen, "--dryrun", "--json", "--precompile")
            assert_the_group_job(job, outputs, group, nodes, precompile=True)
        else:
            refused = run_module("jobs.launch", "--outputs", str(path), *chosen, "--dryrun", "--precompile")
            assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
            assert refused.stderr.startswith("error: --precompile: ") and "drop --precompile" in refused.stderr


@pytest.mark.parametrize("stack", STACKS)
def test_the_default_job_launches_on_every_stack(tmp_path, stack):
    path, outputs = outputs_file(tmp_path, stack)
    job = launch_json("--outputs", str(path), "--dryrun", "--json")
    assert len(job["spec"]["tasks"]) == default_nodes(outputs)


def test_a_drained_or_evicted_pod_restarts_the_job_in_a_new_rendezvous_and_a_spent_crash_budget_ends_it(tmp_path):
    path, _ = outputs_file(tmp_path)
    job = launch_json("--outputs", str(path), "--dryrun", "--json")
    # Planned restarts are not rationed: Volcano counts every restart against maxRetry (jobs.rehearsal.volcano_lifecycle).
    assert job["spec"]["maxRetry"] == 2**31 - 1
    assert job["spec"]["policies"] == [  # in this order: Volcano takes the first policy that matches
        {"exitCode": crash_budget.BUDGET_SPENT_EXIT_CODE, "action": "TerminateJob"},  # crashed past the run's budget
        {"event": "PodFailed", "action": "RestartJob"},  # a drain (143, 137), a lost node, a crash within the budget
        {"event": "PodEvicted", "action": "RestartJob"},
    ]
    for template in pod_templates(job):
        (container,) = template["spec"]["containers"]
        assert container["command"][:3] == ["python", "-m", "training.agent"]
        (run_id,) = [a for a in container["command"] if a.startswith("--rdzv_id=")]
        assert run_id.endswith("-$(VOLCANO_JOB_VERSION)")  # expanded by the kubelet from the variable below
        env = {e["name"]: e for e in container["env"]}
        version = env["VOLCANO_JOB_VERSION"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert version == "metadata.annotations['volcano.sh/job-version']"
        # the crash budget's count lives in the run's own directory, beside its checkpoints
        (output_dir,) = [container["command"][i + 1] for i, a in enumerate(container["command"]) if a == "--output-dir"]
        assert env[crash_budget.RUN_DIRECTORY_ENV]["value"] == output_dir
        assert int(env[crash_budget.BUDGET_ENV]["value"]) >= 1


def test_precompile_and_training_share_a_compile_cache_whatever_their_names(tmp_path):
    """The README's step 4 precompiles, then trains: both must read and write one cache, default names or not, and a
    change to what shapes the graphs must get another."""
    path, outputs = outputs_file(tmp_path, **TWO_EFA_NODES)

    def cache(*args):
        job = launch_json("--outputs", str(path), "--dryrun", "--json", *args)
        env = {e["name"]: e.get("value") for e in pod_templates(job)[0]["spec"]["containers"][0]["env"]}
        flags = env["NEURON_CC_FLAGS"]
        assert flags == f"--cache_dir={job['metadata']['annotations']['trainium-eks/compile-cache']}"
        return flags

    shared = cache("--precompile")
    assert shared.startswith(f"--cache_dir={outputs['neuronCompileCachePath']}/bert-large-")
    assert cache() == shared  # the defaults: bertcompile, then berttrain
    assert cache("--precompile", "--name", "nightly") == cache("--name", "run-7") == shared
    data = ("--data-dir", f"{outputs['datasetsPath']}/{bert_job.DATASET}", "--output-dir", "/data/checkpoints/x")
    assert cache("--", *data, "--batch-size", "16", "--grad-accum-steps", "32") == shared  # the same options, spelt out
    for different in (
        ("--no-bf16",),
        ("--nodes", "1"),
        ("--", *data, "--batch-size", "8"),
        ("--", *data, "--model", "tiny"),
    ):
        assert cache(*different) != shared, different


def test_the_launcher_prints_the_cache_and_what_it_is_derived_from(tmp_path):
    path, outputs = outputs_file(tmp_path)
    result = run_module("jobs.launch", "--outputs", str(path), "--dryrun", "--json")
    assert result.returncode == 0 and json.loads(result.stdout)  # stdout stays the job alone
    line, *notes = result.stderr.splitlines()
    assert [note.split(":")[0] for note in notes] == ["Disruptions"]  # an elastic group: what each way its nodes go does
    assert "; termination grace period " in line
    assert line.startswith(f"compile cache {outputs['neuronCompileCachePath']}/bert-large-")
    instance_type = outputs["trainiumNodeGroups"][0]["instanceType"]
    world_size = default_nodes(outputs) * catalog.INSTANCE_TYPES[instance_type].neuron_cores
    assert all(word in line for word in ("batchSize 16", "bf16 True", f"worldSize {world_size}", instance_type, "seqlen128"))
    bad = run_module("jobs.launch", "--outputs", str(path), "--dryrun", "--", "--batch-size", "two")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--batch-size" in bad.stderr


def test_a_single_trn1_2xlarge_runs_without_efa(tmp_path):
    path, _ = outputs_file(tmp_path, "dev", **NO_EFA)
    job = launch_json("--outputs", str(path), "--dryrun", "--json", "--nodes", "1")
    (template,) = pod_templates(job)
    container = template["spec"]["containers"][0]
    assert layout.EFA_RESOURCE not in container["resources"]["limits"]
    assert "FI_PROVIDER" not in {e["name"] for e in container["env"]}
    assert "--nproc_per_node=2" in container["command"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--nodes", "3"], "--nodes 3: elastic node group trn1-32xl grows to 2 nodes at most (maxSize)"),
        (["--workers-per-node", "33"], "has 32 NeuronCores"),
        (["--node-group", "gpu"], "--node-group gpu: no such node group"),
        (["--queue", "other"], "--queue other: no such Volcano queue"),
    ],
)
def test_bad_requests_exit_2_with_one_line(tmp_path, args, words):
    path, _ = outputs_file(tmp_path, **TWO_EFA_NODES)
    result = run_module("jobs.launch", "--outputs", str(path), "--dryrun", *args)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and words in result.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--nodes", "0"], "--nodes 0: input should be greater than 0"),
        (["--workers-per-node", "0"], "--workers-per-node 0"),
        (["--name", "../../etc"], "--name ../../etc: string should match pattern"),
        (["--name", ""], "--name : string should match pattern"),
        (["--image-tag=.latest"], "--image-tag .latest"),
        (["--nodes", "two"], "invalid int value"),
        (["--frobnicate"], "unrecognized arguments"),
    ],
)
def test_bad_options_exit_2_with_one_line(tmp_path, args, words):
    path, _ = outputs_file(tmp_path)
    result = run_module("jobs.launch", "--outputs", str(path), "--dryrun", *args)
    assert result.returncode == 2, result.stdout
    assert result.stderr.strip().count("\n") == 0 and words in result.stderr, result.stderr
    assert "usage:" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("module", ["jobs.launch", "jobs.acceptance"])
@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[1, 2]", "expected a JSON object"),
        ("{not json", "not a readable JSON file"),
        (b"\xff\xfe\x00binary", "not a readable JSON file"),
        ("[" * 100_000 + "]" * 100_000, "not a readable JSON file"),
    ],
)
def test_unreadable_outputs_exit_2_with_one_line(tmp_path, module, content, words):
    path = tmp_path / "outputs.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    args = ["all"] if module == "jobs.acceptance" else []
    result = run_module(module, *args, "--outputs", str(path), "--dryrun")
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda o: o.update(trainiumNodeGroups="trn1"), "trainiumNodeGroups: input should be a valid tuple"),
        (lambda o: o["trainiumNodeGroups"][0].update(desiredSize="two"), "trainiumNodeGroups.0.desiredSize"),
        (lambda o: o["trainiumNodeGroups"][0].pop("nodeSelector"), "trainiumNodeGroups.0.nodeSelector: field required"),
        (lambda o: o.update(trainiumNodeGroups=[]), "trainiumNodeGroups: tuple should have at least 1 item"),
        (lambda o: o.update(nodeTaints=[{"key": 1}]), "nodeTaints.0.key"),
        (lambda o: o.update(etcdEndpoint=None), "etcdEndpoint: input should be a valid string"),
        (lambda o: o.pop("etcdEndpoint"), "etcdEndpoint: missing"),
        (lambda o: o.update(contractVersion="2.0.0"), "publishes 2.0.0"),
        (lambda o: o.pop("trainiumNodeGroupSoftware"), "trainiumNodeGroupSoftware: missing from contract"),
        (
            lambda o: o["trainiumNodeGroupSoftware"].pop(o["trainiumNodeGroups"][0]["name"]),
            "trainiumNodeGroupSoftware: no entry for node group",
        ),
        (lambda o: o.pop("contractVersion"), "not the outputs of a trainium-eks stack"),
    ],
)
def test_outputs_that_break_the_contract_are_rejected(tmp_path, edit, words):
    path, _ = outputs_file(tmp_path, edit=edit)
    result = run_module("jobs.launch", "--outputs", str(path), "--dryrun")
    assert result.returncode == 2 and words in result.stderr


def test_a_whole_plan_is_accepted_as_outputs(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(run_preflight("plan", "staging", "--json").stdout)
    assert launch_json("--outputs", str(plan), "--dryrun", "--json")["kind"] == "Job"


def test_submitting_needs_the_kubeconfig(tmp_path):
    path, _ = outputs_file(tmp_path)
    result = run_module("jobs.launch", "--outputs", str(path))
    assert result.returncode == 2 and "no kubeconfig" in result.stderr


def test_contract_version_rules():
    outputs = json.loads(stack_outputs("staging"))
    assert PlatformContract.from_outputs(outputs, requires="1.0.0").version == outputs["contractVersion"]
    with pytest.raises(ContractError, match="needs 1.9.0"):
        PlatformContract.from_outputs(outputs, requires="1.9.0")


def test_stack_option_needs_the_pulumi_cli(tmp_path):
    result = run_module("jobs.launch", "--stack", "staging", "--dryrun", env={"PATH": str(tmp_path)})
    assert result.returncode == 2 and "needs the Pulumi CLI" in result.stderr
