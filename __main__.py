"""trainium-eks: one `pulumi up` per stack builds the Trainium training platform (see README.md).

Read the stack's config once, build the platform, export the output contract.
"""

import pulumi

from components.platform import TrainiumPlatform
from trainium_eks import config, layout

platform = TrainiumPlatform(layout.PLATFORM_NAME, config.from_pulumi())
for key, value in platform.contract.items():
    pulumi.export(key, value)
