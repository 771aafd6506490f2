"""Capacity Block events for the stack's owner: one EventBridge rule that sends EC2's Capacity Block events to the
stack's SNS topic (``alarmTopicArn``), so that someone hears when a block is delivered, when it is about to end and
when its instances are about to be terminated.

The detail-types are EC2's (EC2 User Guide, "Monitor Capacity Blocks using EventBridge"; EventBridge Events
Reference, "Amazon Elastic Compute Cloud events"): the block is delivered when it starts; its expiration warning comes
40 minutes before its end, when its instances "will begin to terminate in 10 minutes"; an instance interruption
warning names each instance about to be terminated. The delivery and warning events name the reservation
(``detail.capacity-reservation-id``), but a block joins a group by its tag, which no event carries, and a block bought
after ``pulumi up`` has an ID the stack cannot know: the rule therefore matches every Capacity Block of the account in
the stack's region, and the event says which reservation it is. The interruption warning is also sent for instances of
an interruptible Capacity Reservation (EC2 User Guide, "Monitor interruptible Capacity Reservations").

The topic is the user's, as for the alarms: its access policy must let ``events.amazonaws.com`` publish (EventBridge
User Guide, "Using resource-based policies for Amazon EventBridge", Amazon SNS permissions); the stack does not own it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.cluster import ClusterHandle

EC2_EVENT_SOURCE = "aws.ec2"
CAPACITY_BLOCK_DETAIL_TYPES = (
    "Capacity Block Delivered",
    "Capacity Block Expiration Warning",
    "EC2 Capacity Reservation Instance Interruption Warning",
)


def event_pattern() -> dict:
    return {"source": [EC2_EVENT_SOURCE], "detail-type": list(CAPACITY_BLOCK_DETAIL_TYPES)}


@dataclass(frozen=True)
class CapacityBlockEventsArgs:
    cluster: ClusterHandle
    topic_arn: str


class CapacityBlockEvents(pulumi.ComponentResource):
    """The rule and its SNS target."""

    rule: aws.cloudwatch.EventRule
    target: aws.cloudwatch.EventTarget

    def __init__(self, name: str, args: CapacityBlockEventsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainium-eks:monitoring:CapacityBlockEvents", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.rule = aws.cloudwatch.EventRule(
            f"{name}-rule",
            name=f"{args.cluster.config_name}-blocks",  # EventBridge allows 64 characters, the cluster name up to 56
            description=f"Capacity Block delivery, expiry and interruption events, for {args.cluster.config_name}",
            event_pattern=pulumi.Output.json_dumps(event_pattern()),
            tags=dict(args.cluster.tags),
            opts=child,
        )
        self.target = aws.cloudwatch.EventTarget(f"{name}-topic", rule=self.rule.name, arn=args.topic_arn, opts=child)
        self.register_outputs({"ruleName": self.rule.name})
