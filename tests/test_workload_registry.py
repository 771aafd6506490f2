"""One place to add a workload (``jobs.workloads.registry``): a workload declared in one new module, with its line in
the registry, is in ``jobs.launch``'s choices and help and launches, is in the rehearsal's choices, and its default job
is in the drains ``preflight plan`` judges on a Capacity Block group, with nothing else edited. Every registered
workload's references resolve, and the training scripts take as ``--device`` the backends their workloads declare."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from support import evaluate, one_group

from jobs import launch, rehearsal
from jobs.rehearsal.cpu_workloads import RehearsedWorkload
from jobs.rehearsal.report import RehearsalRequest
from jobs.workloads import registry
from preflight import analysis
from training import options
from trainium_eks import backends

# A user's new workload: BERT pretraining under its own name, with its own default job and checkpoint size, run by
# BERT's planner and rehearsed by BERT's CPU recipe (both named, not imported: the module stays light).
TOY_MODULE = """
from jobs.job_building.grace_period import GracePeriod
from jobs.workloads.registry import DefaultJob, Workload

CHECKPOINT_BYTES = 3 * 1024**3


def default_job(instance_type, throughput_mb_s):
    return DefaultJob("toy", "toytrain", "toy-bert", GracePeriod(CHECKPOINT_BYTES, throughput_mb_s, None))


WORKLOAD = Workload(
    name="toy",
    summary="a toy BERT of the user's (any group)",
    backends=("xla", "neuron", "cpu"),
    planner="jobs.workloads.bert_job:bert_run",
    checkpoint_options=("--checkpoint-every", "--steps-this-run"),
    default_name="toytrain",
    default_job=default_job,
    rehearsal="jobs.rehearsal.cpu_workloads:BERT_ON_CPU",
)
"""


@pytest.fixture
def toy_registered(tmp_path, monkeypatch):
    """The toy module written to its own file, imported by name, and its line added to the registry."""
    path = tmp_path / "toy_workload.py"
    path.write_text(TOY_MODULE)
    spec = importlib.util.spec_from_file_location("toy_workload", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "toy_workload", module)
    monkeypatch.setattr(registry, "WORKLOAD_MODULES", (*registry.WORKLOAD_MODULES, "toy_workload"))
    return module


def help_of(main, capsys) -> str:
    with pytest.raises(SystemExit):
        main(["--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps it to the terminal


def test_a_new_workload_module_is_in_the_launchers_help_and_launches(toy_registered, tmp_path, capsys):
    shown = help_of(launch.main, capsys)
    assert "--workload {bert,torchtitan,toy}" in shown
    assert f"toy: {toy_registered.WORKLOAD.summary}" in shown and "toytrain with --workload toy" in shown
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(evaluate("staging", fixture=True).outputs))
    assert launch.main(["--outputs", str(outputs), "--workload", "toy", "--dryrun", "--json"]) == 0
    job = json.loads(capsys.readouterr().out)
    assert job["metadata"]["name"].startswith("toytrain-")


def test_a_new_workload_module_is_in_the_rehearsals_choices(toy_registered, capsys):
    assert "--workload {bert,torchtitan,toy}" in help_of(rehearsal.main, capsys)
    assert RehearsalRequest(workload="toy").cpu_recipe().job_name == "berttrain"


def test_a_new_workload_modules_default_job_is_judged_on_a_capacity_block_group(toy_registered):
    plan = evaluate("staging", fixture=True, **one_group("trn2.48xlarge"))
    ((group),) = analysis.annotate(plan.to_json())["capacityBlockDrains"]["groups"]
    by_workload = {drain["workload"]: drain for drain in group["drains"]}
    assert set(by_workload) == {"bert", "torchtitan", "toy"}
    assert by_workload["toy"]["checkpointBytes"] == toy_registered.CHECKPOINT_BYTES


def test_a_workload_declared_twice_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(registry, "WORKLOAD_MODULES", (*registry.WORKLOAD_MODULES, registry.WORKLOAD_MODULES[0]))
    with pytest.raises(ValueError, match=f"{registry.WORKLOAD_MODULES[0]}: workload bert is declared twice"):
        registry.workloads()


def test_every_registered_workloads_references_resolve():
    for name, workload in registry.workloads().items():
        assert callable(registry.resolve(workload.planner)), name
        assert isinstance(registry.resolve(workload.rehearsal), RehearsedWorkload), name
        assert set(workload.backends) <= set(backends.BACKENDS), name


def test_the_bert_script_takes_the_backends_its_workload_declares():
    (device,) = [option for option in options.OPTIONS if option.flag == "--device"]
    assert device.choices == ("auto", *registry.workloads()["bert"].backends)


UNDECLARED_BY_TORCHTITAN = [name for name in backends.BACKENDS if name not in registry.workloads()["torchtitan"].backends]


@pytest.mark.parametrize("device", UNDECLARED_BY_TORCHTITAN)
def test_the_torchtitan_script_refuses_a_backend_its_workload_does_not_declare(device):
    result = subprocess.run(
        [sys.executable, "-m", "training.titan_train", "--device", device], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 2 and f"argument --device: invalid choice: '{device}'" in result.stderr
