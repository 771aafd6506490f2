"""Pulumi component resources of the platform, one file per concept (network, cluster, ...)."""
