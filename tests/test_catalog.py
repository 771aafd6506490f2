"""The hardware catalog: internally consistent facts that the rest of the platform can trust."""

from __future__ import annotations

import dataclasses

import pytest
from support import ec2_recommended_layout

from jobs.workloads import registry, titan_recipes
from preflight.stackfile import REPO_ROOT
from trainium_eks import backends, catalog, hardware, versions


@pytest.mark.parametrize("name", catalog.TRAINIUM_TYPES)
def test_trainium_types_are_complete(name):
    spec = catalog.INSTANCE_TYPES[name]
    assert spec.neuron_devices > 0 and spec.neuron_cores >= spec.neuron_devices
    assert spec.accelerator_memory_gib > 0 and spec.vcpus > 0 and spec.memory_gib > 0
    assert spec.max_efa_interfaces in (0, spec.network_cards), "EFA is attached one interface per network card"
    assert spec.az_ids or spec.capacity_block_regions, f"{name} is sold nowhere"
    # Priced (where a source gives the price) only where it is sold on demand, and priced somewhere if it is.
    assert set(spec.on_demand_usd_per_hour) <= set(spec.az_ids) and all(p > 0 for p in spec.on_demand_usd_per_hour.values())
    assert bool(spec.on_demand_usd_per_hour) == bool(spec.az_ids)
    for region, az_ids in spec.offered_az_ids.items():
        assert az_ids and set(az_ids) <= set(catalog.REGIONS[region]), (region, az_ids)
    # EC2 offers it wherever the platform takes it on demand, and in some AZ of every region whose blocks sell it.
    for region, az_ids in spec.az_ids.items():
        assert az_ids and set(az_ids) <= set(spec.offered_az_ids.get(region, ())), (region, az_ids)
    for region in spec.capacity_block_regions:
        assert region in catalog.REGIONS and spec.offered_az_ids.get(region), region


def test_a_capacity_block_group_is_placed_only_where_ec2_offers_its_type():
    for spec in catalog.INSTANCE_TYPES.values():
        for region in spec.capacity_block_regions:
            placed = [az_id for az_id in catalog.REGIONS[region] if spec.offered_in(region, az_id, capacity_block=True)]
            assert placed == [az_id for az_id in catalog.REGIONS[region] if az_id in spec.offered_az_ids[region]]


@pytest.mark.parametrize("name", catalog.TRAINIUM_TYPES)
def test_the_instance_store_is_whole_disks_that_one_raid0_array_joins(name):
    spec = catalog.INSTANCE_TYPES[name]
    assert spec.instance_store_disks >= 1 and spec.instance_store_disk_gb > 0
    assert spec.instance_store_gb == spec.instance_store_disks * spec.instance_store_disk_gb


@pytest.mark.parametrize("name", catalog.TRAINIUM_TYPES)
def test_a_node_advertises_its_physical_cores_grouped_by_its_generations_logical_core_setting(name):
    spec = catalog.INSTANCE_TYPES[name]
    generation = hardware.GENERATIONS[spec.generation]
    assert generation.default_lnc in generation.lnc_settings
    for lnc in generation.lnc_settings:
        assert spec.neuron_cores_at(lnc) * lnc == spec.physical_neuron_cores
        assert spec.neuron_cores_at(lnc) % spec.neuron_devices == 0  # every device advertises the same cores
    assert spec.neuron_cores == spec.neuron_cores_at(generation.default_lnc)


def test_every_generation_has_a_type_and_names_training_stacks_that_exist():
    for name, generation in hardware.GENERATIONS.items():
        assert any(catalog.INSTANCE_TYPES[t].generation == name for t in catalog.TRAINIUM_TYPES)
        assert generation.training_stacks and set(generation.training_stacks) <= set(versions.TRAINING_STACKS)
        assert versions.training_stack_of(name).name == generation.training_stacks[0]
        assert all(name in versions.TRAINING_STACKS[stack].generations for stack in generation.training_stacks)


def test_a_backend_trains_the_generations_of_the_stacks_on_it_and_the_cpus_none():
    for name in backends.BACKENDS:
        on_it = [stack for stack in versions.TRAINING_STACKS.values() if stack.backend.name == name]
        assert set(versions.backend_generations(name)) == {g for stack in on_it for g in stack.generations}
    assert versions.backend_generations("cpu") == ()


def test_every_step_rate_and_recipe_of_a_type_is_a_registered_workloads():
    declared = registry.workloads()
    for name in catalog.TRAINIUM_TYPES:
        spec = catalog.INSTANCE_TYPES[name]
        assert {rate.workload for rate in spec.step_rates} <= set(declared), name
        assert all(rate.sequences_per_second_per_worker > 0 and rate.source for rate in spec.step_rates), name
        assert set(spec.recipes) <= set(declared), name
        if "torchtitan" in spec.recipes:
            assert titan_recipes.recipe_for(name).name == spec.recipes["torchtitan"]


def test_multi_node_types_support_efa_and_the_single_device_type_does_not():
    assert not catalog.INSTANCE_TYPES["trn1.2xlarge"].supports_efa
    for name in ("trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge"):
        assert catalog.INSTANCE_TYPES[name].supports_efa


@pytest.mark.parametrize("name", catalog.TRAINIUM_TYPES)
def test_unknown_region_price_errs_on_the_expensive_side_and_a_block_only_type_has_none(name):
    spec = catalog.INSTANCE_TYPES[name]
    if spec.on_demand_usd_per_hour:
        assert spec.price("ap-southeast-4") == max(spec.on_demand_usd_per_hour.values())
    else:  # it runs in Capacity Blocks only, at the block's price
        assert spec.price("ap-southeast-4") is None
        assert all(spec.block_only(region) for region in spec.capacity_block_regions)


@pytest.mark.parametrize("name", [n for n, t in catalog.INSTANCE_TYPES.items() if t.supports_efa])
def test_efa_layout_has_one_efa_per_card_and_an_addressed_primary(name):
    spec = catalog.INSTANCE_TYPES[name]
    for efa_only in (True, False):
        layout = dataclasses.replace(spec, efa_only_interfaces=efa_only).efa_layout()
        # EFA-only interfaces have no address: one for the ENA primary, else one per card's EFA with ENA.
        assert sum(s.has_ip_address for s in layout) == (1 if efa_only else spec.network_cards)
        positions = [(s.network_card_index, s.device_index) for s in layout]
        assert len(set(positions)) == len(positions)
        assert sorted(s.network_card_index for s in layout if s.has_efa) == list(range(spec.network_cards))
        (primary,) = [s for s in layout if (s.network_card_index, s.device_index) == (0, 0)]
        assert primary.has_ip_address  # EC2 refuses an EFA-only primary interface


def test_types_without_efa_have_no_layout():
    assert all(not t.efa_layout() for t in catalog.INSTANCE_TYPES.values() if not t.supports_efa)


@pytest.mark.parametrize("name", [n for n in catalog.TRAINIUM_TYPES if catalog.INSTANCE_TYPES[n].supports_efa])
def test_every_efa_type_has_a_bandwidth_floor_that_one_interface_cannot_reach(name):
    spec = catalog.INSTANCE_TYPES[name]
    floor = catalog.INSTANCE_TYPES[name].acceptance_bus_bandwidth_fraction
    assert 0 < floor < 1 and spec.network_bandwidth_gbps > 0
    # Two nodes' all-reduce: bus bandwidth is at most 2(r-1)/r times what the network carries per node. A node left
    # with one working EFA interface (line rate / interfaces) must fall below the floor.
    ranks = 2 * spec.neuron_cores
    one_interface = 2 * (ranks - 1) / ranks / spec.max_efa_interfaces
    assert one_interface < floor, f"{name}: a single interface could reach {one_interface:.1%} >= the floor"


@pytest.mark.parametrize(("name", "cards"), [("trn1.32xlarge", 8), ("trn1n.32xlarge", 16), ("trn2.48xlarge", 16)])
def test_the_catalog_layout_is_the_ec2_guides(name, cards):
    layout = [(s.network_card_index, s.device_index, s.interface_type) for s in catalog.INSTANCE_TYPES[name].efa_layout()]
    assert layout == ec2_recommended_layout(cards)


def test_the_readmes_generations_section_states_what_the_catalog_and_versions_say():
    section = (REPO_ROOT / "README.md").read_text().split("### Trainium generations\n")[1].split("\n### ")[0]
    for name in catalog.TRAINIUM_TYPES:
        assert name in section, name
    for stack in versions.TRAINING_STACKS.values():
        release = versions.NODE_IMAGE_RELEASES[stack.default_node_image_release]
        runtime = stack.runtime
        for fact in (stack.name, stack.dockerfile, runtime.sdk, runtime.library, runtime.drivers):  # tags: versions.py alone
            assert fact in section, fact
        assert f"{release.tag}, aws-neuronx-dkms {release.neuron_driver}" in section, release.tag
    for tag, release in versions.NODE_IMAGE_RELEASES.items():
        assert release.neuron_driver or tag in section, f"{tag}: the release refused for want of a sourced driver"
