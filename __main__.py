"""trainium-eks: one `pulumi up` per stack builds the Trainium training platform (see README.md).

Read the stack's config once, build the platform, export the output contract. With
``TRAINIUM_EKS_BOOTSTRAP=deploy-runner``, a new private stack's first step: the network and the deploy runner only.
"""

import os

import pulumi

from components.platform import TrainiumPlatform
from trainium_eks import config, layout

settings = config.from_pulumi()
platform = TrainiumPlatform(layout.PLATFORM_NAME, settings, deploy_runner_only=config.bootstrap_step(os.environ, settings))
for key, value in platform.contract.items():
    pulumi.export(key, value)
