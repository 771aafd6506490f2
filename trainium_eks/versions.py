"""Every pinned version the platform deploys: Kubernetes, Helm charts, container images.

One module so that an upgrade is one reviewed diff, and so that tests and policies can assert that nothing
is unpinned. Each entry says where the pin was read (stored snapshots of the upstream repositories, 2026-12).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainium_eks import hardware
from trainium_eks.backends import BACKENDS, Backend

# EKS versions in standard support on 2026-12-02 plus 1.34, whose extended support began that day
# (awsdocs/amazon-eks-user-guide kubernetes-versions.adoc), that the pinned Volcano also supports: Volcano
# 1.15's Kubernetes compatibility table (volcano-sh/volcano README) ends at 1.35, so 1.36 waits for a Volcano
# release that lists it. The AL2023 Neuron AMI is built for 1.30-1.36 (awslabs/amazon-eks-ami CHANGELOG v20260714).
SUPPORTED_KUBERNETES_VERSIONS = ("1.34", "1.35")
EXTENDED_SUPPORT_KUBERNETES_VERSIONS = ("1.34",)  # billed at the extended-support control-plane rate


@dataclass(frozen=True)
class NodeImageRelease:
    """One release of the EKS-optimised AMIs (awslabs/amazon-eks-ami): its tag and the kubelet it ships per
    Kubernetes version. Managed node groups take ``<kubelet>-<date>`` as releaseVersion (EKS User Guide, "Amazon EKS
    optimized Amazon Linux AMI versions": k8s_major.k8s_minor.k8s_patch-release_date); Karpenter takes the tag in an
    ``al2023@<tag>`` alias and resolves the Neuron variant for accelerated types itself (karpenter-provider-aws
    v1.14.1 pkg/providers/amifamily/al2023.go and types.go: VariantNeuron requires instance-accelerator-count).

    A release is known by its tag; its Neuron driver only when a source states it (``source``). A release whose
    driver no source gives is listed with ``neuron_driver`` None, and refused: the driver decides whether a training
    image's runtime initialises, and the AL2023 Neuron build installs the newest ``aws-neuronx-dkms`` unpinned
    (amazon-eks-ami templates/al2023/provisioners/install-neuron-driver.sh), so nothing else tells it."""

    tag: str
    kubelet_versions: dict[str, str]
    neuron_driver: str | None  # the aws-neuronx-dkms package of the AL2023 Neuron AMI; None: no source states it
    source: str  # where the kubelets and the driver were read

    @property
    def fast_image_pull(self) -> bool:
        """Whether its nodeadm has the ``FastImagePull`` feature gate (see FAST_IMAGE_PULL_SINCE)."""
        return self.tag >= FAST_IMAGE_PULL_SINCE


# nodeadm's FastImagePull feature gate pulls and unpacks image layers in parallel through the SOCI snapshotter, on
# instances with 4 vCPUs and 7 GiB or more (amazon-eks-ami nodeadm/doc/examples.md, "Enabling fast image pull";
# internal/containerd/config.go). awslabs/amazon-eks-ami CHANGELOG.md: SOCI snapshotter support came in v20250813,
# the gate's FastImagePull name by v20250821, and the SOCI directory on the instance store in v20251217. Release tags
# are v<date>, so they compare in date order as strings.
FAST_IMAGE_PULL_SINCE = "v20250821"

_CHANGELOG = "awslabs/amazon-eks-ami CHANGELOG.md (commit 81fec2e8, 2026-07-23)"
# The AL2023_x86_64_NEURON columns of the CHANGELOG; v20260724 is tagged (2026-07-24) without an entry, so its
# driver is unknown: it is listed so that a group pinning it is refused by name rather than as an unknown tag.
NODE_IMAGE_RELEASES = {
    release.tag: release
    for release in (
        NodeImageRelease(
            tag="v20260625",
            kubelet_versions={"1.34": "1.34.9", "1.35": "1.35.6"},
            neuron_driver="2.28.0.0",
            source=f'{_CHANGELOG}, "AMI Release v20260625" (aws-neuronx-dkms 2.28.0.0, efa 3.0.0)',
        ),
        NodeImageRelease(
            tag="v20260714",
            kubelet_versions={"1.34": "1.34.9", "1.35": "1.35.6"},
            neuron_driver="2.29.0.0",
            source=f'{_CHANGELOG}, "AMI Release v20260714" (aws-neuronx-dkms 2.29.0.0, efa 3.1.0)',
        ),
        NodeImageRelease(
            tag="v20260724",
            kubelet_versions={},
            neuron_driver=None,
            source=f"{_CHANGELOG}: tag v20260724 exists, with no CHANGELOG entry",
        ),
    )
}


def node_image_release(date: str) -> NodeImageRelease | None:
    """The release dated ``date`` (``20260625``, as a releaseVersion or an ``al2023@v<date>`` alias spells it)."""
    return NODE_IMAGE_RELEASES.get(f"v{date}")


def sourced_releases() -> tuple[str, ...]:
    """The tags of the releases whose Neuron driver a source states: the ones some group may pin."""
    return tuple(tag for tag, release in NODE_IMAGE_RELEASES.items() if release.neuron_driver is not None)


def releases_running(runtime: NeuronRuntime) -> tuple[str, ...]:
    """The sourced releases whose driver ``runtime`` initialises on: the ones a group of its training stack may pin."""
    return tuple(tag for tag in sourced_releases() if runtime.runs_on(NODE_IMAGE_RELEASES[tag].neuron_driver))


def minor_version(version: str) -> tuple[int, int]:
    """``1.35`` or ``2.29.0.0`` as (major, minor), to compare versions in order."""
    major, minor, *_ = version.split(".")
    return int(major), int(minor)


@dataclass(frozen=True)
class NeuronRuntime:
    """The Neuron runtime library an image ships, and the host drivers (aws-neuronx-dkms) it initialises on."""

    sdk: str
    library: str
    oldest_driver: str  # major.minor
    first_incompatible_driver: str | None  # major.minor: this driver and later need a newer runtime; None: none known

    def runs_on(self, driver: str) -> bool:
        newest_ok = self.first_incompatible_driver is None or minor_version(driver) < minor_version(
            self.first_incompatible_driver
        )
        return minor_version(self.oldest_driver) <= minor_version(driver) and newest_ok

    @property
    def drivers(self) -> str:
        if self.first_incompatible_driver is None:
            return f"{self.oldest_driver} and later"
        return f"{self.oldest_driver} up to, not including, {self.first_incompatible_driver}"


# aws-neuron/aws-neuron-sdk release-notes/components/runtime.rst (commit 81ce03ae): Neuron 2.30.0's runtime library
# is 2.32.31.0, which "is not backward-compatible with Neuron Driver 2.26 or earlier"; and in Neuron 2.31.0's known
# issues, "Neuron Driver 2.29 requires Neuron Runtime Library 2.33 or later. Upgrading the Driver without also
# upgrading the Runtime Library will cause nrt_init() to fail."
XLA_RUNTIME = NeuronRuntime(sdk="2.30.0", library="2.32.31.0", oldest_driver="2.27", first_incompatible_driver="2.29")
# Neuron 2.33.0 (release notes, 2026-10-19): aws-neuronx-runtime-lib 2.35.30.0, shipped with aws-neuronx-dkms 2.31.7.0,
# the first SDK with TorchNeuron as a public beta (release-notes/components/torchneuron: "introduces the native
# torch-neuronx backend as a public beta"); before it TorchNeuron was a private preview, then a private beta
# (about-neuron/whats-new.rst, re:Invent 2025: "Private Preview"; announce-no-support-pytorch-xla-training.rst, Neuron
# 2.30: "currently available as a Private Beta"). Driver 2.29 is the oldest it is taken to run on: 2.29 "requires
# Neuron Runtime Library 2.33 or later", which 2.35 is, and no release note read (2.32.0, 2.33.0) raises the runtime's
# driver floor again. That is an inference, not a statement: the acceptance job's neuron-devices check
# (jobs.acceptance) is the proof on a node. No newer driver is known to need a newer runtime, so the range is open above.
NATIVE_RUNTIME = NeuronRuntime(sdk="2.33.0", library="2.35.30.0", oldest_driver="2.29", first_incompatible_driver=None)


# The commit of aws-neuron/torchtitan-neuron the native image installs (training/Dockerfile.native's build argument of
# the same name, which `make image` passes). None: no source read names the commit of Neuron 2.33.0's TorchTitan Neuron
# 0.2.2+neuron.1 (release notes, components/torchtitan-neuron; its setup guide clones the default branch), and the
# fork could not be read here, so none is written: the native build refuses to run until a reviewed commit is set here
# (with the stack's image_tag bumped).
TORCHTITAN_NEURON_COMMIT: str | None = None


@dataclass(frozen=True)
class TrainingStack:
    """The software a Trainium generation trains with: the PyTorch backend, the image the launcher runs (built by
    ``make image`` from ``dockerfile``'s ``target``, tagged ``image_tag``), the Neuron runtime in it, and the node
    image release a group of the generation boots unless it pins another. The generations it trains are those whose
    row (``hardware.GENERATIONS``) names it."""

    name: str  # a label value: nodes carry it as trainium-eks/training-stack
    backend: Backend  # what the training script computes on (trainium_eks/backends.py)
    dockerfile: str
    target: str
    image_tag: str  # ECR tags are immutable: bump it with every change to what the image holds
    runtime: NeuronRuntime
    default_node_image_release: str
    build_args: tuple[tuple[str, str | None], ...] = ()  # (ARG, value) of the Dockerfile, set from this module

    @property
    def generations(self) -> tuple[str, ...]:
        """The hardware.Generation names whose groups may train with it."""
        return tuple(name for name, generation in hardware.GENERATIONS.items() if self.name in generation.training_stacks)


# The seed's path: PyTorch/XLA, whose last training container is Neuron 2.30's (training/Dockerfile; "Starting with
# Neuron SDK 2.31.0, the PyTorch/XLA training Deep Learning Container ... is no longer published",
# announce-no-longer-publish-pytorch-training-dlc.rst). That container is itself past XLA training's support:
# "Starting with Neuron Release 2.30.0, PyTorch/XLA is no longer supported for training workloads on Trainium"
# (aws-neuron-sdk about-neuron/announcements/neuron2.x/announce-no-support-pytorch-xla-training.rst). Trn1, which
# TorchNeuron does not support, has nothing newer, so it stays on it, at the newest release whose driver its runtime
# initialises on.
# TorchNeuron, the native backend (public beta in Neuron 2.33, Trn2 and Trn3 only: Neuron docs torch/index.html),
# built from the Neuron apt and pip repositories (training/Dockerfile.native) at 2.33.0, the newest SDK whose package
# versions were found: the documentation's navigation has a 2.33.1 (its versioned pages, such as
# en/v2.33.1/release-notes/prev/content.html, list 2.33.0 as a previous release) whose contents were not found, and
# 2.34.0's release notes (github.com/aws-neuron/aws-neuron-sdk/releases/tag/v2.34.0) list no package versions
# (research of 2026-12); on the newest release with a sourced driver its runtime initialises on.
TRAINING_STACKS = {
    stack.name: stack
    for stack in (
        TrainingStack(
            name="pytorch-xla-2.30",
            backend=BACKENDS["xla"],
            dockerfile="training/Dockerfile",
            target="train",
            image_tag="bert-pretrain-1.2.0",
            runtime=XLA_RUNTIME,
            default_node_image_release="v20260625",
        ),
        TrainingStack(
            name="torchneuron-2.33",
            backend=BACKENDS["neuron"],
            dockerfile="training/Dockerfile.native",
            target="train",
            image_tag="torchneuron-train-1.1.0",
            runtime=NATIVE_RUNTIME,
            default_node_image_release="v20260714",
            build_args=(("TORCHTITAN_NEURON_COMMIT", TORCHTITAN_NEURON_COMMIT),),
        ),
    )
}


def training_stack_of(generation: str) -> TrainingStack:
    """The stack a group of ``generation`` trains with unless it names another: the first its row names."""
    return TRAINING_STACKS[hardware.GENERATIONS[generation].training_stacks[0]]


def backend_generations(backend: str) -> tuple[str, ...]:
    """The generations that train on ``backend``: those of the training stacks on it (none for the CPU's)."""
    stacks = [stack for stack in TRAINING_STACKS.values() if stack.backend.name == backend]
    return tuple(name for name in hardware.GENERATIONS if any(name in stack.generations for stack in stacks))


@dataclass(frozen=True)
class HelmChart:
    chart: str  # chart name, or the full oci:// reference for OCI charts
    version: str  # exact chart version, never a range
    repository: str | None = None  # HTTP chart repository; None for OCI charts
    app_version: str = ""


# aws-neuron/neuron-helm-charts charts/neuron-helm-chart 1.9.0 (2026-07-10, Neuron SDK 2.31.0): device plugin
# and scheduler extension images 2.31.0.0.
NEURON_HELM_CHART = HelmChart(chart="oci://public.ecr.aws/neuron/neuron-helm-chart", version="1.9.0", app_version="2.31.0.0")

# aws/eks-charts stable/aws-efa-k8s-device-plugin (index 2026-08-03).
EFA_DEVICE_PLUGIN_CHART = HelmChart(
    chart="aws-efa-k8s-device-plugin", version="v0.5.30", repository="https://aws.github.io/eks-charts", app_version="v0.5.20"
)

# The chart's image.repository defaults to the us-west-2 copy (eks-charts v0.5.30 values.yaml, whose image.tag is
# set to v0.5.20, the appVersion; its DaemonSet pulls image.repository:image.tag); the platform points it at the
# stack's own region instead (components/device_plugins.py), so nodes never pull across regions.
EFA_DEVICE_PLUGIN_IMAGE_REPOSITORY = "eks/aws-efa-k8s-device-plugin"

# The ECR registry account that serves the EKS-published images in each region the catalog supports
# (awsdocs/amazon-eks-user-guide add-ons-images.adoc, "View Amazon container image registries for Amazon EKS
# add-ons": EKS replicates its add-on images to every region it supports; opt-in regions use other accounts and are
# left out until the catalog supports one). That the EFA plugin's image is replicated with them is an inference
# from the chart's own default, the same account and path in us-west-2: the page does not name the plugin. Before a
# stack's first deploy to a region, `aws ecr describe-images --registry-id <account> --repository-name
# eks/aws-efa-k8s-device-plugin --region <region>` confirms it. The Neuron chart's images come from public.ecr.aws, which is one
# global registry, so they need no regional choice.
EKS_IMAGE_REGISTRY_ACCOUNTS = {"us-east-1": "602401143452", "us-east-2": "602401143452", "us-west-2": "602401143452"}


def eks_image_repository(region: str, repository: str) -> str:
    """``repository`` in the EKS image registry of ``region``."""
    return f"{EKS_IMAGE_REGISTRY_ACCOUNTS[region]}.dkr.ecr.{region}.amazonaws.com/{repository}"


# volcano-sh/helm-charts index (2026-09-30): newest stable 1.x.
VOLCANO_CHART = HelmChart(
    chart="volcano", version="1.15.2", repository="https://volcano-sh.github.io/helm-charts", app_version="v1.15.2"
)

# kubernetes-sigs/aws-fsx-csi-driver charts/aws-fsx-csi-driver (2026-04-21): driver v1.9.0.
FSX_CSI_CHART = HelmChart(
    chart="aws-fsx-csi-driver",
    version="1.17.0",
    repository="https://kubernetes-sigs.github.io/aws-fsx-csi-driver",
    app_version="v1.9.0",
)

# etcd 3.5 is the last line with the v2 API (--enable-v2 is removed in 3.6) that torch's etcd rendezvous
# backends (python-etcd) speak. v3.5.33 tagged 2026-07-23.
ETCD_IMAGE = "quay.io/coreos/etcd:v3.5.33"

# TensorFlow images from 2.21 on no longer ship TensorBoard; 2.15.0 is a tag reported to include it.
TENSORBOARD_IMAGE = "tensorflow/tensorflow:2.15.0"
# The image of the platform's one-off jobs that need a shell's tools (creating the teams' directories): TensorBoard's,
# already pinned, and pulled on the system nodes where those jobs run.
SHELL_IMAGE = TENSORBOARD_IMAGE

# The EBS CSI driver (for etcd's volume) is an EKS add-on; its version is pinned to the default build EKS
# publishes for the cluster's Kubernetes version (resolved with eks:DescribeAddonVersions at deploy time).
EBS_CSI_ADDON = "aws-ebs-csi-driver"
VPC_CNI_ADDON = "vpc-cni"  # likewise at EKS's default build for the cluster version
# Likewise. Container Insights collects Neuron metrics from add-on v1.5.0-eksbuild.1 on and EFA metrics from
# v1.5.2-eksbuild.1 on (CloudWatch User Guide, "Container Insights with enhanced observability metrics").
CLOUDWATCH_OBSERVABILITY_ADDON = "amazon-cloudwatch-observability"
# The EKS node monitoring agent (awsdocs/amazon-eks-user-guide node-health.adoc; aws/eks-node-monitoring-agent), likewise.
NODE_MONITORING_AGENT_ADDON = "eks-node-monitoring-agent"

# Karpenter 1.14.1 (aws/karpenter-provider-aws tag v1.14.1, 2026-08-20; getting-started guide: KARPENTER_VERSION
# 1.14.1, oci://public.ecr.aws/karpenter/karpenter). The CRDs come from their own chart at the same version, as the
# upgrade guide recommends: the controller chart's crds/ folder is installed once and never upgraded by Helm.
# 1.14 supports Kubernetes 1.35 (compatibility matrix: 1.35 needs 1.9 or newer) and brings the EC2NodeClass fields the
# elastic pools need (networkInterfaces and placementGroupSelector since 1.11).
KARPENTER_CHART = HelmChart(chart="oci://public.ecr.aws/karpenter/karpenter", version="1.14.1", app_version="1.14.1")
KARPENTER_CRD_CHART = HelmChart(chart="oci://public.ecr.aws/karpenter/karpenter-crd", version="1.14.1", app_version="1.14.1")

HELM_CHARTS = (NEURON_HELM_CHART, EFA_DEVICE_PLUGIN_CHART, VOLCANO_CHART, FSX_CSI_CHART, KARPENTER_CHART, KARPENTER_CRD_CHART)
IMAGES = (ETCD_IMAGE, TENSORBOARD_IMAGE)

# The deploy runner's build image: CodeBuild's curated Ubuntu 22.04 image (aws/aws-codebuild-docker-images
# ubuntu/standard/7.0).
DEPLOY_RUNNER_IMAGE = "aws/codebuild/standard:7.0"
