"""Bad input to `python -m preflight`: exit status 2 and one line on stderr naming the file, key or option and
the fix, never a traceback. Every case runs the real command line in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import FIXTURE_STACKS, MINIMAL_PLAN, check_report, one_line, run_preflight

from preflight import stackfile
from preflight.stackfile import REPO_ROOT
from trainium_eks import versions

BILLION_LAUGHS = "\n".join(
    ['a0: &a0 "lol"']
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    + ["config:", "  trainium-eks:owner: *a9"]
).encode()
# A release without a sourced driver; the native stack's release, whose driver the fixture's trn1 group's runtime does not
# initialise on; a trn2 group, which the fixture staging's region does not sell.
UNSOURCED = next(tag for tag, release in versions.NODE_IMAGE_RELEASES.items() if release.neuron_driver is None)
NATIVE_RELEASE = versions.training_stack_of("trn2").default_node_image_release
TRN2_GROUP = {"name": "trn2-48xl", "instanceType": "trn2.48xlarge", "provisioning": "karpenter", "maxSize": 2}


def group(config: dict) -> dict:
    """The fixture staging's one Trainium group."""
    return config["trainium-eks:trainiumNodeGroups"][0]


def run_with_unreadable(path: Path, *args: str) -> subprocess.CompletedProcess:
    """The command line with ``path`` unreadable: tests run as root, whom file modes do not stop."""
    program = (
        "import builtins, sys\n"
        "real_open = builtins.open\n"
        "def guarded_open(file, *args, **kwargs):\n"
        "    if str(file) == sys.argv[1]:\n"
        "        raise PermissionError(13, 'Permission denied', str(file))\n"
        "    return real_open(file, *args, **kwargs)\n"
        "builtins.open = guarded_open\n"
        "from preflight.cli import main\n"
        "sys.exit(main(sys.argv[2:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", program, str(path), *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )


def sparse_file(path: Path, size: int) -> Path:
    with open(path, "wb") as file:
        file.truncate(size)
    return path


# Stack file content -> words its error line must contain.
BAD_STACK_FILES = {
    "random bytes": (bytes(range(128, 256)) * 4, ["not UTF-8"]),
    "latin-1": ("config:\n  trainium-eks:owner: café\n".encode("latin-1"), ["not UTF-8", "save it as UTF-8"]),
    "utf-16 with bom": ("config:\n  trainium-eks:owner: ml\n".encode("utf-16"), ["UTF-16"]),
    "nul bytes": (b"config:\x00\x01\x02\n", ["binary content"]),
    "control character": (b"config:\n  trainium-eks:owner: a\x07b\n", ["character U+0007 at offset 31"]),
    "alias bomb": (BILLION_LAUGHS, ["line 1", "anchors and aliases"]),
    "deep flow nesting": (b"config:\n  trainium-eks:x: " + b"[" * 5000 + b"]" * 5000 + b"\n", ["line 2", "nested deeper"]),
    "deep block nesting": (
        ("config:\n" + "".join("  " * depth + f"k{depth}:\n" for depth in range(1, 100))).encode(),
        ["nested deeper than 64"],
    ),
    "integer key at the top": (b"1: x\n", ["key 1 at the top level", '"1"']),
    "boolean key under config": (b"config:\n  true: y\n", ["key true under 'config'"]),
    "null key under config": (b"config:\n  null: z\n", ["key null under 'config'"]),
    "mixed keys under config": (b"config:\n  trainium-eks:owner: ml\n  2: b\n", ["key 2 under 'config'"]),
    "integer key deeper": (b"config:\n  trainium-eks:labels:\n    7: x\n", ["key 7 under 'config.trainium-eks:labels'"]),
    "set value": (b"config:\n  trainium-eks:x: !!set {a, b}\n", ["'config.trainium-eks:x'", "set value"]),
    "number too long for Python": (b"config:\n  trainium-eks:x: " + b"9" * 5000 + b"\n", ["a value cannot be read", "quote it"]),
    "config 0": (b"config: 0\n", ["'config' must be a mapping"]),
    "a list": (b"- config\n", ["expected a mapping"]),
    "invalid YAML": (b"config:\n  a: [1,\n", ["invalid YAML at line"]),
}


@pytest.mark.parametrize(("content", "words"), BAD_STACK_FILES.values(), ids=BAD_STACK_FILES.keys())
def test_bad_stack_files(tmp_path, content, words):
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_bytes(content)
    one_line(run_preflight("plan", "staging", "--stack-file", str(path)), str(path), *words)


def test_an_alias_bomb_is_refused_before_anything_expands(tmp_path):
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_bytes(BILLION_LAUGHS)
    # Refused at the first anchor (line 1), before the composer builds any node that an alias would repeat.
    with pytest.raises(stackfile.StackFileError, match="line 1: YAML anchors and aliases"):
        stackfile.load("staging", path)


@pytest.mark.parametrize("command", [["plan", "staging"], ["check", "staging"], ["diff", "staging", "--against"]])
def test_unreadable_stack_files(tmp_path, command):
    path = tmp_path / "Pulumi.staging.yaml"
    path.write_text((FIXTURE_STACKS / "Pulumi.staging.yaml").read_text())
    args = [*command, str(path)] if command[0] == "diff" else [*command, "--stack-file", str(path)]
    one_line(run_with_unreadable(path, *args), str(path), "permission denied")


def test_a_stack_file_that_is_a_directory_missing_or_too_large(tmp_path):
    one_line(run_preflight("plan", "staging", "--stack-file", str(tmp_path)), str(tmp_path), "is a directory")
    missing = tmp_path / "missing.yaml"
    one_line(run_preflight("plan", "staging", "--stack-file", str(missing)), str(missing), "not found")
    large = sparse_file(tmp_path / "large.yaml", stackfile.MAX_STACK_FILE_BYTES + 1)
    one_line(run_preflight("plan", "staging", "--stack-file", str(large)), str(large), "larger than 1 MiB")


def test_stack_names_never_leave_the_stack_directory(tmp_path):
    one_line(run_preflight("plan", "../stacks/Pulumi.dev"), "'../stacks/Pulumi.dev'", "not a stack name")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(MINIMAL_PLAN))
    one_line(run_preflight("check", "../config/dev", "--graph", str(plan)), "'../config/dev'", "not a stack name")


@pytest.mark.parametrize(
    ("project", "words"),
    [
        ("name: 0\n", ["'name' must be"]),
        ("name: p\nstackConfigDir: [stacks]\n", ["'stackConfigDir' must be"]),
        ("name: p\nconfig: [a]\n", ["'config' must be a mapping"]),
        ("name: p\nconfig:\n  1: {default: x}\n", ["key 1 under 'config'"]),
        ("name: &n p\nruntime: *n\n", ["anchors and aliases"]),
        # What the Pulumi CLI refuses in a declaration before any program runs.
        ("name: p\nconfig:\n  xs: {type: array}\n", ["'xs' declares an array but no 'items'"]),
        ("name: p\nconfig:\n  n: {type: integer, default: many}\n", ["default of config key 'n'", "'integer'"]),
        ("name: p\nconfig:\n  qs: {type: array, items: {type: object}, default: [q]}\n", ["'array<object>'"]),
        ("name: p\nconfig:\n  n: {type: number}\n", ["config key 'n': type"]),
        ("name: p\nconfig:\n  n: {type: string, defualt: x}\n", ["config key 'n': defualt"]),
    ],
)
def test_bad_project_files(tmp_path, project, words):
    (tmp_path / "Pulumi.yaml").write_text(project)
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    with pytest.raises(stackfile.StackFileError) as raised:
        stackfile.load("dev", root=tmp_path)
    message = str(raised.value)
    assert message.startswith(f"{tmp_path / 'Pulumi.yaml'}: ") and len(message.splitlines()) == 1
    for word in words:
        assert word in message


def plan_with(edit) -> bytes:
    plan = json.loads(json.dumps(MINIMAL_PLAN))
    edit(plan)
    return json.dumps(plan).encode()


def _set(path: tuple, value):
    def edit(plan):
        target = plan
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return edit


def _drop(key: str):
    return lambda plan: plan.pop(key)


# Plan file content -> words its error line must contain.
BAD_PLAN_FILES = {
    "invalid JSON": (b'{"project": ', ["$: invalid JSON"]),
    "not an object": (b"[1, 2]", ["$: input should be an object"]),
    "missing outputs": (plan_with(_drop("outputs")), ["$.outputs: missing"]),
    "missing resources": (plan_with(_drop("resources")), ["$.resources: missing"]),
    "unknown key": (plan_with(_set(("violations",), [])), ["$.violations: unknown key"]),
    "resource not an object": (plan_with(_set(("resources", 0), "x")), ["$.resources[0]:"]),
    "resource missing a key": (plan_with(lambda p: p["resources"][0].pop("inputs")), ["$.resources[0].inputs: missing"]),
    "string for a boolean": (plan_with(_set(("resources", 0, "custom"), "yes")), ["$.resources[0].custom"]),
    "number for a boolean": (plan_with(_set(("resources", 0, "protect"), 1)), ["$.resources[0].protect"]),
    "inputs a list": (plan_with(_set(("resources", 0, "inputs"), [])), ["$.resources[0].inputs"]),
    "dependencies of numbers": (
        plan_with(_set(("resources", 0, "dependencies"), [1])),
        ["$.resources[0].dependencies[0]"],
    ),
    "duplicate urn": (plan_with(lambda p: p["resources"].append(p["resources"][0])), ["$.resources", "two resources"]),
    "stack as a path": (plan_with(_set(("stack",), "../../tmp/x")), ["$.stack"]),
    "deep nesting": (
        plan_with(_set(("outputs", "x"), "DEEP")).replace(b'"DEEP"', b"[" * 5000 + b"]" * 5000),
        ["$: invalid JSON", "recursion limit"],
    ),
    "number out of range": (plan_with(_set(("outputs", "x"), 7)).replace(b"7}", b"9" * 5000 + b"}"), ["$: invalid JSON"]),
    # a Python integer, but no float: the engine carries every number to the policies as one
    "integer beyond a float": (
        plan_with(_set(("resources", 0, "inputs"), {"x": [7]})).replace(b"[7]", b"[" + b"9" * 400 + b"]"),
        ["$.resources[0].inputs", "x[0]", "beyond its range"],
    ),
    "infinity": (plan_with(_set(("outputs", "x"), 7)).replace(b"7}", b"Infinity}"), ["$.outputs", "x: a number"]),
    "binary": (bytes(range(256)), ["binary content"]),
    "utf-16": (json.dumps(MINIMAL_PLAN).encode("utf-16"), ["UTF-16"]),
    "latin-1": (json.dumps({**MINIMAL_PLAN, "project": "café"}, ensure_ascii=False).encode("latin-1"), ["not UTF-8"]),
}


@pytest.mark.parametrize(("content", "words"), BAD_PLAN_FILES.values(), ids=BAD_PLAN_FILES.keys())
def test_bad_plan_files(tmp_path, content, words):
    path = tmp_path / "plan.json"
    path.write_bytes(content)
    line = one_line(run_preflight("check", "--graph", str(path)), str(path), *words)
    assert line.endswith("`python -m preflight plan STACK --json`") or "UTF" in line


def test_the_minimal_plan_of_these_cases_is_valid(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(MINIMAL_PLAN))
    assert check_report(run_preflight("check", "--graph", str(path), "--json"))["stack"] == "staging"


def test_a_plan_is_checked_only_as_its_own_stack(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(MINIMAL_PLAN))
    line = one_line(run_preflight("check", "prod", "--graph", str(path)), str(path), "a plan of stack 'staging', not 'prod'")
    assert "leave STACK out" in line
    assert check_report(run_preflight("check", "staging", "--graph", str(path), "--json"))["stack"] == "staging"


def test_plan_files_that_cannot_be_read(tmp_path):
    one_line(run_preflight("check", "--graph", str(tmp_path)), str(tmp_path), "is a directory")
    missing = tmp_path / "missing.json"
    one_line(run_preflight("check", "--graph", str(missing)), str(missing), "not found")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(MINIMAL_PLAN))
    one_line(run_with_unreadable(path, "check", "--graph", str(path)), str(path), "permission denied")


@pytest.mark.parametrize("ref", ["-x", "--output=OUT", "HEAD --help", "HEAD:stacks", "main..HEAD", "HEAD\n-x", ""])
def test_git_refs_never_reach_git_as_options(tmp_path, ref):
    ref = ref.replace("OUT", str(tmp_path / "written-by-git"))
    line = one_line(run_preflight("diff", "dev", f"--against={ref}"), "--against", "not a stack file, nor a git ref")
    assert "pass a stack file, branch, tag or commit" in line
    assert not (tmp_path / "written-by-git").exists()


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["nope"],
        ["plan"],
        ["plan", "dev", "--bogus"],
        ["plan", "dev", "extra"],
        ["plan", "dev", "--preview=yes"],
        ["check"],
        ["check", "dev", "--all"],
        ["check", "--graph"],
        ["check", "dev", "prod", "--graph", "plan.json"],
        ["check", "dev", "prod", "--stack-file", "x.yaml"],
        ["diff"],
        ["diff", "dev"],
        ["diff", "dev", "--against"],
        ["diff", "dev", "--against", "HEAD", "--bogus"],
        ["plan", "no-such-stack"],
    ],
)
def test_usage_errors(args):
    one_line(run_preflight(*args))


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda c: c.update({"trainium-eks:natGatways": "single"}), "unknown key"),
        (lambda c: c["trainium-eks:trainiumNodeGroups"][0].update(desiredSize="two"), "expected an integer"),
        (lambda c: c["trainium-eks:trainiumNodeGroups"][0].update(desiredSize=9), "on an elastic (karpenter) group"),
        (lambda c: group(c).update(nodeImageRelease="latest"), "[0].nodeImageRelease: 'latest' floats"),
        (lambda c: group(c).update(nodeImageRelease=UNSOURCED), "no source states"),
        (lambda c: group(c).update(nodeImageRelease=NATIVE_RELEASE), "does not initialise"),
        (lambda c: c["trainium-eks:trainiumNodeGroups"].append(TRN2_GROUP), "[1].instanceType: trn2.48xlarge is not offered"),
        (lambda c: c.update({"trainium-eks:nodeImageRelease": "v20260625"}), "nodeImageRelease: moved to each Trainium node"),
    ],
    ids=[
        "typo",
        "wrong-type",
        "size-on-a-pool",
        "latest-image",
        "unsourced-driver",
        "driver-too-new",
        "trn2-not-sold",
        "retired-key",
    ],
)
def test_cli_exits_2_with_one_line_and_no_traceback(tmp_path, edit, words):
    document = yaml.safe_load((FIXTURE_STACKS / "Pulumi.staging.yaml").read_text())  # an elastic group, as the cases know
    edit(document["config"])
    stack_file = tmp_path / "Pulumi.staging.yaml"
    stack_file.write_text(yaml.safe_dump(document))
    result = run_preflight("plan", "staging", "--stack-file", str(stack_file))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["plan", "nosuchstack"], f"known stacks: {', '.join(stackfile.stack_names())}"),  # whatever stacks/ holds
        (["plan"], "required: stack"),
        (["explode"], "invalid choice"),
    ],
)
def test_cli_usage_errors_exit_2_with_one_line(args, words):
    result = run_preflight(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr
