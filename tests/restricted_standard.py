"""The Kubernetes "restricted" Pod Security Standard's checks, to hold the pods the platform runs or submits against it.

The checks follow the standard's controls as kubernetes.io documents them ("Pod Security Standards", Baseline and
Restricted policies, v1.35): what the API server's Pod Security admission warns about in the job namespace, which
enforces baseline and warns and audits at restricted.
"""

from __future__ import annotations

from collections.abc import Iterator

from trainium_eks.pod_security import ROOT_UID

# Restricted: the volume types a pod may use (besides those, baseline already refuses hostPath).
RESTRICTED_VOLUME_TYPES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret",
}  # fmt: skip
# Restricted: the only capability a container may add, after dropping ALL.
RESTRICTED_ADDABLE_CAPABILITIES = {"NET_BIND_SERVICE"}
SECCOMP_PROFILES = {"RuntimeDefault", "Localhost"}


def _containers(pod: dict) -> Iterator[tuple[str, dict]]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for index, container in enumerate(pod.get(kind, [])):
            yield f"{kind}[{index}]", container


def restricted_findings(pod: dict) -> dict[str, str]:
    """Where the pod spec ``pod`` breaks the restricted standard: field path -> what the standard asks."""
    findings = {}
    context = pod.get("securityContext", {})
    for namespace in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(namespace):
            findings[f"spec.{namespace}"] = "host namespaces must not be shared"
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUME_TYPES:
            findings[f"spec.volumes[{volume['name']}]"] = f"volume type {', '.join(sorted(kinds))} is not allowed"
    pod_non_root = context.get("runAsNonRoot") is True
    pod_seccomp = context.get("seccompProfile", {}).get("type")
    if context.get("runAsUser") == ROOT_UID:
        findings["spec.securityContext.runAsUser"] = "must not be 0"
    if pod_seccomp is not None and pod_seccomp not in SECCOMP_PROFILES:
        findings["spec.securityContext.seccompProfile"] = "must be RuntimeDefault or Localhost"
    for where, container in _containers(pod):
        own = container.get("securityContext", {})
        path = f"spec.{where}.securityContext"
        if own.get("privileged"):
            findings[f"{path}.privileged"] = "must not be true"
        if own.get("allowPrivilegeEscalation") is not False:
            findings[f"{path}.allowPrivilegeEscalation"] = "must be false"
        if own.get("runAsNonRoot", pod_non_root) is not True:
            findings[f"{path}.runAsNonRoot"] = "must be true (here or in the pod's securityContext)"
        if own.get("runAsUser") == ROOT_UID:
            findings[f"{path}.runAsUser"] = "must not be 0"
        if own.get("seccompProfile", {}).get("type", pod_seccomp) not in SECCOMP_PROFILES:
            findings[f"{path}.seccompProfile"] = "must be RuntimeDefault or Localhost (here or in the pod's)"
        capabilities = own.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            findings[f"{path}.capabilities.drop"] = "must include ALL"
        if not set(capabilities.get("add", [])) <= RESTRICTED_ADDABLE_CAPABILITIES:
            findings[f"{path}.capabilities.add"] = "may add only NET_BIND_SERVICE"
        if any(port.get("hostPort") for port in container.get("ports", [])):
            findings[f"spec.{where}.ports"] = "host ports must not be used"
    return findings
