"""What every Trainium node boots and how long it lives, whichever kind of group provisions it: the Neuron AMI at the
stack's one pinned release, the Neuron taint, and, for an elastic pool, a disruption policy that never empties a
node a job runs on.

A managed node group pins its image with ``releaseVersion`` (``<kubelet>-<date>``); a Karpenter EC2NodeClass with an
``al2023@v<date>`` alias (Karpenter docs, EC2NodeClass ``amiSelectorTerms``: "latest" drifts every node when AWS
publishes an AMI). Both name the amazon-eks-ami release by its date.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rules import Violation, describe
from trainium_eks import layout, versions
from trainium_eks.graph import Graph, dig, is_unknown, known
from trainium_eks.trainium_groups import NEURON_AMI_ALIAS_FAMILY, TrainiumGroup, trainium_groups

NEURON_AMI_TYPES = ("AL2023_x86_64_NEURON",)
NEURON_TAINT = (layout.NEURON_TAINT_KEY, layout.NEURON_TAINT_VALUE)
TAINT_EFFECTS = (layout.NEURON_TAINT_EFFECT_EKS, layout.NEURON_TAINT_EFFECT_K8S)


def neuron_ami(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        if group.elastic:
            yield from _elastic_neuron_ami(group)
            continue
        ami_type = group.node.props.get("amiType")
        if is_unknown(ami_type):
            continue
        if ami_type not in NEURON_AMI_TYPES:
            yield Violation(
                group.node.urn,
                f"{describe(group.node)} runs {group.spec.name} on AMI type '{ami_type}'; use "
                f"{NEURON_AMI_TYPES[0]} (EKS-optimised AL2023 with the Neuron and EFA drivers)",
            )


def _elastic_neuron_ami(group: TrainiumGroup) -> Iterator[Violation]:
    """An elastic pool boots the Neuron AMI when its EC2NodeClass selects the EKS AL2023 family by alias: Karpenter then
    resolves the Neuron variant for accelerated types (karpenter-provider-aws v1.14.1 amifamily). Selecting an AMI
    by ID, name, tag or SSM parameter leaves the Neuron driver to chance."""
    if group.template is None:
        return
    terms = dig(group.template.props, "spec", "amiSelectorTerms")
    if not known(terms):
        return
    aliases = [t.get("alias") for t in terms if isinstance(t, dict)] if isinstance(terms, list) else []
    if not aliases or not all(isinstance(a, str) and a.startswith(NEURON_AMI_ALIAS_FAMILY + "@") for a in aliases):
        yield Violation(
            group.template.urn,
            f"{describe(group.template)} selects AMIs {terms} for {group.spec.name}; select the EKS-optimised AL2023 "
            f"family by alias ({NEURON_AMI_ALIAS_FAMILY}@<release>), for which Karpenter picks the Neuron variant",
        )


def node_image_pinned(graph: Graph, config: dict) -> Iterator[Violation]:
    pinned = {}
    for group in trainium_groups(graph):
        image = group.pinned_release()
        if image is None:
            continue
        date, spelled = image
        blamed = group.template if group.elastic else group.node
        if date is None:
            yield Violation(
                blamed.urn,
                f"{describe(blamed)} boots {group.spec.name} nodes with {spelled}; pin the stack's node image release "
                "(nodeImageRelease): a floating image gives a new node whatever driver EKS published that day",
            )
        else:
            pinned.setdefault(date, []).append(blamed)
    if len(pinned) > 1:
        for date, resources in sorted(pinned.items()):
            for resource in resources:
                yield Violation(
                    resource.urn,
                    f"{describe(resource)} pins node image release v{date} while other Trainium groups pin "
                    f"{', '.join('v' + d for d in sorted(pinned) if d != date)}; give every group the stack's one release",
                )


def neuron_driver_compatible(graph: Graph, config: dict) -> Iterator[Violation]:
    """The Neuron driver of the release a group boots must be one the training image's runtime initialises on
    (``versions.TRAINING_RUNTIME``): a mismatch fails ``nrt_init`` on every node, whatever the job."""
    runtime = versions.TRAINING_RUNTIME
    for group in trainium_groups(graph):
        image = group.pinned_release()
        if image is None or image[0] is None:
            continue  # a preview's unknown, or no pin at all, which trainium-node-image-pinned reports
        blamed = group.template if group.elastic else group.node
        release = versions.node_image_release(image[0])
        if release is None:
            yield Violation(
                blamed.urn,
                f"{describe(blamed)} boots node image release v{image[0]}, whose Neuron driver trainium_eks/versions.py "
                f"does not record; pin one of {', '.join(versions.NODE_IMAGE_RELEASES)} so that its driver is checked",
            )
        elif not runtime.runs_on(release.neuron_driver):
            yield Violation(
                blamed.urn,
                f"{describe(blamed)} boots node image release {release.tag} with Neuron driver {release.neuron_driver}, but "
                f"the training image's runtime {runtime.library} (Neuron SDK {runtime.sdk}) initialises on drivers "
                f"{runtime.drivers}; pin a release whose driver it runs on, or move the image to a runtime for this driver",
            )


def neuron_taint(graph: Graph, config: dict) -> Iterator[Violation]:
    for group in trainium_groups(graph):
        taints = group.taints()
        if any((t.get("key"), t.get("value")) == NEURON_TAINT and t.get("effect") in TAINT_EFFECTS for t in taints):
            continue
        where = "spec.template.spec.taints" if group.elastic else "taints"
        yield Violation(
            group.node.urn,
            f"{describe(group.node)} lacks the taint {layout.NEURON_TAINT_KEY}={layout.NEURON_TAINT_VALUE}:"
            f"{layout.NEURON_TAINT_EFFECT_K8S}, so any pod can take a {group.spec.name}; add it to {where}",
        )


def pool_keeps_busy_nodes(graph: Graph, config: dict) -> Iterator[Violation]:
    """Karpenter docs, Disruption: WhenEmpty consolidates only nodes without workload pods; expiration is forceful and
    ignores karpenter.sh/do-not-disrupt; with a terminationGracePeriod, drift and expiry force-delete such pods."""
    for group in trainium_groups(graph):
        if not group.elastic:
            continue
        spec = group.node.props.get("spec") or {}
        checks = (
            (dig(spec, "disruption", "consolidationPolicy"), "WhenEmpty", "disruption.consolidationPolicy", "WhenEmpty"),
            (dig(spec, "template", "spec", "expireAfter"), "Never", "template.spec.expireAfter", "Never"),
        )
        for value, wanted, path, fix in checks:
            if not is_unknown(value) and value != wanted:
                yield Violation(
                    group.node.urn,
                    f"{describe(group.node)} sets {path} to {value!r}, which can take a node from a running training "
                    f"job; set it to {fix}",
                )
        grace = dig(spec, "template", "spec", "terminationGracePeriod")
        if grace is not None and not is_unknown(grace):
            yield Violation(
                group.node.urn,
                f"{describe(group.node)} sets template.spec.terminationGracePeriod {grace!r}, after which Karpenter "
                "force-deletes the training pods of a drifted node; remove it",
            )
