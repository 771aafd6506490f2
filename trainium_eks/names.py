"""The naming rules of AWS and Kubernetes a value must follow, each a pattern of the whole string in ASCII.

Every pattern is anchored with ``\\A`` and ``\\Z`` (Python's ``$`` also matches before a trailing newline, so
``"nlp\\n"`` would pass for a DNS label) and compiled with ``re.ASCII`` (``\\d`` and ``\\w`` otherwise take any
Unicode digit or letter, which no AWS or Kubernetes name allows). ``.match`` and ``.fullmatch`` agree on them.
The stack configuration (``trainium_eks.config.fields``) and the output contract (``trainium_eks.contract``) both
validate with them.
"""

from __future__ import annotations

import re


def whole(pattern: str) -> re.Pattern:
    """``pattern`` matching the whole string and nothing but ASCII where it says \\d or \\w."""
    return re.compile(rf"\A(?:{pattern})\Z", re.ASCII)


# Kubernetes object names ("Object Names and IDs"): an RFC 1123 label (namespaces, label-like names) and subdomain.
DNS_LABEL = whole(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
DNS_SUBDOMAIN = whole(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# Kubernetes label names and values: 63 characters at most, alphanumerics at both ends, "-_." between; a key may
# carry a DNS-subdomain prefix and "/" (kubernetes.io, "Labels and Selectors", syntax and character set).
LABEL_NAME = whole(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
# S3 bucket names: 3-63 lowercase letters, digits, dots and hyphens, a letter or digit at each end (S3 User Guide).
S3_URL = whole(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/[^\s]*)?")
ECR_NAME = whole(r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*")
# IAM role and user names and paths: letters, digits and +=,.@_- (IAM User Guide, "IAM identifiers").
PRINCIPAL_ARN = whole(r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+")
RESERVATION_ID = whole(r"cr-[0-9a-f]{8,17}")
VPC_ID = whole(r"vpc-[0-9a-f]{8,17}")
SUBNET_ID = whole(r"subnet-[0-9a-f]{8,17}")
# GitHub: an owner of up to 39 letters, digits and single hyphens; a repository name of letters, digits, ".", "_", "-".
GITHUB_REPOSITORY = whole(r"[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}/[A-Za-z0-9._-]{1,100}")
# A connection ARN of either service name (CodeStar Connections was renamed CodeConnections; both ARNs are valid).
CONNECTION_ARN = whole(r"arn:aws[a-z-]*:(codeconnections|codestar-connections):[a-z0-9-]+:\d{12}:connection/[0-9a-f-]{36}")
# SNS topic ARNs; a topic name is 1-256 ASCII letters, digits, hyphens and underscores, ".fifo" ending a FIFO
# topic (SNS API Reference, CreateTopic: Name).
SNS_TOPIC_ARN = whole(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?")
# A container image reference as the kubelet pulls it, with its tag: a registry host (and port), a repository path of
# lowercase components, and a tag of up to 128 of A-Z a-z 0-9 _ . - not starting with . or - (distribution/reference,
# reference.go's grammar: domain, path-component, tag).
IMAGE_REFERENCE = whole(
    r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?"
    r"/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r":[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
)
# A Region's ARN partition: aws for the commercial Regions, aws-cn for China's, aws-us-gov for GovCloud's; "You cannot use
# IAM credentials from one partition to interact with resources in a different partition" (AWS whitepaper "AWS Fault
# Isolation Boundaries", Partitions), so a principal of another partition never reaches the cluster.
REGION_PREFIX_PARTITIONS = {"cn-": "aws-cn", "us-gov-": "aws-us-gov"}


def partition(region: str) -> str:
    """The ARN partition of ``region``."""
    return next((p for prefix, p in REGION_PREFIX_PARTITIONS.items() if region.startswith(prefix)), "aws")


def arn_partition(arn: str) -> str:
    """The partition an ARN names (its second field)."""
    return arn.split(":")[1] if arn.count(":") >= 2 else ""
