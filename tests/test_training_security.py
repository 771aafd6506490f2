"""The training and precompile pods against the "restricted" Pod Security Standard: they meet every control but
running as a non-root user, and the fields they leave out are exactly those `jobs.job_building.training_security` and the README
list with their reasons."""

from __future__ import annotations

import copy

import pytest
from restricted_standard import restricted_findings
from support import STACKS, cached_plan, one

from jobs import launch
from jobs.job_building import training_security
from jobs.workloads import bert_job
from preflight.stackfile import REPO_ROOT
from trainium_eks.contract import PlatformContract

pytestmark = pytest.mark.stacks


def job_pods(stack: str, precompile: bool) -> list[dict]:
    contract = PlatformContract.from_outputs(cached_plan(stack, False).outputs)
    name = "bertcompile" if precompile else "berttrain"
    job = bert_job.volcano_job(contract, launch.JobRequest(name=name, precompile=precompile))
    return [task["template"]["spec"] for task in job["spec"]["tasks"]]


@pytest.mark.parametrize("precompile", [False, True], ids=["train", "precompile"])
@pytest.mark.parametrize("stack", STACKS)
def test_the_job_pods_break_only_the_listed_fields_of_restricted(stack, precompile):
    pods = job_pods(stack, precompile)
    assert pods
    for pod in pods:
        findings = restricted_findings(pod)
        assert {path.rsplit(".", 1)[1] for path in findings} == set(training_security.LEFT_OUT), findings
        assert pod["automountServiceAccountToken"] is False


def test_the_readme_lists_each_field_left_out_with_its_reason():
    readme = (REPO_ROOT / "README.md").read_text()
    for field, reason in training_security.LEFT_OUT.items():
        assert f"| `{field}` | {reason} |" in readme, field


UNHARDENED = {  # the pod TorchX builds, before the launcher's settings: what Pod Security warned about
    "containers": [{"name": "worker-0", "image": "training:1", "securityContext": {}}],
    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
}


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda pod: None, {"allowPrivilegeEscalation", "runAsNonRoot", "seccompProfile", "drop"}),
        (lambda pod: pod.update(hostNetwork=True), {"hostNetwork"}),
        (lambda pod: pod["volumes"].append({"name": "host", "hostPath": {"path": "/"}}), {"volumes[host]"}),
        (lambda pod: pod["containers"][0]["securityContext"].update(privileged=True), {"privileged"}),
        (lambda pod: pod["containers"][0]["securityContext"].update(capabilities={"add": ["IPC_LOCK"]}), {"add"}),
        (lambda pod: pod["containers"][0].update(ports=[{"containerPort": 22, "hostPort": 22}]), {"ports"}),
    ],
    ids=["unhardened", "host-network", "host-path", "privileged", "ipc-lock", "host-port"],
)
def test_the_standards_checks_catch_what_pod_security_warns_about(edit, expected):
    pod = copy.deepcopy(UNHARDENED)
    edit(pod)
    found = {path.rsplit(".", 1)[1] for path in restricted_findings(pod)}
    assert expected <= found, found


def test_a_pod_of_the_platform_that_runs_restricted_has_no_finding():
    etcd = one(cached_plan("staging", False).find("kubernetes:apps/v1:StatefulSet")).inputs
    assert restricted_findings(etcd["spec"]["template"]["spec"]) == {}
