"""Registry (ECR) and observability (TensorBoard): what a security review and a user look for."""

from __future__ import annotations

import json

import pytest
from support import evaluate, one, platform

from trainium_eks import layout, versions

pytestmark = pytest.mark.stacks


def test_repository_is_immutable_scanned_and_kms_encrypted(stack_plan):
    repository = one(stack_plan.find("aws:ecr/repository:Repository"))
    assert repository.inputs["imageTagMutability"] == "IMMUTABLE"
    assert repository.inputs["imageScanningConfiguration"] == {"scanOnPush": True}
    assert repository.inputs["encryptionConfigurations"] == [{"encryptionType": "KMS"}]
    assert stack_plan.outputs["ecrRepositoryUrl"].endswith("/" + repository.inputs["name"])


def test_lifecycle_policy_expires_untagged_images_and_keeps_the_configured_number():
    plan = evaluate("staging", ecrKeepImages=12, ecrUntaggedExpiryDays=3)
    rules = json.loads(one(plan.find("aws:ecr/lifecyclePolicy:LifecyclePolicy")).inputs["policy"])["rules"]
    untagged = one([r for r in rules if r["selection"]["tagStatus"] == "untagged"])
    assert (untagged["selection"]["countType"], untagged["selection"]["countNumber"]) == ("sinceImagePushed", 3)
    keep = one([r for r in rules if r["selection"]["countType"] == "imageCountMoreThan"])
    assert keep["selection"]["countNumber"] == 12
    assert len({r["rulePriority"] for r in rules}) == len(rules)


def test_protected_stacks_protect_stateful_resources(plans):
    stateful = (
        "aws:ecr/repository:Repository",
        "aws:fsx/lustreFileSystem:LustreFileSystem",
        "aws:kms/key:Key",
        "eks:index:Cluster",
    )
    for stack, plan in plans.items():
        protect = platform(stack).protect_stateful
        for type_ in stateful:
            for resource in plan.find(type_):
                assert resource.protect is protect, (stack, resource.urn)
        repository = one(plan.find("aws:ecr/repository:Repository"))
        assert repository.inputs["forceDelete"] is not protect


def test_tensorboard_is_cluster_internal_and_reads_the_shared_logs(stack_plan):
    services = stack_plan.find("kubernetes:core/v1:Service")
    assert all(s.inputs["spec"]["type"] == "ClusterIP" for s in services)
    deployment = one(
        [d for d in stack_plan.find("kubernetes:apps/v1:Deployment") if d.inputs["metadata"]["name"] == "tensorboard"]
    )
    pod = deployment.inputs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == versions.TENSORBOARD_IMAGE
    assert f"--logdir={layout.TENSORBOARD_LOG_DIR}" in container["args"]
    claim_volume = one([v for v in pod["volumes"] if "persistentVolumeClaim" in v])
    assert claim_volume["persistentVolumeClaim"] == {"claimName": stack_plan.outputs["fsxClaimName"], "readOnly": True}
    service = one([s for s in services if s.inputs["metadata"]["name"] == "tensorboard"])
    port = service.inputs["spec"]["ports"][0]["port"]
    assert stack_plan.outputs["tensorboardService"].endswith(
        f".{stack_plan.outputs['jobNamespace']}.svc.cluster.local:{int(port)}"
    )


def test_tensorboard_can_be_turned_off():
    plan = evaluate("dev", tensorboard=False)
    assert not plan.find("kubernetes:apps/v1:Deployment")
    assert plan.outputs["tensorboardService"] == ""


def test_tensorboard_is_restarted_when_it_hangs_and_mounts_no_api_token(stack_plan):
    deployment = one(
        [d for d in stack_plan.find("kubernetes:apps/v1:Deployment") if d.inputs["metadata"]["name"] == "tensorboard"]
    )
    pod = deployment.inputs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"]["port"] == "http"
    assert pod["automountServiceAccountToken"] is False


def test_only_the_job_namespace_reaches_tensorboard_over_the_network(stack_plan):
    deployment = one(
        [d for d in stack_plan.find("kubernetes:apps/v1:Deployment") if d.inputs["metadata"]["name"] == "tensorboard"]
    )
    policy = one(
        [
            p
            for p in stack_plan.find("kubernetes:networking.k8s.io/v1:NetworkPolicy")
            if p.inputs["metadata"]["name"] == "tensorboard"
        ]
    )
    spec = policy.inputs["spec"]
    assert spec["podSelector"]["matchLabels"] == deployment.inputs["spec"]["template"]["metadata"]["labels"]
    (rule,) = spec["ingress"]
    namespace = stack_plan.outputs["jobNamespace"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}]
    assert rule["ports"] == [{"port": layout.TENSORBOARD_PORT, "protocol": "TCP"}]
    assert deployment.inputs["spec"]["template"]["spec"]["securityContext"]["runAsUser"] >= 10000
