"""What the training and precompile pods run as: the "restricted" Pod Security Standard except running as root.

Every control that Neuron devices, EFA and the writes to the shared volume do not need is set; ``LEFT_OUT`` names
each field of the standard the pods do not meet, and why (the README lists the same, and a test holds the pods to
it). Held against each need:
- Neuron devices: the Neuron driver's udev rule makes /dev/neuron* mode 0666 (aws-neuron-driver README), so no
  capability is needed to open them; the device plugin adds them to the container.
- EFA: libfabric registers (pins) memory, which counts against RLIMIT_MEMLOCK; a process without CAP_IPC_LOCK may lock
  up to that limit (mlock(2)). The limit cannot be raised from inside a container and is set when the container is
  created (EC2 User Guide, "Install the EFA software in a container", --skip-limit-conf), that is by the node's
  container runtime, so dropping every capability leaves it as it is. The uverbs devices come from the EFA device
  plugin.
- The shared volume: FSx for Lustre keeps the owner of each file, and the datasets, compile cache and checkpoints
  are written as root by the training image (training/Dockerfile), so the workers must be root to write them; as
  the owner, root needs no capability (CAP_DAC_OVERRIDE, CAP_CHOWN) to do so.
"""

from __future__ import annotations

from trainium_eks.pod_security import restricted_container_security_context, root_pod_security_context

# Field of the restricted standard -> why the training pods do not meet it.
LEFT_OUT = {
    "runAsNonRoot": "the workers run as root: the files they write on the shared FSx volume (compile cache, "
    "checkpoints, TensorBoard logs) are root's, as the training image writes them",
    "runAsUser": "0, for the same reason (restricted asks for a non-zero user)",
}
# Also left false, though not part of the standard: the Neuron compiler (neuron_parallel_compile, neuronx-cc) and the
# runtime write working files under the image's filesystem, at paths this platform does not control.
WRITABLE_ROOT_FILESYSTEM = True


def harden(pod_spec: dict) -> dict:
    """``pod_spec`` with the pod and container settings above."""
    pod_spec["securityContext"] = root_pod_security_context()
    pod_spec["automountServiceAccountToken"] = False  # torchrun and the workers never call the Kubernetes API
    for container in pod_spec["containers"]:
        container["securityContext"] = restricted_container_security_context(read_only_root=not WRITABLE_ROOT_FILESYSTEM)
    return pod_spec
