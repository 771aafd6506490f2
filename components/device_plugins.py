"""Device plugins: the Neuron device plugin (official neuron-helm-chart) and the EFA device plugin (eks-charts).

Both run as DaemonSets only on Trainium nodes (node selector on the platform's node-role label) and tolerate
the Neuron taint those nodes carry. They advertise ``aws.amazon.com/neuron``, ``aws.amazon.com/neuroncore``
and ``vpc.amazonaws.com/efa`` to the scheduler. The EFA plugin's image comes from the EKS image registry of the
stack's own region (the chart defaults to us-west-2's); the Neuron chart's images come from the global public ECR.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.cluster import ClusterHandle
from components.kube import helm_release, trainium_node_selector
from trainium_eks import layout, versions

PLUGIN_NAMESPACE = "kube-system"
CRITICAL_ADDONS_TOLERATION = {"key": "CriticalAddonsOnly", "operator": "Exists"}


@dataclass(frozen=True)
class DevicePluginsArgs:
    # The releases wait for its system nodes, as every release does; the EKS-published EFA plugin image is pulled from
    # its region's registry.
    cluster: ClusterHandle


class DevicePlugins(pulumi.ComponentResource):
    """The Neuron and EFA device plugins, scheduled onto Trainium nodes only."""

    neuron: k8s.helm.v3.Release
    efa: k8s.helm.v3.Release

    def __init__(self, name: str, args: DevicePluginsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:kubernetes:DevicePlugins", name, None, opts)
        trainium_tolerations = [CRITICAL_ADDONS_TOLERATION, layout.neuron_toleration()]
        self.neuron = helm_release(
            name,
            "neuron-device-plugin",
            versions.NEURON_HELM_CHART,
            namespace=PLUGIN_NAMESPACE,
            values={
                "devicePlugin": {
                    "enabled": True,
                    "nodeSelector": trainium_node_selector(),
                    "tolerations": trainium_tolerations,
                },
                # Off: the chart's scheduler extension serves only pods scheduled by its own kube-scheduler, and
                # every job here is scheduled by Volcano, so it would change nothing.
                "scheduler": {"enabled": False},
                # Off: the EKS node monitoring agent reports the same Neuron hardware faults (AcceleratedHardwareReady)
                # and EKS node auto repair acts on them through the node group, within its own limits. The chart's
                # detector would publish metrics and recover nodes only with a service-account role of its own
                # (CloudWatch, and autoscaling:SetInstanceHealth on the node group's Auto Scaling group, which would
                # replace nodes outside the node group's repair limits), so it adds a second repairer, not coverage.
                "npd": {"enabled": False},
            },
            parent=self,
            depends_on=[args.cluster.system_nodes],
        )
        self.efa = helm_release(
            name,
            "efa-device-plugin",
            versions.EFA_DEVICE_PLUGIN_CHART,
            namespace=PLUGIN_NAMESPACE,
            values={
                "image": {
                    "repository": versions.eks_image_repository(args.cluster.region, versions.EFA_DEVICE_PLUGIN_IMAGE_REPOSITORY)
                },
                "nodeSelector": {**trainium_node_selector(), layout.EFA_PRESENT_LABEL: "true"},
                "tolerations": [layout.neuron_toleration()],
            },
            parent=self,
        )
        self.register_outputs({"neuronRelease": self.neuron.name, "efaRelease": self.efa.name})
