"""What every Trainium node boots and how long it lives, whichever kind of group provisions it: the Neuron AMI at a
release the group pins, whose Neuron driver the runtime of the group's training stack (one that trains its
generation) initialises on, the Neuron taint, and, for an elastic pool, a disruption policy that never empties a node
a job runs on.

A managed node group pins its image with ``releaseVersion`` (``<kubelet>-<date>``); a Karpenter EC2NodeClass with an
``al2023@v<date>`` alias (Karpenter docs, EC2NodeClass ``amiSelectorTerms``: "latest" drifts every node when AWS
publishes an AMI). Both name the amazon-eks-ami release by its date.
"""

from __future__ import annotations

from collections.abc import Iterator

from plan_graph.graph import Graph, Node, dig, is_unknown, known
from plan_graph.trainium_groups import NEURON_AMI_ALIAS_FAMILY, TrainiumGroup, trainium_groups
from policies.rules import Violation, describe
from trainium_eks import karpenter_termination, layout, versions

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
    """Each group pins a release of its own (each generation boots the release of its training stack), never the
    day's latest."""
    for group in trainium_groups(graph):
        image = group.pinned_release()
        if image is None or image[0] is not None:
            continue
        blamed = group.template if group.elastic else group.node
        yield Violation(
            blamed.urn,
            f"{_named(group, blamed)} boots {group.spec.name} nodes with {image[1]}; pin the group's node image release "
            "(trainiumNodeGroups[].nodeImageRelease, by default its training stack's): a floating image gives a new "
            "node whatever driver EKS published that day",
        )


def neuron_driver_compatible(graph: Graph, config: dict) -> Iterator[Violation]:
    """The Neuron driver of the release a group boots must be one the runtime of the group's own training stack (its
    nodes' ``layout.TRAINING_STACK_LABEL``) initialises on: a mismatch fails ``nrt_init`` on every node, whatever the
    job. A release whose driver no source states, or that the platform does not record, is refused: nothing shows
    that the runtime initialises on it."""
    for group in trainium_groups(graph):
        stack, image = group.training_stack(), group.pinned_release()
        if stack is None or group.spec.generation not in stack.generations or image is None or image[0] is None:
            continue  # unknown, or what trainium-training-stack-fits-generation or trainium-node-image-pinned reports
        release, runtime = versions.node_image_release(image[0]), stack.runtime
        if release is None:
            boots = f"node image release v{image[0]}, whose Neuron driver trainium_eks/versions.py does not record"
        elif release.neuron_driver is None:
            boots = f"node image release {release.tag}, whose Neuron driver no source states (trainium_eks/versions.py)"
        elif not runtime.runs_on(release.neuron_driver):
            boots = f"node image release {release.tag} with Neuron driver {release.neuron_driver}"
        else:
            continue
        fits = versions.releases_running(runtime)
        blamed = group.template if group.elastic else group.node
        yield Violation(
            blamed.urn,
            f"{_named(group, blamed)} boots {boots}, but its nodes serve training stack {stack.name}, whose runtime "
            f"{runtime.library} (Neuron SDK {runtime.sdk}) initialises on drivers {runtime.drivers}: pin "
            f"{' or '.join(fits) or 'a release with such a driver'} (the group's nodeImageRelease in trainiumNodeGroups; "
            f"unset, the stack's {stack.default_node_image_release})",
        )


def training_stack_fits_generation(graph: Graph, config: dict) -> Iterator[Violation]:
    """A group's nodes name the training stack they serve (``layout.TRAINING_STACK_LABEL``), and it is one that trains
    the instance type's generation: the launcher runs that stack's image on them, and the driver rule checks their
    node image against its runtime."""
    for group in trainium_groups(graph):
        value = group.labels().get(layout.TRAINING_STACK_LABEL)
        if not group.labels_known() or is_unknown(value):
            continue
        generation = group.spec.generation
        stack = versions.TRAINING_STACKS.get(value) if isinstance(value, str) else None
        if value is None:
            gives = f"no {layout.TRAINING_STACK_LABEL} label, so nothing says which training image and runtime they serve"
        elif stack is None:
            gives = f"{layout.TRAINING_STACK_LABEL}={value!r}, a training stack trainium_eks/versions.py does not declare"
        elif generation not in stack.generations:
            gives = (
                f"training stack {stack.name} (its {stack.backend.name} image :{stack.image_tag}), which trains "
                f"{', '.join(stack.generations)}, not {generation}"
            )
        else:
            continue
        fits = [s.name for s in versions.TRAINING_STACKS.values() if generation in s.generations]
        fix = (
            f"give them {' or '.join(fits)} (the group's trainingStack in trainiumNodeGroups; unset, its generation's)"
            if fits
            else f"no training stack of trainium_eks/versions.py trains {generation}"
        )
        yield Violation(group.node.urn, f"{_named(group, group.node)} gives its {group.spec.name} nodes {gives}; {fix}")


def _named(group: TrainiumGroup, resource: Node) -> str:
    """A resource of a group as messages name it: its type and name, and the platform's name of the group if known."""
    return describe(resource) + (f" (Trainium group {group.name})" if group.name else "")


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
    """An elastic pool takes no node from a running job by choice, and drains each training pod in full when it must
    take one (``trainium_eks.karpenter_termination`` models both, with the Karpenter lines it follows): it
    consolidates ``WhenEmpty`` only, never expires nodes, holds drift at a budget of 0 nodes (a
    terminationGracePeriod lets drift past do-not-disrupt pods), and sets the terminationGracePeriod after which the
    do-not-disrupt pods of a node Karpenter must take are deleted, each its own grace period before: on a Capacity
    Block's node within the block's drain window, elsewhere at least the longest grace period the launcher sets."""
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
        budgets = dig(spec, "disruption", "budgets")
        if known(budgets) and not karpenter_termination.drift_held(budgets):
            yield Violation(
                group.node.urn,
                f"{describe(group.node)} lets drift replace a node a training job runs on (its terminationGracePeriod "
                'takes drift past karpenter.sh/do-not-disrupt); add disruption.budgets {nodes: "0", reasons: [Drifted]}',
            )
        problem = _grace_problem(dig(spec, "template", "spec", "terminationGracePeriod"), group.in_capacity_block())
        if problem:
            yield Violation(group.node.urn, f"{describe(group.node)} {problem}")


def _grace_problem(grace, capacity_block: bool) -> str | None:
    """What is wrong with a pool's terminationGracePeriod, in words with the fix; None where it is right."""
    if is_unknown(grace):
        return None
    wanted = karpenter_termination.pool_termination_grace_seconds(capacity_block)
    fix = f'set template.spec.terminationGracePeriod to "{wanted}s"'
    if grace is None:
        return (
            "sets no template.spec.terminationGracePeriod, so Karpenter never deletes the karpenter.sh/do-not-disrupt "
            "training pods of a node it must take (a Capacity Block's end, an interruption): the instance goes with "
            f"them still training and the run loses every step since its last checkpoint; {fix}"
        )
    seconds = karpenter_termination.duration_seconds(grace) if isinstance(grace, str) else None
    if seconds is None:
        return f"sets template.spec.terminationGracePeriod to {grace!r}, not a duration; {fix}"
    if capacity_block and seconds > wanted:
        return (
            f"sets template.spec.terminationGracePeriod {grace!r} on a Capacity Block's nodes: EC2 terminates them "
            f"{wanted} s after Karpenter starts their drain, before the pods' deletion at that period less their grace "
            f"period ends; {fix}"
        )
    if seconds < wanted:
        return (
            f"sets template.spec.terminationGracePeriod {grace!r}, shorter than the {wanted} s grace period the "
            f"launcher may give a training pod there, whose drain Karpenter would cut short; {fix}"
        )
    return None
