"""The repository's Dockerfiles as data, for the tests that read them (Docker does not run here): instructions with
comments dropped and continuation lines joined, the stages, the base images, and what the RUN lines install with
apt-get and pip, pip's requirements files followed through COPY and their ``-r`` includes."""

from __future__ import annotations

import posixpath
import re
import shlex
from pathlib import Path

from preflight.stackfile import REPO_ROOT

# pip options followed by a value, which is not a package
PIP_OPTIONS_WITH_VALUE = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url"}


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order. Docker drops comment lines, even inside a continued instruction."""
    lines = [line for line in (REPO_ROOT / dockerfile).read_text().splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    parsed = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, arguments = line.strip().partition(" ")
            parsed.append((keyword.upper(), arguments.strip()))
    return parsed


def stages(dockerfile: str) -> dict[str, list[tuple[str, str]]]:
    """Each named stage's instructions after its FROM."""
    named: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for keyword, arguments in instructions(dockerfile):
        if keyword == "FROM":
            current = []
            words = arguments.split()
            if len(words) == 3 and words[1].upper() == "AS":
                named[words[2]] = current
        else:
            current.append((keyword, arguments))
    return named


def base_images(dockerfile: str) -> list[str]:
    """The images the FROM lines pull, leaving out the ones that build on an earlier stage."""
    earlier: set[str] = set()
    bases = []
    for keyword, arguments in instructions(dockerfile):
        if keyword == "FROM":
            image, *alias = arguments.split()
            if image not in earlier:
                bases.append(image)
            earlier.update(alias[1:])
    return bases


def commands(dockerfile: str) -> list[list[str]]:
    """The simple commands of every RUN line, as shell words."""
    return [shlex.split(part) for run in runs(dockerfile) for part in re.split(r"&&|\|\||;|\|", run) if part.strip()]


def apt_packages(dockerfile: str) -> list[str]:
    """What ``apt-get install`` installs, ``name`` or ``name=version``."""
    packages = []
    for words in commands(dockerfile):
        if "apt-get" in words and "install" in words:
            packages += [word for word in words[words.index("install") + 1 :] if not word.startswith("-")]
    return packages


def build_args(dockerfile: str) -> dict[str, str | None]:
    """Each ARG the Dockerfile declares, with its default (None: none, the build must be given it)."""
    declared = {}
    for keyword, arguments in instructions(dockerfile):
        if keyword == "ARG":
            name, has_default, default = arguments.partition("=")
            declared[name] = default if has_default else None
    return declared


def runs(dockerfile: str) -> list[str]:
    """The RUN lines, comments dropped and continuations joined, as the shell gets them."""
    return [arguments for keyword, arguments in instructions(dockerfile) if keyword == "RUN"]


def unpinned_apt_packages(dockerfile: str) -> list[str]:
    """What ``apt-get install`` takes at whatever version an archive holds on build day: a package without ``=version``,
    unless Ubuntu's sources were fixed at a snapshot (a ``Snapshot:`` field written into ubuntu.sources) and no other
    apt source had been added yet, which could serve it instead."""
    snapshot, other_source, unpinned = False, False, []
    for words in commands(dockerfile):
        if words[:2] == ["sed", "-i"] and words[-1].endswith("/ubuntu.sources") and "Snapshot: ${UBUNTU_SNAPSHOT}" in words[2]:
            snapshot = True
        if ">" in words and words[words.index(">") + 1].startswith("/etc/apt/sources.list.d/"):
            other_source = True
        if "apt-get" in words and "install" in words:
            packages = [word for word in words[words.index("install") + 1 :] if not word.startswith("-")]
            unpinned += [p for p in packages if "=" not in p and (other_source or not snapshot)]
    return unpinned


def pip_requirements(dockerfile: str) -> list[str]:
    """Every requirement ``pip install`` is given: on its command line, or in a requirements file the Dockerfile
    copies into the image (and the files that one includes)."""
    copied = copied_files(dockerfile)
    requirements = []
    for words in commands(dockerfile):
        if "pip" not in words or "install" not in words:
            continue
        arguments = words[words.index("install") + 1 :]
        for previous, word in zip(["", *arguments[:-1]], arguments, strict=True):
            if previous in ("-r", "--requirement"):
                # a file the image fetched (not copied from the build context) stays as it is named
                requirements += requirement_lines(copied[word]) if word in copied else [f"{previous} {word}"]
            elif previous in ("-e", "--editable"):
                requirements.append(f"{previous} {word}")
            elif previous not in PIP_OPTIONS_WITH_VALUE and not word.startswith("-"):
                requirements.append(word)
    return requirements


def copied_files(dockerfile: str) -> dict[str, Path]:
    """Where COPY puts each file of the build context (the repository root) in the image."""
    copied = {}
    for keyword, arguments in instructions(dockerfile):
        if keyword == "COPY":
            *sources, destination = [word for word in shlex.split(arguments) if not word.startswith("--")]
            for source in sources:
                inside = posixpath.join(destination, posixpath.basename(source)) if destination.endswith("/") else destination
                copied[inside] = REPO_ROOT / source
    return copied


def requirement_lines(path: Path) -> list[str]:
    """The requirements of a pip requirements file, comments dropped, its ``-r`` includes followed."""
    lines = []
    for raw in path.read_text().splitlines():
        line = re.sub(r"(^|\s)#.*", "", raw).strip()
        if line.startswith(("-r ", "--requirement ")):
            lines += requirement_lines(path.parent / line.split(None, 1)[1])
        elif line:
            lines.append(line)
    return lines
