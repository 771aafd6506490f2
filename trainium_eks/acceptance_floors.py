"""The acceptance checks' floor: the fraction of a Trainium type's EFA line rate that two nodes' all-reduce bus
bandwidth must reach (nccom-test's ``efa-bandwidth``, and ``collective-bandwidth`` on the native backend). An
engineering choice, kept apart from the hardware catalog, whose facts are AWS's."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# The EFA line rate of each type is its catalog network_bandwidth_gbps: 800 Gbps for trn1.32xlarge and 1,600 for
# trn1n.32xlarge (aws-neuron-sdk about-neuron/arch/neuron-hardware/trn1-arch.rst, "EFA bandwidth (Gbps)"),
# 3,200 (16 x 200) for trn2.48xlarge (trn2-arch.rst "EFAv3 bandwidth (Gbps)"; neuron-runtime/about/collectives.rst).
#
# The floor below is an engineering choice, not an AWS figure: AWS publishes no expected all-reduce bus bandwidth
# per instance type. It is the fraction of that line rate which the two-node all-reduce bus bandwidth (nccom-test's
# busbw, the peak over its message sizes) must reach. It sits
# - above what a single EFA interface could carry even at an all-reduce's full bus-bandwidth factor 2(r-1)/r
#   (about 2 x one interface's share: 24.6 % of trn1.32xlarge's line rate, 12.3 % of trn1n's, 12.4 % of trn2's),
#   so a node whose traffic falls back to one interface, or off EFA to TCP, fails; and
# - below the only published figure, the nccom-test guide's two-instance, 64-rank example (47.09 GiB/s at 1 GiB,
#   which the guide says is not current performance data): 50.6 % of 800 Gbps, or 25.3 % of 1,600 Gbps were it a
#   trn1n. trn2 has no published figure; it takes trn1n's floor.
# Tighten a floor once a healthy cluster of the type has been measured.
ACCEPTANCE_BUS_BANDWIDTH_FRACTION: Mapping[str, float] = MappingProxyType(
    {"trn1.32xlarge": 0.30, "trn1n.32xlarge": 0.20, "trn2.48xlarge": 0.20}
)
