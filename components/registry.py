"""Registry: the ECR repository for training images.

Immutable tags (a tag names one image forever, so a job spec is reproducible), scan on push, KMS encryption,
and a lifecycle policy that expires untagged layers quickly and keeps the newest tagged images.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from trainium_eks.config import RegistryConfig


@dataclass(frozen=True)
class RegistryArgs:
    config: RegistryConfig
    tags: Mapping[str, str]
    protect: bool


def lifecycle_policy(cfg: RegistryConfig) -> str:
    return json.dumps(
        {
            "rules": [
                {
                    "rulePriority": 1,
                    "description": f"Expire untagged images after {cfg.untagged_expiry_days} days",
                    "selection": {
                        "tagStatus": "untagged",
                        "countType": "sinceImagePushed",
                        "countUnit": "days",
                        "countNumber": cfg.untagged_expiry_days,
                    },
                    "action": {"type": "expire"},
                },
                {
                    "rulePriority": 2,
                    "description": f"Keep the newest {cfg.keep_images} images",
                    "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": cfg.keep_images},
                    "action": {"type": "expire"},
                },
            ]
        }
    )


class Registry(pulumi.ComponentResource):
    repository: aws.ecr.Repository
    repository_url: pulumi.Output[str]

    def __init__(self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:registry:Registry", name, None, opts)
        cfg = args.config
        self.repository = aws.ecr.Repository(
            f"{name}-training",
            name=cfg.repository_name,
            image_tag_mutability="IMMUTABLE",
            image_scanning_configuration={"scan_on_push": True},
            encryption_configurations=[{"encryption_type": "KMS"}],  # the account's aws/ecr key
            force_delete=not args.protect,
            tags=dict(args.tags),
            opts=pulumi.ResourceOptions(parent=self, protect=args.protect),
        )
        aws.ecr.LifecyclePolicy(
            f"{name}-training",
            repository=self.repository.name,
            policy=lifecycle_policy(cfg),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.repository_url = self.repository.repository_url
        self.register_outputs({"repositoryUrl": self.repository_url})
