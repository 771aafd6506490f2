"""One training script for every backend (`training/backend.py`): what each backend maps to, that `--device auto` takes
what the image provides, that a named backend the image lacks is refused in one line by every training program, and
that every job the launcher builds names its group's backend to the script. Only the CPU runs here: the
XLA and native paths are checked by what they would call, not run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from job_outputs import NO_EFA, TWO_GENERATIONS, pod_templates, stack_outputs
from torch._dynamo.exc import InvalidBackend

from jobs import acceptance
from jobs.job_building.platform_job import JobRequest
from jobs.job_building.torchx_component import AGENT_COMMAND
from jobs.workloads import bert_job, registry, torchtitan_job
from preflight.stackfile import REPO_ROOT
from training import backend as backends
from training import options
from trainium_eks import backends as records
from trainium_eks.contract import PlatformContract

DEVICE = next(option for option in options.OPTIONS if option.flag == "--device")
ABSENT = [name for name, backend in backends.BACKENDS.items() if not backend.present()]
TRAINING_ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}  # the image's PYTHONPATH: its code, not the current directory


def test_every_backend_is_a_device_choice_and_auto_is_the_default():
    assert set(DEVICE.choices) == {"auto", *backends.BACKENDS} and DEVICE.default == "auto"


def test_each_backend_maps_to_its_process_group_and_gradient_path():
    xla, neuron, cpu = (backends.BACKENDS[name] for name in ("xla", "neuron", "cpu"))
    # PyTorch/XLA: xm.optimizer_step all-reduces the gradients, bf16 comes from XLA_DOWNCAST_BF16, nothing compiles
    assert (xla.process_group, xla.ddp, xla.autocast, xla.compiler) == ("xla", False, False, None)
    # TorchNeuron: its "neuron" process group under DDP, torch.autocast on the device, torch.compile(backend="neuron")
    assert (neuron.process_group, neuron.ddp, neuron.autocast, neuron.compiler) == ("neuron", True, True, "neuron")
    assert (cpu.process_group, cpu.ddp, cpu.autocast, cpu.compiler) == ("gloo", True, True, None)


def test_auto_takes_the_first_backend_the_image_provides():
    if backends.BACKENDS["xla"].present() or backends.BACKENDS["neuron"].present():
        pytest.skip("this machine has an accelerator backend")
    chosen = backends.select("auto")
    assert chosen is backends.BACKENDS["cpu"] and chosen.device() == torch.device("cpu")


def test_the_native_backend_compiles_with_torch_compiles_neuron_backend():
    """Here torch.compile knows no "neuron" backend (TorchNeuron registers it), so it refuses the name: proof that the
    model goes to torch.compile(backend="neuron"). The CPU's model is not compiled."""
    module = torch.nn.Linear(2, 2)
    if backends.BACKENDS["neuron"].present():
        pytest.skip("TorchNeuron is installed: the neuron compiler exists")
    with pytest.raises(InvalidBackend, match="neuron"):
        backends.BACKENDS["neuron"].compile(module)
    assert backends.BACKENDS["cpu"].compile(module) is module


@pytest.mark.parametrize("device", ABSENT)
def test_a_backend_the_image_lacks_is_refused_in_one_line_before_training(device, tmp_path):
    command = [sys.executable, "-m", "training.pretrain_bert", "--data-dir", str(tmp_path / "none"),
               "--output-dir", str(tmp_path / "out"), "--device", device]  # fmt: skip
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    line = result.stderr.strip()
    assert "\n" not in line and line.startswith(f"--device {device} needs ") and "--device cpu" in line
    assert backends.BACKENDS[device].provided_by in line
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_bf16_autocasts_on_the_cpu_and_not_when_off():
    cpu = backends.BACKENDS["cpu"]
    with cpu.autocast_context(bf16=True):
        assert torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.bfloat16
    with cpu.autocast_context(bf16=False):
        assert torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.float32


# Every training program the launcher's jobs run, and the backends it takes as --device: a workload's, as its
# declaration gives them (``jobs.workloads.registry``); an acceptance check's, as the backends' records do.
PROGRAMS = {
    "training.pretrain_bert": registry.workloads()["bert"].backends,
    "training.titan_train": registry.workloads()["torchtitan"].backends,
    "training.allreduce_check": records.running(records.EFA_ALLREDUCE),
    "training.smoke_step": records.running(records.TRAIN_STEP),
    "training.collective_bandwidth": records.running(records.COLLECTIVE_BANDWIDTH),
}


@pytest.mark.parametrize(
    ("module", "device"),
    [(module, device) for module, runs_on in PROGRAMS.items() for device in ABSENT if device in runs_on],
)
def test_every_training_program_refuses_a_backend_its_image_lacks_in_one_line(module, device, tmp_path):
    required = {
        "training.pretrain_bert": ["--data-dir", str(tmp_path / "none"), "--output-dir", str(tmp_path / "out")],
        "training.collective_bandwidth": ["--line-rate-gbps", "100", "--min-fraction", "0.5"],
    }.get(module, [])
    command = [sys.executable, "-m", module, "--device", device, *required]
    result = subprocess.run(command, cwd=tmp_path, env=TRAINING_ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"--device {device} needs {backends.BACKENDS[device].provided_by}" in line and "--device cpu" in line


@pytest.mark.stacks
@pytest.mark.parametrize("stack", [{}, NO_EFA, TWO_GENERATIONS], ids=["staging", "no-efa", "two-generations"])
def test_every_job_names_its_groups_backend_to_the_script(stack):
    """Whatever it runs (BERT, TorchTitan where the backend trains it, the acceptance checks that run torch), a job
    passes ``--device`` with its node group's backend, right after the module, so the script computes on it."""
    contract = PlatformContract.from_outputs(json.loads(stack_outputs("staging", **stack)))
    for group in contract.node_groups:
        backend = records.BACKENDS[contract.software(group).backend]
        request = JobRequest(name="berttrain", node_group=group.name, nodes=1, step_seconds=1.0)
        jobs = [bert_job.volcano_job(contract, request)]
        titan = registry.workloads()["torchtitan"]
        if contract.software(group).generation in titan.generations().get(backend.name, ()):
            jobs.append(torchtitan_job.titan_job(contract, request))
        jobs.append(acceptance.train_step(contract, group))
        for job in jobs:
            for template in pod_templates(job):
                command = template["spec"]["containers"][0]["command"]
                module = command.index("-m", len(AGENT_COMMAND)) + 1  # torchrun's, after the entrypoint's
                assert command[module + 1 : module + 3] == ["--device", backend.name], (group.name, command[module])
