"""The Kubernetes "restricted" Pod Security Standard as plain pod and container settings, for every workload the
platform runs or submits (components and jobs alike).
"""

from __future__ import annotations


def restricted_pod_security_context(uid: int, *, owns_volumes: bool = False) -> dict:
    """Pod-level settings of the Kubernetes "restricted" Pod Security Standard, as user ``uid``."""
    context = {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "seccompProfile": {"type": "RuntimeDefault"}}
    if owns_volumes:
        context["fsGroup"] = uid  # writable volumes are handed to the pod's group
    return context


def restricted_container_security_context() -> dict:
    """Container-level settings of the "restricted" standard, with a read-only root filesystem."""
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
