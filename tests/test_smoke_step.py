"""The one-step training check (`jobs.acceptance train-step`), run here for real: torchrun, two workers, gloo."""

from __future__ import annotations

import subprocess
import sys

from preflight.stackfile import REPO_ROOT
from training import checkpoint, smoke_step


def test_one_training_step_trains_and_checkpoints_on_two_workers(tmp_path):
    workdir = tmp_path / "one-step"
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
        + ["-m", "training.smoke_step", "--device", "cpu", "--bf16", "--workdir", str(workdir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert "one BERT training step, 2 workers on the cpu backend: loss " in result.stdout
    saved = checkpoint.latest(workdir / "output")
    assert saved is not None and saved.name.endswith("1")  # the step's own checkpoint, written by rank 0


def test_a_workdir_holding_a_checkpoint_is_refused(tmp_path, capsys):
    """A step resumed from an earlier checkpoint would train nothing: the check wants a fresh directory."""
    assert smoke_step.main(["--device", "cpu", "--workdir", str(tmp_path)]) == 0  # one process, no process group
    capsys.readouterr()
    assert smoke_step.main(["--device", "cpu", "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a checkpoint" in err, err
