"""The layers show in the imports, read from the source as Python reads it (every ``import``, ``TYPE_CHECKING`` ones
included): no module of the repository imports, directly or through others, a module that imports it back, and no
folder imports a command-line package of another folder (``jobs.launch``, ``jobs.rehearsal``, ``jobs.acceptance``,
``preflight``: the packages ``python -m`` runs), which a library of the other folder's would be instead."""

from __future__ import annotations

import ast
from pathlib import Path

from preflight import stackfile

PACKAGES = ("components", "jobs", "plan_graph", "policies", "preflight", "training", "trainium_eks")


def modules() -> dict[str, Path]:
    """Every module of the repository's packages, by its dotted name."""
    found = {}
    for package in PACKAGES:
        for path in (stackfile.REPO_ROOT / package).rglob("*.py"):
            parts = path.relative_to(stackfile.REPO_ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The repository's modules that module ``name`` imports (a name imported from a package, the module it is
    if it is one, else the package)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name and not name.startswith(candidate + "."):  # its own packages run first
                targets.add(candidate)
    return targets


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(sorted(members))
    return found


def test_no_module_imports_one_that_imports_it_back():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_folder_imports_a_command_line_package_of_another():
    known = modules()
    commands = {name for name, path in known.items() if path.name == "__init__.py" and (path.parent / "__main__.py").exists()}
    assert {"jobs.launch", "jobs.rehearsal", "jobs.acceptance", "preflight"} <= commands
    crossing = [
        (name, target)
        for name, targets in import_graph().items()
        for target in targets
        for command in commands
        if (target == command or target.startswith(command + ".")) and not (name == command or name.startswith(command + "."))
    ]
    assert crossing == []
