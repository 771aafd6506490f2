"""Every Kubernetes object the platform declares is valid against the official schema of the cluster's version."""

from __future__ import annotations

import copy

import jsonschema
import kubernetes_validate
import pytest
from support import kubernetes_objects, manifest, settings

# Built-in kinds are checked strictly (unknown or misspelt fields fail); Volcano's Queue is a CRD, checked against
# the fields of scheduling.volcano.sh/v1beta1 Queue that the platform sets (Volcano 1.15 CRD).

pytestmark = pytest.mark.stacks

QUEUE_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "scheduling.volcano.sh/v1beta1"},
        "kind": {"const": "Queue"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "labels": {"type": "object"}},
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "weight": {"type": "number", "minimum": 1, "maximum": 65535, "multipleOf": 1},
                "reclaimable": {"type": "boolean"},
                "capability": {"type": "object", "additionalProperties": {"type": ["number", "string"]}},
                "guarantee": {"type": "object"},
                "deserved": {"type": "object"},
            },
        },
    },
}


# Custom resources: the Kubernetes schema knows none of them. Queue's fields are checked below; Karpenter's NodePool and
# EC2NodeClass are pinned field by field in test_elastic_capacity.py (the CRD schemas are not shipped in this repository).
CUSTOM_KINDS = (":Queue", ":NodePool", ":EC2NodeClass")


def test_built_in_objects_pass_strict_schema_validation(stack_plan):
    version = settings(stack_plan.stack).config["trainium-eks:kubernetesVersion"]
    checked = 0
    for resource in kubernetes_objects(stack_plan):
        if resource.type.endswith(CUSTOM_KINDS):
            continue
        try:
            kubernetes_validate.validate(manifest(resource), version, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{resource.urn}: {'.'.join(map(str, error.path))}: {error.message}")
        checked += 1
    assert checked >= 8


def test_volcano_queues_match_the_crd(stack_plan):
    queues = [r for r in kubernetes_objects(stack_plan) if r.type.endswith(":Queue")]
    assert queues
    for queue in queues:
        jsonschema.validate(manifest(queue), QUEUE_SCHEMA)


def test_a_misspelt_field_would_be_caught(stack_plan):
    (statefulset,) = [r for r in kubernetes_objects(stack_plan) if r.type == "kubernetes:apps/v1:StatefulSet"]
    broken = copy.deepcopy(manifest(statefulset))
    container = broken["spec"]["template"]["spec"]["containers"][0]
    container["imagePullPolcy"] = container.pop("image")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.35", strict=True)
