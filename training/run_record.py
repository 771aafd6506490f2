"""Which run a checkpoint directory belongs to: ``run.json`` beside the checkpoints records the model, world size and
backend of the run that first wrote there, and a later run resumes from those checkpoints only if it is the same.

A checkpoint holds a step, optimizer state and a data position that mean something only to the run that wrote them:
another world size shards the data differently, another backend or model cannot take the state as it is. Without
the record a second run pointed at the same directory would silently carry on from the first's step.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError

from trainium_eks.files import UnreadableFile, read_text  # the training images ship trainium_eks/files.py

RECORD = "run.json"
MAX_RECORD_BYTES = 64 * 1024  # a record is a few lines; anything larger is not one
FIX = (
    "launch the run under another --name (each job name and node group has its own directory), "
    "or remove the directory to start afresh"
)


class RunIdentity(BaseModel):
    """What a run's checkpoints can be resumed by: the same model architecture, world size and backend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: StrictStr  # the architecture: a name plus a short digest of its configuration
    world_size: StrictInt
    backend: StrictStr


class ResumeRefused(RuntimeError):
    """A directory recorded for another run (or an unreadable record): the message is one line naming what differs,
    the recorded and the new value, and the fix."""


def _recorded(record: Path) -> RunIdentity | None:
    if not record.exists():
        return None
    try:
        text = read_text(record, MAX_RECORD_BYTES, FIX)
    except UnreadableFile as unreadable:
        raise ResumeRefused(str(unreadable)) from None
    try:
        return RunIdentity.model_validate_json(text)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise ResumeRefused(f"{record}: not a run record ({where + ': ' if where else ''}{problem['msg']}); {FIX}") from None


def claim(directory: Path, identity: RunIdentity) -> None:
    """Make ``directory`` ``identity``'s: record it in ``directory/run.json`` if no run is recorded there, or raise
    ``ResumeRefused`` if another is. Only rank 0 should call it (the others would race to write the same record);
    the job then stops on every rank alike. The record is written to a temporary file and renamed into place, so a
    worker killed mid-write leaves no half record."""
    record = directory / RECORD
    recorded = _recorded(record)
    if recorded is None:
        partial = directory / f".{RECORD}.{os.getpid()}.partial"
        partial.write_text(identity.model_dump_json(indent=2) + "\n", encoding="utf-8")
        partial.rename(record)
        return
    differs = [field for field in RunIdentity.model_fields if getattr(recorded, field) != getattr(identity, field)]
    if differs:
        old = " and ".join(f"{field} {getattr(recorded, field)}" for field in differs)
        new = " and ".join(str(getattr(identity, field)) for field in differs)
        raise ResumeRefused(
            f"{directory} holds the checkpoints of a run with {old}, not {new}: resuming would carry on from another "
            f"run's step, optimizer state and data position; {FIX}"
        )
