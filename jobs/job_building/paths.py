"""Paths of the job tools: where a run keeps its checkpoints on the shared volume (``run_directory``), the check of
every workload's directory options that they are on it (``on_shared_volume``), and the path
options of the tools that write (``--kubeconfig``, ``--workdir``): argparse types that refuse, in argparse's one line
naming the option, what cannot be written, and the creation of a working directory, where what the check could not
foresee (``/proc`` takes no new directory, even from root) is one line too."""

from __future__ import annotations

import os
from argparse import ArgumentTypeError
from pathlib import Path, PurePosixPath

from jobs.errors import LaunchError
from trainium_eks.contract import PlatformContract
from trainium_eks.contract_entries import NodeGroup

WRITABLE = os.W_OK | os.X_OK


def run_directory(contract: PlatformContract, job_name: str, group: NodeGroup) -> str:
    """The run's own checkpoint directory on the shared volume: the node group's name keeps a trn1 and a trn2 run of
    the same job name apart (``training.run_record`` refuses a resume by another world size, backend or model)."""
    return f"{contract.checkpoints_path}/{job_name}/{group.name}"


def on_shared_volume(contract: PlatformContract, flag: str, value: str, *, after_dashes: bool = False) -> None:
    """Refuse a directory option ``flag`` (given after ``--`` with ``after_dashes``) that is not on the shared volume:
    a pod's own disk goes with the pod."""
    path, mount = PurePosixPath(value), PurePosixPath(contract.fsx_mount_path)
    if ".." in path.parts or not path.is_relative_to(mount):
        raise LaunchError(
            f"{flag} {value}{' after --' if after_dashes else ''}: not on the shared volume; give a path under {mount}, "
            "where every pod mounts it (what a pod writes elsewhere is lost when it restarts)"
        )


def _existing_ancestor(path: Path) -> Path:
    for ancestor in path.absolute().parents:
        if ancestor.exists():
            return ancestor
    return Path("/")


def file_to_write(text: str) -> Path:
    """A regular file to create or replace, in an existing directory this user may write."""
    path = Path(text)
    try:
        if path.is_dir():
            raise ArgumentTypeError(f"{text}: is a directory; name a file")
        if path.exists() and not path.is_file():
            raise ArgumentTypeError(f"{text}: not a regular file; name a file")
        directory = path.absolute().parent
        if not directory.exists():
            raise ArgumentTypeError(f"{text}: its directory {directory} does not exist; create it, or name another file")
        if not directory.is_dir():
            raise ArgumentTypeError(f"{text}: {directory} is a file, not a directory; name another file")
        if not os.access(path if path.exists() else directory, os.W_OK if path.exists() else WRITABLE):
            raise ArgumentTypeError(f"{text}: permission denied; name a file you may write")
    except ValueError:  # a NUL character
        raise ArgumentTypeError(f"{text!r}: not a valid path") from None
    except OSError as error:
        raise ArgumentTypeError(f"{text}: cannot be checked ({error.strerror}); name another file") from None
    return path


def new_directory(text: str) -> Path:
    """A directory to create, or an empty one: a run's data and logs, which must not mix with an earlier run's."""
    path = Path(text)
    try:
        if path.exists():
            if not path.is_dir():
                raise ArgumentTypeError(f"{text}: is a file, not a directory; name a new or empty directory")
            if any(path.iterdir()):
                raise ArgumentTypeError(f"{text}: not empty (an earlier run's?); name a new or empty directory")
            if not os.access(path, WRITABLE):
                raise ArgumentTypeError(f"{text}: permission denied; name a directory you may write")
            return path
        ancestor = _existing_ancestor(path)
        if not ancestor.is_dir():
            raise ArgumentTypeError(f"{text}: {ancestor} is a file, not a directory; name a new or empty directory")
        if not os.access(ancestor, WRITABLE):
            raise ArgumentTypeError(f"{text}: permission denied in {ancestor}; name a directory you may write")
    except ValueError:
        raise ArgumentTypeError(f"{text!r}: not a valid path") from None
    except OSError as error:
        raise ArgumentTypeError(f"{text}: cannot be checked ({error.strerror}); name another directory") from None
    return path


def create_directory(path: Path, option: str) -> Path:
    """``path`` (checked by ``new_directory``) created with its parents."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise LaunchError(f"{option} {path}: cannot be created ({error.strerror}); name a directory you may write") from None
    return path
