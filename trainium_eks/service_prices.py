"""Prices of the AWS services around the instances: the EKS control plane, NAT gateways and public IPv4 addresses,
VPC interface endpoints, EBS gp3 and FSx for Lustre storage. The instance types' own prices, and every other hardware
and region fact, are in the hardware catalog (trainium_eks/catalog.py).

Sources (read 2026-12):
- [EKS-PRICE]  https://aws.amazon.com/eks/pricing/ (control plane: 0.10 USD/hour, 0.60 in extended support)
- [VPC-PRICE]  https://aws.amazon.com/vpc/pricing/ (NAT gateway hour, public IPv4 address hour)
- [ENDPOINT-PRICE] https://aws.amazon.com/privatelink/pricing/ (interface endpoints are billed "for each hour
               that your VPC endpoint remains provisioned in each Availability Zone" and per GB processed: 0.01 USD
               for the first PB). The hourly rate, 0.01 USD per endpoint and AZ, is in a table the page renders with
               script, which was not read: the figure is from a third-party reading of it (awsnegotiations.com,
               "AWS PrivateLink Cost Analysis", May 2026): verify before budgeting
- [EBS-PRICE]  https://aws.amazon.com/ebs/pricing/ (gp3 GB-month)
- [FSX-PRICE]  https://aws.amazon.com/fsx/lustre/pricing/ (SSD GB-month per deployment type and throughput tier)
  Storage, NAT and control-plane prices are list prices read in 2026 (NAT, public IPv4, EKS, gp3 confirmed for
  us-east-1; the three regions list the same NAT and EKS rates).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: EKS control plane per cluster-hour: standard support, and extended support (versions past standard) [EKS-PRICE].
EKS_CONTROL_PLANE_USD_PER_HOUR = 0.10
EKS_EXTENDED_SUPPORT_USD_PER_HOUR = 0.60
#: NAT gateway per hour and per GB it processes (usage-based: counted for the image pulls of a first training step,
#: not in the monthly figure), and the public IPv4 address of its EIP per hour [VPC-PRICE].
NAT_GATEWAY_USD_PER_HOUR = 0.045
NAT_GATEWAY_USD_PER_GB = 0.045
#: An interface VPC endpoint per AZ-hour, and per GB processed (the first PB a month in a region) [ENDPOINT-PRICE].
#: Gateway endpoints (S3) are free (VPC User Guide, "Gateway endpoints": "There is no additional charge").
VPC_INTERFACE_ENDPOINT_USD_PER_AZ_HOUR = 0.01
VPC_INTERFACE_ENDPOINT_USD_PER_GB = 0.01
PUBLIC_IPV4_USD_PER_HOUR = 0.005
#: EBS gp3 storage per GB-month, with the included 3,000 IOPS and 125 MB/s [EBS-PRICE].
EBS_GP3_USD_PER_GB_MONTH = 0.08
#: FSx for Lustre SSD storage per GB-month by (deployment type, MB/s/TiB of throughput) [FSX-PRICE]. SCRATCH_2,
#: PERSISTENT_1 (us-west-2) and PERSISTENT_2-125 (us-east-1) are Price List API readings of 2026-07; SCRATCH_1 and
#: PERSISTENT_2 250/500/1000 are the published tiers as last seen, not re-read: check them before budgeting.
FSX_LUSTRE_USD_PER_GB_MONTH: Mapping[tuple[str, int], float] = MappingProxyType(
    {
        ("SCRATCH_1", 0): 0.140,
        ("SCRATCH_2", 0): 0.140,
        ("PERSISTENT_1", 50): 0.140,
        ("PERSISTENT_1", 100): 0.190,
        ("PERSISTENT_1", 200): 0.290,
        ("PERSISTENT_2", 125): 0.145,
        ("PERSISTENT_2", 250): 0.210,
        ("PERSISTENT_2", 500): 0.340,
        ("PERSISTENT_2", 1000): 0.600,
    }
)
