"""checkov's Kubernetes and Dockerfile checks pass on every stack's Kubernetes objects and on every training stack's
Dockerfile, with only the skips below, each a check that does not apply to this platform and why.

checkov runs once per session from .venv-checkov (built by `make test`; its pins conflict with the project's),
offline: no guideline download, no update check.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from support import STACKS, cached_plan, evaluate, kubernetes_objects, manifest

from jobs import launch
from jobs.job_building import training_security
from jobs.workloads import bert_job
from preflight.stackfile import REPO_ROOT
from trainium_eks import versions
from trainium_eks.contract import PlatformContract

pytestmark = pytest.mark.stacks

TRAINING_DOCKERFILES = sorted({stack.dockerfile for stack in versions.TRAINING_STACKS.values()})

SKIPS = {
    "CKV_K8S_43": "etcd's and TensorBoard's digests cannot be read here (no registry) nor from an upstream source: exact tags",
    "CKV_K8S_15": "images are pinned by exact tag; Always would make every etcd or TensorBoard restart need the registry",
    "CKV_DOCKER_2": "the kubelet ignores an image's HEALTHCHECK and runs the pod's probes; a training job serves nothing",
    "CKV_DOCKER_3": "the training images run as root: the FSx volume they write is root-owned (training/Dockerfile says why)",
}
# What checkov finds in the training and precompile pods (jobs.launch on every stack), each for its reason.
TRAINING_POD_FINDINGS = {
    "CKV_K8S_23": training_security.LEFT_OUT["runAsNonRoot"],
    "CKV_K8S_40": training_security.LEFT_OUT["runAsUser"],
    "CKV_K8S_22": "the Neuron compiler and runtime write working files under the image's filesystem",
    "CKV_K8S_8": "a training worker serves nothing to probe; torchrun restarts a failed worker, Volcano a failed pod",
    "CKV_K8S_9": "a training worker serves nothing to probe; torchrun restarts a failed worker, Volcano a failed pod",
}
TRAINING_PODS_FILE = "training-pods.yaml"
TEAMS_FILE = "fixture-with-a-team.yaml"
# The one platform object that runs as root: it creates the teams' directories in the file system's root-owned top
# directory, which only root may write (README, "What the training pods run as").
ROOT_WRITER = "team-directories"
ROOT_WRITER_FINDINGS = {
    "CKV_K8S_23": "root writes the file system's root-owned top directory",
    "CKV_K8S_40": "root writes the file system's root-owned top directory",
}
# A pod checkov must fail (privileged): proves the run checks what it is given.
CANARY = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "canary", "namespace": "default"},
    "spec": {"containers": [{"name": "c", "image": "busybox:1.37", "securityContext": {"privileged": True}}]},
}
CANARY_FILE = "canary.yaml"


def checkov_binary() -> str:
    binary = os.environ.get("CHECKOV", str(REPO_ROOT / ".venv-checkov" / "bin" / "checkov"))
    if not Path(binary).exists():
        pytest.fail(f"checkov not found at {binary}: run `make test` (it builds .venv-checkov) or set CHECKOV")
    return binary


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    """checkov's JSON report per framework, from one run over every stack's objects, the canary and the Dockerfiles."""
    root = tmp_path_factory.mktemp("checkov")
    for stack in STACKS:
        objects = [manifest(r) for r in kubernetes_objects(cached_plan(stack, False))]
        (root / f"{stack}.yaml").write_text(yaml.safe_dump_all(objects))
    # The root writer exists only on a stack with teams: a fixture has one, whether or not a shipped stack does.
    with_a_team = evaluate("staging", teams=[{"name": "research", "neuronShare": 1.0}])
    (root / TEAMS_FILE).write_text(yaml.safe_dump_all([manifest(r) for r in kubernetes_objects(with_a_team)]))
    (root / TRAINING_PODS_FILE).write_text(yaml.safe_dump_all([pod for stack in STACKS for pod in training_pods(stack)]))
    (root / CANARY_FILE).write_text(yaml.safe_dump(CANARY))
    for dockerfile in TRAINING_DOCKERFILES:
        shutil.copy(REPO_ROOT / dockerfile, root / Path(dockerfile).name)
    result = subprocess.run(
        [checkov_binary(), "--directory", str(root), "--framework", "kubernetes", "dockerfile", "--output", "json"]
        + ["--skip-download", "--skip-check", ",".join(SKIPS)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CKV_SKIP_PACKAGE_UPDATE_CHECK": "TRUE"},
    )
    assert result.returncode in (0, 1), result.stderr[-2000:]  # 1: some check failed (the canary at least)
    parsed = json.loads(result.stdout)
    return {report["check_type"]: report for report in (parsed if isinstance(parsed, list) else [parsed])}


def training_pods(stack: str) -> list[dict]:
    """The pods of the stack's training and precompile jobs, as the launcher builds them, as Pod objects."""
    contract = PlatformContract.from_outputs(cached_plan(stack, False).outputs)
    pods = []
    for precompile in (False, True):
        name = "bertcompile" if precompile else "berttrain"
        job = bert_job.volcano_job(contract, launch.JobRequest(name=name, precompile=precompile))
        for task in job["spec"]["tasks"]:
            metadata = {"name": f"{stack}-{task['name']}", "namespace": job["metadata"]["namespace"]}
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": task["template"]["spec"]})
    return pods


def failures(report: dict, *, where: str | None = None) -> list[str]:
    """Failed checks outside the canary (and outside the training pods, unless ``where`` names their file), but for
    the root writer's listed findings."""
    return [
        f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}"
        for c in report["results"]["failed_checks"]
        if (c["file_path"].endswith(where) if where else not c["file_path"].endswith((CANARY_FILE, TRAINING_PODS_FILE)))
        and not (c["resource"].endswith(f".{ROOT_WRITER}") and c["check_id"] in ROOT_WRITER_FINDINGS)
    ]


def test_the_root_writer_fails_only_its_listed_checks(reports):
    found = {
        c["check_id"] for c in reports["kubernetes"]["results"]["failed_checks"] if c["resource"].endswith(f".{ROOT_WRITER}")
    }
    assert found == set(ROOT_WRITER_FINDINGS)  # the fixture declares a team: the job is there, and runs as root


def test_every_stacks_kubernetes_objects_pass(reports):
    kubernetes = reports["kubernetes"]
    assert failures(kubernetes) == []
    checked_files = {Path(c["file_path"]).name for c in kubernetes["results"]["passed_checks"]}
    assert {f"{stack}.yaml" for stack in STACKS} | {TEAMS_FILE} <= checked_files


def test_every_training_dockerfile_passes(reports):
    dockerfile = reports["dockerfile"]
    assert failures(dockerfile) == []
    checked = {Path(c["file_path"]).name for c in dockerfile["results"]["passed_checks"]}
    assert {Path(d).name for d in TRAINING_DOCKERFILES} <= checked


def test_a_privileged_pod_is_caught(reports):
    caught = {c["check_id"] for c in reports["kubernetes"]["results"]["failed_checks"] if c["file_path"].endswith(CANARY_FILE)}
    assert "CKV_K8S_16" in caught  # "Container should not be privileged"


def test_every_skip_is_one_check_with_a_one_line_reason():
    for check_id, reason in SKIPS.items():
        assert re.fullmatch(r"CKV2?_(K8S|DOCKER)_\d+", check_id), check_id
        assert reason.strip() and "\n" not in reason, check_id


def test_training_pods_fail_only_the_checks_whose_reason_is_listed(reports):
    failed = {line.split()[0] for line in failures(reports["kubernetes"], where=TRAINING_PODS_FILE)}
    assert failed == set(TRAINING_POD_FINDINGS)  # none beyond the list, and no stale entry in it
    results = reports["kubernetes"]["results"]["passed_checks"]
    passed = {c["check_id"] for c in results if c["file_path"].endswith(TRAINING_PODS_FILE)}
    # what the pods do hold: no privilege escalation, no capabilities, seccomp, no API token
    assert {"CKV_K8S_20", "CKV_K8S_28", "CKV_K8S_37", "CKV_K8S_31", "CKV_K8S_38"} <= passed
