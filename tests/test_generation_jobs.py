"""The launcher on a stack of both generations: each group's own training stack and image, TorchTitan on trn2, the
pods' grace period, and platforms that predate per-group software."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from job_outputs import (
    GIVEN_STEP,
    TWO_EFA_NODES,
    TWO_GENERATIONS,
    assert_the_group_job,
    assert_valid_pod,
    launch_json,
    outputs_file,
    pod_templates,
    run_module,
)
from support import run_preflight, stack_copy

from jobs.job_building import grace_period, platform_job
from jobs.job_building.torchx_component import AGENT_COMMAND
from jobs.workloads import bert_job, registry, titan_recipes, torchtitan_job
from trainium_eks import catalog, layout, versions
from trainium_eks.contract import PlatformContract

pytestmark = pytest.mark.stacks


@pytest.fixture(scope="module")
def two_generations_plan(tmp_path_factory) -> Path:
    """`preflight plan --json` of a stack with a trn1 and a trn2 group: staging's file with TWO_GENERATIONS' keys."""

    def edit(config):
        config.update({key if ":" in key else f"trainium-eks:{key}": value for key, value in TWO_GENERATIONS.items()})

    directory = tmp_path_factory.mktemp("two-generations")
    planned = run_preflight("plan", "staging", "--json", "--stack-file", stack_copy(directory, "staging", edit))
    assert planned.returncode == 0, planned.stderr
    plan = directory / "plan.json"
    plan.write_text(planned.stdout)
    return plan


@pytest.mark.parametrize("generation", ["trn1", "trn2"])
def test_the_launcher_runs_each_generation_on_its_own_training_stack(two_generations_plan, generation):
    """The issue's done-when: `jobs.launch --outputs plan.json --node-group <group> --dryrun --json` prints, on the trn2
    group, a job of the native image on the group's 16 devices, 64 NeuronCores (LNC=2) and 16 EFA interfaces; on the
    trn1 group, today's job: the PyTorch/XLA image, 32 workers, 8 EFA interfaces, and its precompile."""
    plan = two_generations_plan
    outputs = json.loads(plan.read_text())["outputs"]
    (group,) = [g for g in outputs["trainiumNodeGroups"] if g["instanceType"].startswith(generation)]
    chosen = ("--node-group", group["name"])
    job = launch_json("--outputs", str(plan), *chosen, "--dryrun", "--json")
    assert_the_group_job(job, outputs, group, nodes=2)
    stack = versions.training_stack_of(generation)
    spec = catalog.INSTANCE_TYPES[group["instanceType"]]
    (container,) = pod_templates(job)[0]["spec"]["containers"]
    assert container["image"] == f"{outputs['ecrRepositoryUrl']}:{stack.image_tag}"
    cores = int(group["neuronCoresPerNode"])  # a plan carries numbers as floats
    assert f"--nproc_per_node={cores}" in container["command"]
    limits = container["resources"]["limits"]
    assert (limits[layout.NEURON_DEVICE_RESOURCE], limits[layout.EFA_RESOURCE]) == (
        str(spec.neuron_devices),
        str(spec.max_efa_interfaces),
    )
    if generation == "trn2":
        assert stack.backend.name == "neuron" and cores == spec.physical_neuron_cores // 2  # LNC=2
        assert spec.neuron_devices == 16 and spec.max_efa_interfaces == 16
    else:
        assert stack.backend.name == "xla" and cores == spec.physical_neuron_cores
        precompile = launch_json("--outputs", str(plan), *chosen, "--dryrun", "--json", "--precompile")
        assert_the_group_job(precompile, outputs, group, nodes=2, precompile=True)


def grace_of(job: dict) -> set[tuple[int, str]]:
    """Each pod's terminationGracePeriodSeconds and torchrun's shutdown timeout in its container."""
    return {
        (template["spec"]["terminationGracePeriodSeconds"], env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"])
        for template in pod_templates(job)
        for env in [{e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}]
    }


def test_torchtitan_on_the_trn2_group_runs_the_cited_configuration_with_a_grace_period_for_its_checkpoint(tmp_path):
    """The issue's done-when: `jobs.launch --dryrun --workload torchtitan` on the trn2 group of a two-generation stack
    prints a job of the native image, the tutorial's parallel configuration, DCP checkpoints on the shared volume and a
    grace period that writes the model's checkpoint at the file system's throughput."""
    path, outputs = outputs_file(tmp_path, **TWO_GENERATIONS)
    chosen = ("--outputs", str(path), "--workload", "torchtitan", "--node-group", "trn2-48xl", "--dryrun")
    job = launch_json(*chosen, *GIVEN_STEP, "--json")
    (group,) = [g for g in outputs["trainiumNodeGroups"] if g["name"] == "trn2-48xl"]
    recipe = titan_recipes.recipe_for(group["instanceType"])
    assert job["metadata"]["name"].startswith("qwen3train")
    annotations = job["metadata"]["annotations"]
    assert recipe.source in annotations[torchtitan_job.PARALLELISM_ANNOTATION]
    expected = grace_period.GracePeriod(recipe.checkpoint_bytes, outputs["fsxThroughputMBps"], float(GIVEN_STEP[1]))
    assert grace_of(job) == {(expected.seconds, str(expected.seconds))}
    assert annotations[platform_job.GRACE_PERIOD_ANNOTATION] == expected.describe()
    for template in pod_templates(job):
        (container,) = template["spec"]["containers"]
        command = container["command"]
        assert container["image"] == outputs["trainiumNodeGroupSoftware"]["trn2-48xl"]["trainingImage"]
        module = command[command.index("-m", len(AGENT_COMMAND)) + 1]  # torchrun's -m, after the entrypoint's
        assert module == torchtitan_job.MODULE and " ".join(recipe.model_options) in " ".join(command)
        dump_folder = torchtitan_job.last_value(command, "--dump_folder")
        assert dump_folder == f"{outputs['checkpointsPath']}/qwen3train/trn2-48xl" and "--checkpoint.enable" in command
        assert any(m["mountPath"] == outputs["fsxMountPath"] for m in container["volumeMounts"])
        assert_valid_pod(template)
    slower = launch_json(*chosen, "--step-seconds", "60", "--json")
    longer = grace_period.GracePeriod(recipe.checkpoint_bytes, outputs["fsxThroughputMBps"], 60.0)
    assert grace_of(slower) == {(longer.seconds, str(longer.seconds))} and longer.seconds > expected.seconds
    # a checkpoint larger than the recipe's that still drains within the Capacity Block's window
    write_window = grace_period.STEP_AND_WRITE_WINDOW_SECONDS - float(GIVEN_STEP[1])
    largest_fitting = write_window * outputs["fsxThroughputMBps"] * grace_period.MB
    larger_gib = (recipe.checkpoint_bytes + largest_fitting) / 2 / 1024**3
    bigger = launch_json(*chosen, *GIVEN_STEP, "--checkpoint-gib", f"{larger_gib:.1f}", "--json")
    ((bigger_seconds, _),) = grace_of(bigger)
    assert bigger_seconds > expected.seconds


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--node-group", "trn1-32xl", *GIVEN_STEP], registry.workloads()["torchtitan"].runs_on()),
        (["--node-group", "trn2-48xl", "--step-seconds", "0"], "--step-seconds 0.0: input should be greater than 0"),
        (["--node-group", "trn2-48xl", "--step-seconds", "inf"], "--step-seconds inf: input should be a finite number"),
    ],
)
def test_torchtitan_requests_the_launcher_cannot_size_or_place_are_one_line(tmp_path, args, words):
    path, _ = outputs_file(tmp_path, **TWO_GENERATIONS)
    result = run_module("jobs.launch", "--outputs", str(path), "--workload", "torchtitan", "--dryrun", *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and words in result.stderr, result.stderr


def test_bert_on_the_trn1_group_is_the_builders_job_with_a_grace_period_for_its_checkpoint(tmp_path):
    """BERT's job on the trn1 group of a two-generation stack: the job the builder makes (grace period included, so
    the rehearsal runs the same), its pods' grace period from BERT-large's checkpoint and the tutorial's measured step;
    a group without a measured step says it is left out."""
    path, outputs = outputs_file(tmp_path, **TWO_GENERATIONS)
    job = launch_json("--outputs", str(path), "--node-group", "trn1-32xl", "--dryrun", "--json")
    contract = PlatformContract.from_outputs(outputs)
    built = bert_job.volcano_job(contract, platform_job.JobRequest(name="berttrain", node_group="trn1-32xl"))
    expected = grace_period.job_grace_period("large", "trn1.32xlarge", 16, 32, outputs["fsxThroughputMBps"])
    assert grace_of(job) == {(expected.seconds, str(expected.seconds))} and expected.fits_capacity_block_window
    assert job["metadata"]["annotations"][platform_job.GRACE_PERIOD_ANNOTATION] == expected.describe()
    unique = built["metadata"]["name"]  # TorchX makes each job's name unique with a suffix of its own
    assert job == json.loads(json.dumps(built).replace(unique, job["metadata"]["name"]))
    unsourced = launch_json("--outputs", str(path), "--node-group", "trn2-48xl", "--dryrun", "--json")
    described = unsourced["metadata"]["annotations"][platform_job.GRACE_PERIOD_ANNOTATION]
    assert "not counted" in described and "--step-seconds" in described  # the step is left out, and said to be


def test_the_image_tag_option_replaces_the_tag_alone(tmp_path):
    path, outputs = outputs_file(tmp_path, **TWO_GENERATIONS)
    native = ("--node-group", "trn2-48xl", *GIVEN_STEP)
    job = launch_json("--outputs", str(path), *native, "--image-tag", "my-build-7", "--dryrun", "--json")
    (container,) = pod_templates(job)[0]["spec"]["containers"]
    assert container["image"] == f"{outputs['ecrRepositoryUrl']}:my-build-7"
    assert "TORCH_NEURONX_NEFF_CACHE_DIR" in {e["name"] for e in container["env"]}  # still the group's backend
    default = launch_json("--outputs", str(path), *native, "--dryrun", "--json")
    # another image is another compiler: another cache
    assert job["metadata"]["annotations"] != default["metadata"]["annotations"]


def test_a_platform_before_per_group_software_runs_the_xla_image_everywhere(tmp_path):
    """A 1.5.0 platform published no per-group software: its groups all ran the PyTorch/XLA image, and the job tools
    still read it."""

    def as_1_5_0(outputs):
        outputs["contractVersion"] = "1.5.0"
        del outputs["trainiumNodeGroupSoftware"], outputs["fsxThroughputMBps"]

    path, outputs = outputs_file(tmp_path, edit=as_1_5_0, **TWO_EFA_NODES)
    job = launch_json("--outputs", str(path), "--dryrun", "--json", "--precompile")
    (container,) = pod_templates(job)[0]["spec"]["containers"]
    xla = versions.TRAINING_STACKS["pytorch-xla-2.30"]
    assert container["image"] == f"{outputs['ecrRepositoryUrl']}:{xla.image_tag}"
    assert container["command"][0] == "neuron_parallel_compile"
    assert "terminationGracePeriodSeconds" not in pod_templates(job)[0]["spec"]  # no throughput published: the default
    assert "publishes no fsxThroughputMBps" in job["metadata"]["annotations"][platform_job.GRACE_PERIOD_ANNOTATION]
    checks = run_module("jobs.acceptance", "neuron-devices", "--outputs", str(path), "--dryrun", "--json")
    assert checks.returncode == 0, checks.stderr
    assert json.loads(checks.stdout)["spec"]["template"]["spec"]["containers"][0]["image"] == container["image"]


def test_a_backend_the_launcher_does_not_know_is_one_line(tmp_path):
    def newer(outputs):
        outputs["contractVersion"] = "1.7.0"
        for software in outputs["trainiumNodeGroupSoftware"].values():
            software["backend"] = "jax"

    path, _ = outputs_file(tmp_path, edit=newer, **TWO_EFA_NODES)
    result = run_module("jobs.launch", "--outputs", str(path), "--dryrun")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "'jax', which this launcher does not know" in result.stderr
