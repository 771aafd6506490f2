"""The Kubernetes "restricted" Pod Security Standard as plain pod and container settings, for every workload the
platform runs or submits (components and jobs alike). The tests hold pods against the standard's checks
(tests/restricted_standard.py).
"""

from __future__ import annotations

ROOT_UID = 0


def restricted_pod_security_context(uid: int, *, owns_volumes: bool = False) -> dict:
    """Pod-level settings of the Kubernetes "restricted" Pod Security Standard, as user ``uid``."""
    context = {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "seccompProfile": {"type": "RuntimeDefault"}}
    if owns_volumes:
        context["fsGroup"] = uid  # writable volumes are handed to the pod's group
    return context


def restricted_container_security_context(*, read_only_root: bool = True) -> dict:
    """Container-level settings of the "restricted" standard, with a read-only root filesystem unless asked."""
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": read_only_root, "capabilities": {"drop": ["ALL"]}}


def root_pod_security_context() -> dict:
    """The pod settings of the restricted standard that a root pod can keep: only the user differs."""
    return {"runAsUser": ROOT_UID, "runAsNonRoot": False, "seccompProfile": {"type": "RuntimeDefault"}}
