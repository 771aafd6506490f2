"""A Kubernetes upgrade as the README's "Upgrading" walks it: each step a stack-file edit whose diff shows what it
replaces, and whose plan every pack accepts."""

from __future__ import annotations

import dataclasses
import json

import pytest
from generation_mutations import TRN2, TWO_GENERATIONS
from support import evaluate, platform, run_preflight, settings, stack_copy

from preflight import analysis, check, cli, diff, impact_report
from trainium_eks import layout, tokens, versions
from trainium_eks.config import ConfigError, parse

OLD, NEW = "1.34", "1.35"

pytestmark = pytest.mark.stacks

STEPS = {
    "before": {"kubernetesVersion": OLD},
    "control plane and add-ons": {
        "kubernetesVersion": NEW,
        "systemNodeKubernetesVersion": OLD,
        "trainiumNodeKubernetesVersion": OLD,
    },
    "system nodes": {"kubernetesVersion": NEW, "trainiumNodeKubernetesVersion": OLD},
    "trainium nodes": {"kubernetesVersion": NEW},
}


def walk(stack: str) -> dict[str, dict]:
    return {step: evaluate(stack, **overrides).to_json() for step, overrides in STEPS.items()}


def changes(plans: dict[str, dict], step: str) -> tuple[diff.Impact, dict[str, diff.Change]]:
    names = list(plans)
    before = plans[names[names.index(step) - 1]]
    impact = diff.compare(before, plans[step])
    return impact, {c.urn: c for c in impact.changed}


def of_type(changed: dict[str, diff.Change], plan: dict, resource_type: str) -> dict[str, diff.Change]:
    types = {r["urn"]: r["type"] for r in plan["resources"]}
    return {urn: c for urn, c in changed.items() if types[urn] == resource_type}


def node_groups(plan: dict, role: str) -> dict[str, dict]:
    """The node groups whose nodes carry ``trainium-eks/node-role=<role>`` (system or trainium), by URN."""
    return {
        r["urn"]: r["inputs"]
        for r in plan["resources"]
        if r["type"] == tokens.EKS_NODE_GROUP and r["inputs"]["labels"][layout.NODE_ROLE_LABEL] == role
    }


def add_later_release(monkeypatch, stack: versions.TrainingStack, tag: str = "v20991231") -> str:
    """Record a release after every real one, with the builds and driver of ``stack``'s release: what adding AWS's next
    release to trainium_eks/versions.py looks like (this one is the test's own), for this process only."""
    release = versions.NODE_IMAGE_RELEASES[stack.default_node_image_release]
    monkeypatch.setitem(versions.NODE_IMAGE_RELEASES, tag, dataclasses.replace(release, tag=tag, source="a test's release"))
    return tag


def configured_groups(stack: str) -> list[dict]:
    return json.loads(settings(stack).config["trainium-eks:trainiumNodeGroups"])


@pytest.fixture(scope="module")
def prod() -> dict[str, dict]:
    return walk("prod")


@pytest.fixture(scope="module")
def staging() -> dict[str, dict]:
    return walk("staging")


@pytest.mark.parametrize("step", list(STEPS))
def test_every_step_of_the_upgrade_passes_every_pack(prod, step):
    result = check.check_plan(prod[step], check.load_policy_config("prod"), f"prod-{step}.json")
    assert not result.mandatory, result.mandatory


def test_the_control_plane_step_moves_the_cluster_and_its_add_ons_and_no_node(prod):
    impact, changed = changes(prod, "control plane and add-ons")
    plan = prod["control plane and add-ons"]
    (cluster,) = of_type(changed, plan, tokens.EKS_COMPONENT_CLUSTER).values()
    assert ("version", OLD, NEW) in cluster.values and not cluster.replace
    addons = of_type(changed, plan, tokens.EKS_ADDON)
    assert addons and all(c.paths == ("addonVersion",) and not c.replace for c in addons.values())
    assert not any(c.nodes for c in impact.changed), "no node is replaced while the nodes are held"
    assert not impact.losses and not impact.added and not impact.removed


def test_the_system_step_rolls_the_system_nodes_only(prod):
    impact, changed = changes(prod, "system nodes")
    (system,) = changed.values()
    assert system.urn in node_groups(prod["system nodes"], layout.SYSTEM_NODE_ROLE) and system.nodes == diff.ROLLING
    assert system.values == (("version", OLD, NEW),)


def test_the_trainium_step_rolls_each_trainium_group_onto_the_pinned_release_and_ends_where_a_fresh_stack_starts(prod):
    impact, changed = changes(prod, "trainium nodes")
    trainium = node_groups(prod["trainium nodes"], layout.TRAINIUM_NODE_ROLE)
    assert trainium and set(changed) == set(trainium)
    assert all(c.nodes == diff.ROLLING and not c.replace for c in changed.values())
    # each group on its own pinned release, at the new version's build
    pinned = {g.name: g.node_image.release_version for g in platform("prod", kubernetesVersion=NEW).trainium_node_groups}
    assert {i["labels"][layout.NODE_GROUP_LABEL]: (i["version"], i["releaseVersion"]) for i in trainium.values()} == {
        name: (NEW, pinned[name]) for name in (i["labels"][layout.NODE_GROUP_LABEL] for i in trainium.values())
    }
    fresh = evaluate("prod", kubernetesVersion=NEW).to_json()
    assert not diff.compare(fresh, prod["trainium nodes"]).changed


def test_elastic_pools_follow_the_control_plane_by_drift_and_the_diff_says_so(staging):
    impact, _ = changes(staging, "control plane and add-ons")
    node_classes = [r["urn"] for r in staging["before"]["resources"] if r["type"] == tokens.KARPENTER_NODE_CLASS]
    assert node_classes and [d["urn"] for d in impact.drifts] == sorted(node_classes)
    assert all(NEW in d["why"] for d in impact.drifts)
    later, _ = changes(staging, "trainium nodes")
    assert not later.drifts, "holding managed groups back changes nothing for the pools"


def test_diff_prints_the_pools_drift_on_a_control_plane_upgrade(tmp_path):
    baseline = stack_copy(tmp_path, "staging", lambda config: config.update({"trainium-eks:kubernetesVersion": OLD}))
    text = run_preflight("diff", "staging", "--against", baseline).stdout
    assert f'version: "{OLD}" -> "{NEW}"' in text
    assert "nodes of kubernetes:karpenter.k8s.aws/v1:EC2NodeClass" in text and f"Kubernetes {NEW} build" in text


def test_moving_a_managed_group_to_an_older_release_or_version_is_reported_as_refused(prod, monkeypatch, tmp_path, capsys):
    later = {
        stack: add_later_release(monkeypatch, versions.TRAINING_STACKS[stack], f"v2099123{i}")
        for i, stack in enumerate({g.training_stack for g in platform("prod").trainium_node_groups})
    }

    def pin_later(groups: list[dict]) -> list[dict]:
        stacks = {g.name: g.training_stack for g in platform("prod").trainium_node_groups}
        return [{**g, "nodeImageRelease": later[stacks[g["name"]]]} for g in groups]

    impact = diff.compare(
        evaluate("prod", trainiumNodeGroups=pin_later(configured_groups("prod"))).to_json(), evaluate("prod").to_json()
    )
    trainium = node_groups(evaluate("prod").to_json(), layout.TRAINIUM_NODE_ROLE)
    assert {r["urn"] for r in impact.refused} == set(trainium)
    assert all("new name" in r["why"] for r in impact.refused)
    back = diff.compare(evaluate("prod").to_json(), evaluate("prod", trainiumNodeKubernetesVersion=OLD).to_json())
    assert {r["urn"] for r in back.refused} == set(trainium) and all(f"version {NEW} -> {OLD}" in r["why"] for r in back.refused)
    assert not any(changes(prod, step)[0].refused for step in list(STEPS)[1:]), "an upgrade's steps go forward"
    # `preflight diff` in this process, where the later release is recorded
    key = "trainium-eks:trainiumNodeGroups"
    baseline = stack_copy(tmp_path, "prod", lambda config: config.update({key: pin_later(config[key])}))
    assert cli.main(["diff", "prod", "--against", baseline]) == cli.REFUSED
    assert "REFUSED BY EKS" in capsys.readouterr().out


@pytest.mark.parametrize("provisioning", ["karpenter", "managed"])
def test_a_new_release_on_one_group_rolls_that_groups_nodes_only_and_the_diff_names_the_group(provisioning, monkeypatch):
    sizes = {"minSize": 2, "desiredSize": 2} if provisioning == "managed" else {}
    groups = [{**g, "provisioning": provisioning, **sizes} for g in TWO_GENERATIONS["trainiumNodeGroups"]]
    index = next(i for i, g in enumerate(groups) if g["instanceType"] == TRN2.name)
    moved_group, kept_group = groups[index]["name"], groups[1 - index]["name"]
    stack = versions.training_stack_of(TRN2.generation)
    newer = add_later_release(monkeypatch, stack)
    moved = [{**g, "nodeImageRelease": newer} if i == index else g for i, g in enumerate(groups)]
    before, after = (
        analysis.annotate(evaluate("staging", fixture=True, **{**TWO_GENERATIONS, "trainiumNodeGroups": g}).to_json())
        for g in (groups, moved)
    )
    impact = diff.compare(before, after)
    # One resource changes, the moved group's node template: only its nodes are replaced.
    (change,) = impact.changed
    name = {r["urn"]: r["name"] for r in after["resources"]}[change.urn]
    assert f"-{moved_group}-" in name and change.nodes == (diff.DRIFT if provisioning == "karpenter" else diff.ROLLING)
    assert not change.replace and not impact.refused and not impact.drifts and not impact.losses
    (move,) = impact.node_images
    assert move["group"] == moved_group and move["release"] == {"old": stack.default_node_image_release, "new": newer}
    assert f"the nodes of {kept_group} stay as they are" in move["why"] and change.nodes in move["why"]
    text = impact_report.impact("staging", "before", impact, after, before)
    assert f"nodes of group {moved_group} (" in text and f"{stack.default_node_image_release} (Neuron driver" in text


def test_an_upgrade_holds_each_node_kind_at_its_own_version():
    cfg = parse(settings("staging", trainiumNodeKubernetesVersion="1.34").config, stack="staging")
    assert cfg.cluster.kubernetes_version == "1.35" and cfg.cluster.system_kubernetes_version == "1.35"
    assert cfg.trainium_node_groups
    for trainium in cfg.trainium_node_groups:
        assert trainium.node_image.kubernetes_version == "1.34" and trainium.node_image.release_version.startswith("1.34.")


def test_a_release_without_a_build_for_the_nodes_version_is_refused_naming_the_group(monkeypatch):
    groups = TWO_GENERATIONS["trainiumNodeGroups"]
    index = next(i for i, g in enumerate(groups) if g["instanceType"] != TRN2.name)
    stack = versions.training_stack_of("trn1")
    release = versions.NODE_IMAGE_RELEASES[stack.default_node_image_release]
    only_135 = dataclasses.replace(release, kubelet_versions={"1.35": release.kubelet_versions["1.35"]})
    monkeypatch.setitem(versions.NODE_IMAGE_RELEASES, release.tag, only_135)
    config = settings("staging", fixture=True, trainiumNodeKubernetesVersion="1.34", **TWO_GENERATIONS).config
    with pytest.raises(ConfigError, match=f"{release.tag} has no Kubernetes 1.34 build") as caught:
        parse(config, stack="staging")
    assert caught.value.key == f"trainium-eks:trainiumNodeGroups[{index}].nodeImageRelease"
