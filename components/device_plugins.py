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

from components.kube import helm_release, trainium_node_selector
from trainium_eks import layout, versions
from trainium_eks.config import DevicePluginConfig

PLUGIN_NAMESPACE = "kube-system"
# The chart's node problem detector runs in this namespace, which chart 1.9.0 does not create.
HEALTH_NAMESPACE = "neuron-healthcheck-system"
CRITICAL_ADDONS_TOLERATION = {"key": "CriticalAddonsOnly", "operator": "Exists"}


@dataclass(frozen=True)
class DevicePluginsArgs:
    config: DevicePluginConfig
    system_nodes: pulumi.Resource  # the release waits for them, as every release does
    region: str  # the EKS-published EFA plugin image is pulled from this region's registry


class DevicePlugins(pulumi.ComponentResource):
    """The Neuron and EFA device plugins, scheduled onto Trainium nodes only."""

    neuron: k8s.helm.v3.Release
    efa: k8s.helm.v3.Release

    def __init__(self, name: str, args: DevicePluginsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:kubernetes:DevicePlugins", name, None, opts)
        cfg = args.config
        trainium_tolerations = [CRITICAL_ADDONS_TOLERATION, layout.neuron_toleration()]
        depends_on = [args.system_nodes]
        if cfg.node_problem_detector:
            depends_on.append(
                k8s.core.v1.Namespace(
                    f"{name}-neuron-health",
                    metadata={"name": HEALTH_NAMESPACE},
                    opts=pulumi.ResourceOptions(parent=self),
                )
            )
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
                # Neuron node problem detector: reports Neuron hardware and runtime faults as node conditions
                # and events (monitor only; node recovery stays off).
                "npd": {
                    "enabled": cfg.node_problem_detector,
                    "nodeRecovery": {"enabled": False},
                    "nodeSelector": trainium_node_selector(),
                    "tolerations": trainium_tolerations,
                },
            },
            parent=self,
            depends_on=depends_on,
        )
        self.efa = helm_release(
            name,
            "efa-device-plugin",
            versions.EFA_DEVICE_PLUGIN_CHART,
            namespace=PLUGIN_NAMESPACE,
            values={
                "image": {"repository": versions.eks_image_repository(args.region, versions.EFA_DEVICE_PLUGIN_IMAGE_REPOSITORY)},
                "nodeSelector": {**trainium_node_selector(), layout.EFA_PRESENT_LABEL: "true"},
                "tolerations": [layout.neuron_toleration()],
            },
            parent=self,
        )
        self.register_outputs({"neuronRelease": self.neuron.name, "efaRelease": self.efa.name})
