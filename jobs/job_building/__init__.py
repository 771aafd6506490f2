"""What every job the tools build shares: the TorchX component for Trainium (``torchx_component``), the platform job
on whole nodes of a group (``platform_job``), the nodes and quota it takes (``capacity``), its pods' grace period
(``grace_period``) and security context (``training_security``), and a run's paths (``paths``)."""
