"""The container images `make image` builds and pushes: each training stack's (trainium_eks/versions.py
TRAINING_STACKS: its Dockerfile, target and tag) and the data shell.

``python -m trainium_eks.images`` prints one line per image, ``<dockerfile> <target> <tag> [NAME=value ...]``, for the
Makefile to build from (each NAME=value a ``--build-arg``): the tags and build arguments are written once, in
versions.py. An argument versions.py leaves unset is not passed, so the Dockerfile's own check refuses the build.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainium_eks import versions

# The shell that loads the dataset onto the shared volume (README, "Run a training job"). One is enough: only the
# XLA image's Dockerfile has it, and its tag follows that image's version.
DATA_SHELL_DOCKERFILE = "training/Dockerfile"
DATA_SHELL_TARGET = "data-shell"


@dataclass(frozen=True)
class ImageBuild:
    dockerfile: str  # from the repository root, the build context
    target: str
    tag: str
    build_args: tuple[str, ...] = ()  # NAME=value


def data_shell_tag() -> str:
    """``data-shell-<version>``, from the ``<name>-<version>`` tag of the stack built from the shell's Dockerfile."""
    (stack,) = [s for s in versions.TRAINING_STACKS.values() if s.dockerfile == DATA_SHELL_DOCKERFILE]
    return f"data-shell-{stack.image_tag.rsplit('-', 1)[-1]}"


def image_builds() -> tuple[ImageBuild, ...]:
    """Every image of the platform's jobs: the training stacks' first, then the data shell."""
    stacks = tuple(
        ImageBuild(s.dockerfile, s.target, s.image_tag, tuple(f"{k}={v}" for k, v in s.build_args if v is not None))
        for s in versions.TRAINING_STACKS.values()
    )
    return (*stacks, ImageBuild(DATA_SHELL_DOCKERFILE, DATA_SHELL_TARGET, data_shell_tag()))


def main() -> None:
    for build in image_builds():
        print(build.dockerfile, build.target, build.tag, *build.build_args)


if __name__ == "__main__":
    main()
