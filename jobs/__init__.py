"""Training jobs on the platform: the TorchX component for Trainium, the launcher and the acceptance jobs."""
