"""Training jobs on the platform: the TorchX component for Trainium, the launcher and the acceptance jobs."""

# The training image tag that `make image` builds and the launcher uses by default (ECR tags are immutable:
# bump it with every change to training/).
TRAINING_IMAGE_TAG = "bert-pretrain-1.2.0"
