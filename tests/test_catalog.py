"""The hardware catalog: internally consistent facts that the rest of the platform can trust."""

from __future__ import annotations

import dataclasses

import pytest

from trainium_eks import catalog


@pytest.mark.parametrize("name", catalog.TRAINIUM_TYPES)
def test_trainium_types_are_complete(name):
    spec = catalog.INSTANCE_TYPES[name]
    assert spec.neuron_devices > 0 and spec.neuron_cores >= spec.neuron_devices
    assert spec.accelerator_memory_gib > 0 and spec.vcpus > 0 and spec.memory_gib > 0
    assert spec.max_efa_interfaces in (0, spec.network_cards), "EFA is attached one interface per network card"
    assert spec.on_demand_usd_per_hour and all(price > 0 for price in spec.on_demand_usd_per_hour.values())
    assert spec.az_ids, f"{name} has no known AZ offering"
    for region, az_ids in spec.az_ids.items():
        assert set(az_ids) <= set(catalog.REGIONS[region]), (region, az_ids)


def test_multi_node_types_support_efa_and_the_single_device_type_does_not():
    assert not catalog.INSTANCE_TYPES["trn1.2xlarge"].supports_efa
    for name in ("trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge"):
        assert catalog.INSTANCE_TYPES[name].supports_efa


def test_unknown_region_price_errs_on_the_expensive_side():
    spec = catalog.INSTANCE_TYPES["trn2.48xlarge"]
    assert spec.price("ap-southeast-4") == max(spec.on_demand_usd_per_hour.values())


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
    floor = catalog.ACCEPTANCE_BUS_BANDWIDTH_FRACTION[name]
    assert 0 < floor < 1 and spec.network_bandwidth_gbps > 0
    # Two nodes' all-reduce: bus bandwidth is at most 2(r-1)/r times what the network carries per node. A node left
    # with one working EFA interface (line rate / interfaces) must fall below the floor.
    ranks = 2 * spec.neuron_cores
    one_interface = 2 * (ranks - 1) / ranks / spec.max_efa_interfaces
    assert one_interface < floor, f"{name}: a single interface could reach {one_interface:.1%} >= the floor"


def ec2_recommended_layout(cards: int) -> list[tuple[int, int, str]]:
    """The EC2 User Guide's layout for EFA on several network cards ("Maximize network bandwidth on Amazon EC2
    instances with multiple network cards"), written out: an ENA primary interface, card 0's EFA-only interface at
    device 1, every other card's EFA-only interface at device 0."""
    return [(0, 0, "interface"), (0, 1, "efa-only"), *((card, 0, "efa-only") for card in range(1, cards))]


@pytest.mark.parametrize(("name", "cards"), [("trn1.32xlarge", 8), ("trn1n.32xlarge", 16), ("trn2.48xlarge", 16)])
def test_the_catalog_layout_is_the_ec2_guides(name, cards):
    layout = [(s.network_card_index, s.device_index, s.interface_type) for s in catalog.INSTANCE_TYPES[name].efa_layout()]
    assert layout == ec2_recommended_layout(cards)
