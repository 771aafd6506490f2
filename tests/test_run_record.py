"""A run's checkpoints are its own (`training/run_record.py`): the launcher gives each job and node group its own
directory, and the training script refuses, in one line and exit status 2, to resume from checkpoints another world
size, backend or model wrote. Real runs of `training.pretrain_bert`: in this process, and under torchrun."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
from job_outputs import TWO_GENERATIONS, launch_json, outputs_file, pod_templates

from jobs.rehearsal.local_agents import read_metrics
from preflight.stackfile import REPO_ROOT
from training import pretrain_bert, run_record

IDENTITY = run_record.RunIdentity(model="bert-tiny-0123456789ab", world_size=64, backend="xla")


def launched_output_dir(job: dict) -> str:
    (container,) = pod_templates(job)[0]["spec"]["containers"]
    command = container["command"]
    return command[command.index("--output-dir") + 1]


@pytest.mark.stacks
def test_a_trn2_bert_run_never_writes_where_a_trn1_run_of_the_same_name_does(tmp_path):
    """The issue's case: `--node-group trn1-32xl` and `--node-group trn2-48xl` of one job name (the default and a
    given one), and the trn1 group's precompile, each get a directory of their own under the stack's checkpoints."""
    path, outputs = outputs_file(tmp_path, **TWO_GENERATIONS)
    groups = [group["name"] for group in outputs["trainiumNodeGroups"]]
    assert len(groups) == 2
    for name in ((), ("--name", "nightly")):
        directories = [
            launched_output_dir(launch_json("--outputs", str(path), "--node-group", group, *name, "--dryrun", "--json"))
            for group in groups
        ]
        assert len(set(directories)) == len(groups), directories
        for directory, group in zip(directories, groups, strict=True):
            assert PurePosixPath(directory).is_relative_to(outputs["checkpointsPath"]) and group in directory
    (trn1,) = [g["name"] for g in outputs["trainiumNodeGroups"] if g["instanceType"].startswith("trn1")]
    training = launch_json("--outputs", str(path), "--node-group", trn1, "--dryrun", "--json")
    precompile = launch_json("--outputs", str(path), "--node-group", trn1, "--precompile", "--dryrun", "--json")
    assert launched_output_dir(precompile) != launched_output_dir(training)


def test_the_first_claim_records_the_run_and_the_same_run_claims_again(tmp_path):
    run_record.claim(tmp_path, IDENTITY)
    assert run_record.RunIdentity.model_validate_json((tmp_path / run_record.RECORD).read_text()) == IDENTITY
    run_record.claim(tmp_path, IDENTITY)  # a restart of the same run
    assert sorted(p.name for p in tmp_path.iterdir()) == [run_record.RECORD]  # no temporary file left


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"world_size": 128}, "world_size 64, not 128"),
        ({"backend": "neuron"}, "backend xla, not neuron"),
        ({"model": "bert-large-ba9876543210"}, "model bert-tiny-0123456789ab, not bert-large-ba9876543210"),
        ({"world_size": 128, "backend": "neuron"}, "world_size 64 and backend xla, not 128 and neuron"),
    ],
)
def test_another_run_is_refused_in_one_line_naming_what_differs_and_the_fix(tmp_path, change, named):
    run_record.claim(tmp_path, IDENTITY)
    with pytest.raises(run_record.ResumeRefused) as refused:
        run_record.claim(tmp_path, IDENTITY.model_copy(update=change))
    message = str(refused.value)
    assert "\n" not in message and named in message and str(tmp_path) in message
    assert "--name" in message and "remove the directory" in message
    assert run_record.RunIdentity.model_validate_json((tmp_path / run_record.RECORD).read_text()) == IDENTITY  # kept


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{not json", "not a run record"),
        ('{"model": "bert-tiny-0123456789ab", "backend": "cpu"}', "world_size"),
        ('{"model": "bert-tiny-0123456789ab", "world_size": "2", "backend": "cpu"}', "world_size"),
        ('{"model": "bert-tiny-0123456789ab", "world_size": 2, "backend": "cpu", "step": 3}', "step"),
        ("[]", "not a run record"),
        ("\0" * 10, "binary content"),
    ],
)
def test_a_malformed_record_is_refused_in_one_line(tmp_path, text, named):
    (tmp_path / run_record.RECORD).write_text(text)
    with pytest.raises(run_record.ResumeRefused) as refused:
        run_record.claim(tmp_path, IDENTITY)
    message = str(refused.value)
    assert "\n" not in message and named in message and str(tmp_path / run_record.RECORD) in message
    assert (tmp_path / run_record.RECORD).read_text() == text  # left for the user to look at


def options(shards: Path, output: Path, model: str = "tiny") -> list[str]:
    return ["--data-dir", str(shards), "--output-dir", str(output), "--model", model, "--device", "cpu",
            "--batch-size", "4", "--grad-accum-steps", "1", "--checkpoint-every", "2", "--max-steps", "4"]  # fmt: skip


def refused_run(argv: list[str], capsys) -> str:
    """The one line a refused run of the script prints, once it has exited with status 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        pretrain_bert.main(argv)
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    return line


def test_a_run_of_two_workers_does_not_resume_from_a_run_of_one(shards, tmp_path):
    """World size 1 trains and checkpoints; torchrun's two workers in the same directory stop before a step, with rank
    0's line in the log and exit status 2 (each restart would meet the same refusal: the job fails, it never trains)."""
    output = tmp_path / "run"
    pretrain_bert.main(options(shards, output))
    trained = read_metrics(output / "metrics.jsonl")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "--max-restarts", "0",
               "-m", "training.pretrain_bert", *options(shards, output)]  # fmt: skip
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    ran = subprocess.run(command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=300)
    assert ran.returncode != 0
    log = ran.stdout + ran.stderr
    refusals = [line for line in log.splitlines() if "holds the checkpoints of a run with" in line]
    assert len(refusals) == 1 and "world_size 1, not 2" in refusals[0], log[-3000:]
    assert re.search(r"Root Cause.*?exitcode  : 2 ", log, re.DOTALL), log[-3000:]  # a refusal, not a crash
    assert read_metrics(output / "metrics.jsonl") == trained  # no step trained on another run's state


def test_another_model_in_the_same_directory_is_refused_in_one_line(shards, tmp_path, capsys):
    output = tmp_path / "run"
    pretrain_bert.main(options(shards, output))
    line = refused_run(options(shards, output, model="large"), capsys)
    assert "model bert-tiny-" in line and ", not bert-large-" in line and "--name" in line


def test_a_malformed_run_record_stops_the_script_in_one_line(shards, tmp_path, capsys):
    output = tmp_path / "run"
    output.mkdir()
    (output / run_record.RECORD).write_text(json.dumps({"model": "bert-tiny", "world_size": 1}))
    line = refused_run(options(shards, output), capsys)
    assert line.startswith(f"{output / run_record.RECORD}: not a run record") and "backend" in line
    assert not list(output.glob("checkpoint-*"))
