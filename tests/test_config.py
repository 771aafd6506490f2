"""Stack configuration: every bad input is rejected with one line that names the key and the fix.

The cases edit the fixture stacks (tests/fixture_stacks), whose shape they know; the shipped stacks (or
``$PREFLIGHT_STACK_DIR``'s) are only parsed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from support import RESERVATION, STACKS, node_group_config, offering, one_group, settings, sold_as

from trainium_eks import catalog, hardware, versions
from trainium_eks.config import ConfigError, parse

GROUP = node_group_config("trn1-32xl", "trn1.32xlarge")
POOL = {"name": "trn1-32xl", "instanceType": "trn1.32xlarge", "provisioning": "karpenter", "maxSize": 2}

# Node image releases and training stacks, named by what versions.py says of them rather than by tag.
UNSOURCED = next(tag for tag, release in versions.NODE_IMAGE_RELEASES.items() if release.neuron_driver is None)
XLA, NATIVE = versions.training_stack_of("trn1"), versions.training_stack_of("trn2")
XLA_FIX = f"pin one of {XLA.default_node_image_release}"
NATIVE_FIX = f"pin one of {NATIVE.default_node_image_release}"

# trn2.48xlarge where the catalog sells it, in Capacity Blocks only, and the block a group of it needs there (support.py);
# and a region that sells trn2 in no way.
TRN2_TYPE = catalog.INSTANCE_TYPES["trn2.48xlarge"]
TRN2_WHERE = offering(TRN2_TYPE.name)
TRN2_REGION, BLOCK = TRN2_WHERE["aws:region"], sold_as(TRN2_TYPE.name)["capacityReservation"]
ODCR = {**RESERVATION, "azId": BLOCK["azId"]}
UNSOLD = next(
    {"aws:region": region, "trainiumAzId": az_ids[0]}
    for region, az_ids in catalog.REGIONS.items()
    if not any(TRN2_TYPE.offered_in(region, az_id, capacity_block=True) for az_id in az_ids)
)


def pool(**group) -> dict:
    """Overrides: the fixture's one elastic trn1 group with ``group``'s keys."""
    return {"trainiumNodeGroups": [{**POOL, **group}]}


def trn2(**group_and_stack) -> dict:
    """Overrides: one elastic trn2.48xlarge group in a Capacity Block where the catalog sells trn2, with ``group``'s keys
    (None drops one) and the stack keys (``aws:region``, ``trainiumAzId``) given."""
    stack = {k: group_and_stack.pop(k) for k in ("aws:region", "trainiumAzId") if k in group_and_stack}
    group = {"name": "trn2-48xl", "instanceType": TRN2_TYPE.name, "provisioning": "karpenter", "maxSize": 2}
    group = {k: v for k, v in {**group, "capacityReservation": BLOCK, **group_and_stack}.items() if v is not None}
    return {"trainiumNodeGroups": [group], **TRN2_WHERE, **stack}


# (overrides applied to the fixture staging stack, the key the error must name, words the message must contain)
BAD_INPUTS = [
    ({"natGateway": "single"}, "trainium-eks:natGateway", "did you mean 'natGateways'"),
    ({"systemNodeMaxSize": "lots"}, "trainium-eks:systemNodeMaxSize", "expected an integer"),
    ({"systemNodeMinSize": 5}, "trainium-eks:systemNodeMinSize", "minSize <= maxSize"),
    ({"endpointPublicAccess": "yes"}, "trainium-eks:endpointPublicAccess", "true or false"),
    ({"trainiumNodeGroups": [{**GROUP, "desiredSize": "two"}]}, "trainiumNodeGroups[0].desiredSize", "expected an integer"),
    ({"trainiumNodeGroups": [{**GROUP, "desiredSize": 3}]}, "trainiumNodeGroups[0].desiredSize", "between minSize and maxSize"),
    ({"trainiumNodeGroups": [{**GROUP, "minSize": -1, "desiredSize": 0}]}, "trainiumNodeGroups[0].minSize", "negative"),
    (
        {"trainiumNodeGroups": [{**GROUP, "minSize": 0, "desiredSize": 0, "maxSize": 0}]},
        "trainiumNodeGroups[0].maxSize",
        "at least one",
    ),
    ({"trainiumNodeGroups": [{**GROUP, "instanceType": "p5.48xlarge"}]}, "trainiumNodeGroups[0].instanceType", "trn1.32xlarge"),
    ({"trainiumNodeGroups": [{**GROUP, "efa": False}]}, "trainiumNodeGroups[0].efa", "must run with EFA"),
    (
        {"trainiumNodeGroups": [node_group_config("small", "trn1.2xlarge", efa=True)]},
        "trainiumNodeGroups[0].efa",
        "no EFA support",
    ),
    ({"trainiumNodeGroups": [{**GROUP, "efaa": True}]}, "trainiumNodeGroups[0].efaa", "did you mean 'efa'"),
    ({"trainiumNodeGroups": [GROUP, GROUP]}, "trainiumNodeGroups[1].name", "used twice"),
    ({"trainiumNodeGroups": []}, "trainium-eks:trainiumNodeGroups", "at least one"),
    ({"trainiumNodeGroups": {"name": "x"}}, "trainium-eks:trainiumNodeGroups", "expected a list"),
    ({"trainiumNodeGroups": None}, "trainium-eks:trainiumNodeGroups", "missing"),
    ({"trainiumNodeGroups": [{**GROUP, "labels": {"trainium-eks/node-role": "x"}}]}, "labels.trainium-eks/node-role", "reserved"),
    (
        {"trainiumNodeGroups": [{**GROUP, "capacityReservation": {**RESERVATION, "azId": "use1-az1"}}]},
        "capacityReservation.azId",
        "differs from trainiumAzId",
    ),
    ({"trainiumAzId": "use1-az2"}, "trainiumNodeGroups[0].instanceType", "not offered in use1-az2"),
    ({"trainiumAzId": "us-east-1a"}, "trainium-eks:trainiumAzId", "AZ IDs, not names"),
    ({"aws:region": "eu-west-1"}, "aws:region", "no Trainium offerings"),
    ({"aws:region": None}, "aws:region", "pulumi config set aws:region"),
    ({"environment": None}, "trainium-eks:environment", "pulumi config set environment"),
    ({"environment": "Prod Env"}, "trainium-eks:environment", "DNS label"),
    ({"vpcCidr": "10.0.0.0/8"}, "trainium-eks:vpcCidr", "/16"),
    ({"vpcCidr": "not-a-cidr"}, "trainium-eks:vpcCidr", "IPv4 network"),
    ({"availabilityZoneCount": 1}, "trainium-eks:availabilityZoneCount", "two AZs"),
    ({"natGateways": "many"}, "trainium-eks:natGateways", "single or perAz"),
    ({"existingPrivateSubnetIds": ["subnet-0123456789abcdef0"]}, "trainium-eks:existingPrivateSubnetIds", "existingVpcId"),
    ({"existingVpcId": "vpc-0123456789abcdef0"}, "trainium-eks:existingPrivateSubnetIds", "two or more"),
    ({"kubernetesVersion": "1.3"}, "trainium-eks:kubernetesVersion", "1.35"),
    ({"endpointPublicAccess": True, "publicAccessCidrs": []}, "trainium-eks:publicAccessCidrs", "0.0.0.0/0"),
    ({"publicAccessCidrs": ["300.0.0.0/8"]}, "trainium-eks:publicAccessCidrs[0]", "not a CIDR"),
    ({"clusterAdminPrincipalArns": ["admin"]}, "trainium-eks:clusterAdminPrincipalArns[0]", "IAM role or user ARN"),
    ({"systemNodeInstanceType": "trn1.32xlarge"}, "trainium-eks:systemNodeInstanceType", "m6i"),
    ({"volcanoQueues": [{"name": "default"}]}, "volcanoQueues[0].name", "built-in 'default'"),
    ({"volcanoQueues": [{"name": "q", "neuronShare": 1.5}]}, "volcanoQueues[0].neuronShare", "(0, 1]"),
    ({"volcanoQueues": [{"name": "q", "weight": 0}]}, "volcanoQueues[0].weight", "1..65535"),
    ({"volcanoQueues": []}, "trainium-eks:volcanoQueues", "at least one queue"),
    ({"fsxDeploymentType": "PERSISTENT_9"}, "trainium-eks:fsxDeploymentType", "PERSISTENT_2"),
    ({"fsxStorageCapacityGiB": 1000}, "trainium-eks:fsxStorageCapacityGiB", "multiple of 2400"),
    ({"fsxThroughputPerTiB": 0}, "trainium-eks:fsxThroughputPerTiB", "50, 100, 200"),
    ({"fsxDataRepositoryPath": "s3://bucket/x"}, "trainium-eks:fsxDataRepositoryPath", "PERSISTENT_2"),
    ({"fsxClaimName": "FSx_Claim"}, "trainium-eks:fsxClaimName", "DNS label"),
    ({"jobNamespace": "kube-jobs"}, "trainium-eks:jobNamespace", "outside kube-"),
    ({"ecrRepositoryName": "Bad Name"}, "trainium-eks:ecrRepositoryName", "valid ECR name"),
    ({"etcdStorageGiB": 0}, "trainium-eks:etcdStorageGiB", "1..100"),
    # AWS tag rules: a mapping given for a string key, characters a tag value cannot hold, an empty owner.
    ({"owner": {"team": "ml"}}, "trainium-eks:owner", "not a valid AWS tag value"),
    ({"costCenter": "ml#research"}, "trainium-eks:costCenter", "not a valid AWS tag value"),
    ({"owner": "  "}, "trainium-eks:owner", "empty"),
    # Kubernetes label rules.
    ({"trainiumNodeGroups": [{**GROUP, "labels": {"team": "n l p"}}]}, "labels.team", "not a Kubernetes label value"),
    ({"trainiumNodeGroups": [{**GROUP, "labels": {"-team": "nlp"}}]}, "labels.-team", "not a Kubernetes label key"),
    ({"trainiumNodeGroups": [{**GROUP, "labels": {"team": 3}}]}, "labels.team", "expected a string"),
    # CIDRs by meaning, S3 URLs, duplicates, upper bounds.
    ({"vpcCidr": "100.64.0.0/16"}, "trainium-eks:vpcCidr", "outside the private ranges"),
    ({"publicAccessCidrs": ["10.1.0.0/16"]}, "trainium-eks:publicAccessCidrs[0]", "private, shared, loopback or link-local"),
    ({"publicAccessCidrs": ["198.51.100.0/24", "198.51.100.0/24"]}, "trainium-eks:publicAccessCidrs", "twice"),
    ({"fsxDataRepositoryPath": "s3://Bad_Bucket/x"}, "trainium-eks:fsxDataRepositoryPath", "not an S3 URL"),
    (
        {"existingPrivateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef0"]},
        "trainium-eks:existingPrivateSubnetIds",
        "twice",
    ),
    ({"etcdMembers": 4}, "trainium-eks:etcdMembers", "1, 3 or 5"),
    ({"etcdMembers": "three"}, "trainium-eks:etcdMembers", "expected an integer"),
    ({"tensorboard": "yes"}, "trainium-eks:tensorboard", "true or false"),
    # Monitoring: a topic ARN by shape, alarms only with the add-on whose metrics they read, retention by the API's list.
    ({"alarmTopicArn": "ml-platform-alerts"}, "trainium-eks:alarmTopicArn", "not an SNS topic ARN"),
    ({"cloudWatchObservability": False}, "trainium-eks:alarmTopicArn", "turn cloudWatchObservability on"),
    ({"cloudWatchObservability": "on"}, "trainium-eks:cloudWatchObservability", "true or false"),
    ({"cloudWatchLogRetentionDays": 0}, "trainium-eks:cloudWatchLogRetentionDays", "not a CloudWatch Logs retention"),
    ({"cloudWatchLogRetentionDays": 10}, "trainium-eks:cloudWatchLogRetentionDays", "14, 30"),
    # A retired key says what replaced it.
    ({"neuronMonitor": True}, "trainium-eks:neuronMonitor", "nodeMonitoringAgent"),
    ({"volcanoQueues": [{"name": "q", "neuronShare": "half"}]}, "volcanoQueues[0].neuronShare", "expected a number"),
    ({"volcanoQueues": [{"name": "q"}, {"name": "q"}]}, "volcanoQueues[1].name", "taken"),
    ({"volcanoQueues": [{"name": "q", "weigth": 2}]}, "volcanoQueues[0].weigth", "did you mean 'weight'"),
    ({"ciRunnerRepository": "https://github.com/o/r"}, "trainium-eks:ciRunnerRepository", "use owner/name"),
    (
        {"ciRunnerConnectionArn": "arn:aws:iam::111122223333:role/x"},
        "trainium-eks:ciRunnerConnectionArn",
        "not a CodeConnections",
    ),
    ({"ciRunnerConnectionArn": ""}, "trainium-eks:ciRunnerConnectionArn", "set both ciRunner keys"),
    ({"ciRunnerRepository": ""}, "trainium-eks:ciRunnerRepository", "set both ciRunner keys"),
    # Node health: repair needs the agent's conditions, and counts the EKS API accepts in an order that can act.
    ({"nodeMonitoringAgent": False}, "trainium-eks:nodeRepair", "set nodeMonitoringAgent: true, or nodeRepair: false"),
    ({"nodeRepair": "sometimes"}, "trainium-eks:nodeRepair", "true or false"),
    ({"nodeRepairMaxParallel": 2}, "trainium-eks:nodeRepairMaxParallel", "at most nodeRepairMaxUnhealthy"),
    ({"nodeRepairMaxUnhealthy": 0}, "trainium-eks:nodeRepairMaxUnhealthy", "1 or more"),
    ({"nodeRepairMaxParallel": "one"}, "trainium-eks:nodeRepairMaxParallel", "expected an integer"),
    # Elastic pools and the pinned node image.
    ({"trainiumNodeGroups": [{**POOL, "provisioning": "autoscaled"}]}, "trainiumNodeGroups[0].provisioning", "managed"),
    ({"trainiumNodeGroups": [{**POOL, "desiredSize": 1}]}, "trainiumNodeGroups[0].desiredSize", "remove desiredSize"),
    ({"trainiumNodeGroups": [{**POOL, "minSize": 2}]}, "trainiumNodeGroups[0].minSize", "elastic"),
    ({"trainiumNodeGroups": [{**POOL, "idleMinutes": 0}]}, "trainiumNodeGroups[0].idleMinutes", "1 to 1440"),
    ({"trainiumNodeGroups": [{**POOL, "idleMinutes": "soon"}]}, "trainiumNodeGroups[0].idleMinutes", "expected an integer"),
    ({"trainiumNodeGroups": [{**GROUP, "idleMinutes": 10}]}, "trainiumNodeGroups[0].idleMinutes", "provisioning: karpenter"),
    ({"trainiumNodeGroups": [{**GROUP, "minSize": None}]}, "trainiumNodeGroups[0].minSize", "fixed number of nodes"),
    # Each group's node image release: pinned, known, with a sourced driver its training stack's runtime runs on.
    (pool(nodeImageRelease="latest"), "trainiumNodeGroups[0].nodeImageRelease", "floats"),
    (pool(nodeImageRelease="al2023@latest"), "trainiumNodeGroups[0].nodeImageRelease", "floats"),
    (pool(nodeImageRelease="v20200101"), "trainiumNodeGroups[0].nodeImageRelease", XLA_FIX),
    (pool(nodeImageRelease=UNSOURCED), "trainiumNodeGroups[0].nodeImageRelease", "no source states"),
    (pool(nodeImageRelease=NATIVE.default_node_image_release), "trainiumNodeGroups[0].nodeImageRelease", XLA_FIX),
    (pool(trainingStack="jax"), "trainiumNodeGroups[0].trainingStack", "use one of"),
    # A trn2 group: its generation's stack, in a region that sells trn2, in a Capacity Block where that is how.
    (trn2(trainingStack=XLA.name), "trainiumNodeGroups[0].trainingStack", f"trains with {NATIVE.name}"),
    (trn2(nodeImageRelease=XLA.default_node_image_release), "trainiumNodeGroups[0].nodeImageRelease", NATIVE_FIX),
    (trn2(capacityReservation=None), "trainiumNodeGroups[0].capacityReservation", "Capacity Blocks only"),
    (trn2(capacityReservation=ODCR), "trainiumNodeGroups[0].capacityReservation", "Capacity Blocks only"),
    (trn2(capacityReservation=None, **UNSOLD), "trainiumNodeGroups[0].instanceType", f"a region that sells it: {TRN2_REGION}"),
    # The stack-wide release every node booted is retired: each group boots its own.
    ({"nodeImageRelease": XLA.default_node_image_release}, "trainium-eks:nodeImageRelease", "set nodeImageRelease on the groups"),
    # Nodes held back during an upgrade: never ahead of the control plane.
    ({"systemNodeKubernetesVersion": "1.36"}, "trainium-eks:systemNodeKubernetesVersion", 'use "" (kubernetesVersion)'),
    (
        {"kubernetesVersion": "1.34", "trainiumNodeKubernetesVersion": "1.35"},
        "trainium-eks:trainiumNodeKubernetesVersion",
        "upgrade the control plane first",
    ),
    (
        {"kubernetesVersion": "1.34", "systemNodeKubernetesVersion": "1.35"},
        "trainium-eks:systemNodeKubernetesVersion",
        "newer than kubernetesVersion 1.34",
    ),
    (
        {"trainiumNodeGroups": [{**POOL, "capacityReservation": {**RESERVATION, "type": "capacity-block"}}]},
        "capacityReservation.hourlyUsd",
        "missing for a Capacity Block",
    ),
    (
        {"trainiumNodeGroups": [{**POOL, "capacityReservation": {**RESERVATION, "hourlyUsd": 20.0}}]},
        "capacityReservation.hourlyUsd",
        "billed at the on-demand rate",
    ),
    (
        {"trainiumNodeGroups": [{**POOL, "maxSize": 3, "capacityReservation": RESERVATION}]},
        "trainiumNodeGroups[0].maxSize",
        "reservation's 2 instances",
    ),
    (
        {"trainiumNodeGroups": [{**POOL, "capacityReservation": {k: v for k, v in RESERVATION.items() if k != "instanceCount"}}]},
        "capacityReservation.instanceCount",
        "missing",
    ),
]


@pytest.mark.parametrize(("overrides", "key", "words"), BAD_INPUTS, ids=[case[1] + ":" + case[2] for case in BAD_INPUTS])
def test_bad_input_names_the_key_and_the_fix(overrides, key, words):
    with pytest.raises(ConfigError) as caught:
        parse(settings("staging", fixture=True, **overrides).config, stack="staging")
    message = str(caught.value)
    assert "\n" not in message
    named_key = message.split(": ")[0]
    assert named_key.endswith(key), message
    assert words in message
    assert "; " in message, "the message must carry a fix after the problem"
    assert not message.endswith("…"), "the fix must be shown whole"


def test_a_node_group_name_too_long_for_eks_with_this_stack_is_rejected():
    group = {**GROUP, "name": "trn1-32xl-" + "a" * 22}  # 32 characters: a valid name on its own
    with pytest.raises(ConfigError, match="longer than EKS's 63") as caught:
        parse(settings("staging", fixture=True, trainiumNodeGroups=[group]).config, stack="staging-with-a-long-name")
    assert caught.value.key == "trainium-eks:trainiumNodeGroups[0].name"


def test_a_stack_name_that_breaks_eks_names_is_rejected():
    with pytest.raises(ConfigError, match="cluster name") as caught:
        parse(settings("staging", fixture=True).config, stack="s" * 60)
    assert caught.value.key.startswith("stack ")


@pytest.mark.stacks
@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_parse(stack):
    cfg = parse(settings(stack).config, stack=stack)
    assert cfg.stack == stack and cfg.trainium_node_groups


def test_each_group_trains_with_its_generations_stack_on_that_stacks_release():
    both = {**trn2(), "trainiumNodeGroups": [POOL, *trn2()["trainiumNodeGroups"]], "teams": []}
    config = parse(settings("staging", fixture=True, **both).config, stack="staging")
    assert {g.spec.generation for g in config.trainium_node_groups} == set(hardware.GENERATIONS)
    for group in config.trainium_node_groups:
        stack = versions.training_stack_of(group.spec.generation)
        assert group.stack == stack and group.spec.generation in stack.generations
        assert group.node_image.release == stack.default_node_image_release
        assert stack.runtime.runs_on(group.release.neuron_driver)


@pytest.mark.parametrize("release", versions.sourced_releases())
@pytest.mark.parametrize("generation", hardware.GENERATIONS)
def test_a_group_may_pin_exactly_the_releases_whose_driver_its_runtime_runs_on(generation, release):
    instance_type = next(t for t in catalog.TRAINIUM_TYPES if catalog.INSTANCE_TYPES[t].generation == generation)
    raw = settings("staging", fixture=True, **one_group(instance_type, nodeImageRelease=release)).config
    if versions.training_stack_of(generation).runtime.runs_on(versions.NODE_IMAGE_RELEASES[release].neuron_driver):
        assert parse(raw, stack="staging").trainium_node_groups[0].node_image.release == release
    else:
        with pytest.raises(ConfigError, match="does not initialise") as caught:
            parse(raw, stack="staging")
        assert caught.value.key.endswith("trainiumNodeGroups[0].nodeImageRelease")


def releases_for(generation: str) -> list[str]:
    """The releases a group of ``generation`` may pin: sourced, with a driver its training stack's runtime runs on."""
    runtime = versions.training_stack_of(generation).runtime
    return [tag for tag in versions.sourced_releases() if runtime.runs_on(versions.NODE_IMAGE_RELEASES[tag].neuron_driver)]


REFUSED_RELEASES = [
    (generation, release)
    for generation in hardware.GENERATIONS
    for release in ("latest", "v20200101", UNSOURCED, *versions.sourced_releases())
    if release not in releases_for(generation)
]


@pytest.mark.parametrize(("generation", "release"), REFUSED_RELEASES)
def test_a_refused_release_is_told_only_the_releases_its_groups_stack_runs_on(generation, release):
    instance_type = next(t for t in catalog.TRAINIUM_TYPES if catalog.INSTANCE_TYPES[t].generation == generation)
    raw = settings("staging", fixture=True, **one_group(instance_type, nodeImageRelease=release)).config
    with pytest.raises(ConfigError) as caught:
        parse(raw, stack="staging")
    assert caught.value.key.endswith("trainiumNodeGroups[0].nodeImageRelease")
    offered = caught.value.fix.split("pin one of ")[1].split(" (")[0].split(", ")
    assert releases_for(generation) and offered == releases_for(generation), caught.value.fix


def test_node_repair_follows_the_stack_and_can_be_turned_off():
    prod_settings = settings("prod", fixture=True)
    prod = parse(prod_settings.config, stack="prod").node_health
    stated = int(prod_settings.config["trainium-eks:nodeRepairMaxUnhealthy"])
    assert prod.monitoring_agent and prod.repair is not None and prod.repair.max_unhealthy == stated
    off_settings = settings("staging", fixture=True, nodeRepair=False, nodeMonitoringAgent=False)
    off = parse(off_settings.config, stack="staging").node_health
    assert (off.monitoring_agent, off.repair) == (False, None)


def test_efa_defaults_to_what_the_instance_type_supports():
    cfg = parse(settings("staging", fixture=True).config, stack="staging")
    (group,) = cfg.trainium_node_groups
    assert group.efa == catalog.INSTANCE_TYPES[group.instance_type].supports_efa
    assert group.efa_interfaces == catalog.INSTANCE_TYPES[group.instance_type].max_efa_interfaces


# No deadline: a loaded 2-core machine parses a stack slower than hypothesis's 200 ms default.
@hypothesis_settings(deadline=None)
@given(st.integers(-3, 12), st.integers(-3, 12), st.integers(-3, 12))
def test_scaling_is_accepted_exactly_when_ordered(min_size, desired, max_size):
    group = {**GROUP, "minSize": min_size, "desiredSize": desired, "maxSize": max_size}
    # No team: a team needs a node (tests/test_teams.py).
    raw = settings("staging", fixture=True, trainiumNodeGroups=[group], teams=[]).config
    valid = 0 <= min_size <= desired <= max_size and max_size >= 1
    if valid:
        assert parse(raw, stack="staging").trainium_node_groups[0].scaling.desired_size == desired
    else:
        with pytest.raises(ConfigError):
            parse(raw, stack="staging")
