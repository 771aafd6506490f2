"""The shared file system's write throughput, from what the stack declares of it: one computation for the platform's
contract (``fsxThroughputMBps``), the first-step estimate and the job tools."""

from __future__ import annotations

# SCRATCH_2 writes 100 MB/s per TiB (FSx for Lustre User Guide, "Performance characteristics of SSD and HDD storage
# classes"); a persistent file system writes its provisioned MB/s per TiB.
SCRATCH_WRITE_MBPS_PER_TIB = 100
GIB_PER_TIB = 1024


def write_mb_s(deployment_type: str, storage_capacity_gib: float, per_unit_storage_throughput: float | None) -> float:
    """An FSx for Lustre file system's throughput in MB/s: its storage capacity in TiB times its throughput per TiB,
    provisioned (PERSISTENT_*: PerUnitStorageThroughput) or fixed (SCRATCH_2). "File system throughput capacity is
    calculated by multiplying file system storage capacity (TiB) by the PerUnitStorageThroughput (MB/s/TiB)" (FSx API
    Reference, CreateFileSystemLustreConfiguration); writes run at the lower of the file servers' network and disk
    throughput, both proportional to capacity (FSx for Lustre User Guide, "Amazon FSx for Lustre performance").
    ValueError where no throughput per TiB is known."""
    per_tib = SCRATCH_WRITE_MBPS_PER_TIB if deployment_type == "SCRATCH_2" else per_unit_storage_throughput
    if not per_tib:
        raise ValueError(f"FSx for Lustre {deployment_type}: no write throughput per TiB known")
    return per_tib * storage_capacity_gib / GIB_PER_TIB
