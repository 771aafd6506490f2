"""Storage: FSx for Lustre in the Trainium AZ, reachable on the Lustre ports, exposed as a ReadWriteMany claim."""

from __future__ import annotations

import json

import pytest
from support import STACKS, evaluate, one, settings

from components.storage import CLAIM_REQUEST
from trainium_eks import layout, tokens

FSX = tokens.FSX_LUSTRE_FILE_SYSTEM
SG = tokens.EC2_SECURITY_GROUP
ASSOCIATION = tokens.FSX_DATA_REPOSITORY_ASSOCIATION

pytestmark = pytest.mark.stacks  # each test derives what it expects from the stack it reads


def lustre_group(plan):
    return one([g for g in plan.find(SG) if g.name.endswith("-lustre")])


@pytest.mark.parametrize("stack", STACKS)
def test_file_system_sits_in_the_trainium_subnet(stack):
    plan = evaluate(stack)
    fsx = one(plan.find(FSX))
    assert fsx.inputs["subnetIds"] == plan.outputs["trainiumSubnetId"]
    cfg = settings(stack).config
    assert fsx.inputs["deploymentType"] == cfg["trainium-eks:fsxDeploymentType"]
    assert fsx.inputs["storageCapacity"] == int(cfg["trainium-eks:fsxStorageCapacityGiB"])


def test_lustre_ports_are_open_to_cluster_nodes_and_between_servers(stack_plan):
    group = lustre_group(stack_plan)
    assert "ingress" not in group.inputs  # inline rules would be authoritative over the separate rule resources
    rules = [
        r
        for r in stack_plan.find("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if group.urn in r.property_dependencies["securityGroupId"]
    ]
    cluster = one(stack_plan.find("eks:index:Cluster"))
    for low, high in ((988, 988), (1018, 1023)):
        covering = [
            r for r in rules if r.inputs["ipProtocol"] == "tcp" and (r.inputs["fromPort"], r.inputs["toPort"]) == (low, high)
        ]
        sources = {urn for r in covering for urn in r.property_dependencies["referencedSecurityGroupId"]}
        assert group.urn in sources, (low, high)
        assert cluster.urn in sources, (low, high)
        assert not any(r.inputs.get("cidrIpv4") for r in covering)
    fsx = one(stack_plan.find(FSX))
    assert fsx.property_dependencies["securityGroupIds"] == (group.urn,)


def test_persistent_file_systems_get_a_kms_key_backups_a_final_backup_and_throughput(plans):
    for plan in plans.values():
        fsx = one(plan.find(FSX))
        if fsx.inputs["deploymentType"].startswith("PERSISTENT"):
            assert fsx.inputs["kmsKeyId"].startswith("arn:aws:kms:")
            assert fsx.inputs["perUnitStorageThroughput"] > 0
            assert fsx.inputs["automaticBackupRetentionDays"] > 0
            assert fsx.inputs["skipFinalBackup"] is False
        else:
            assert "kmsKeyId" not in fsx.inputs and "perUnitStorageThroughput" not in fsx.inputs


def test_data_repository_association_links_the_configured_bucket():
    persistent = {"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 125}
    plan = evaluate(STACKS[0], **persistent, fsxDataRepositoryPath="s3://datasets-bucket/bert")
    association = one(plan.find(ASSOCIATION))
    assert association.inputs["dataRepositoryPath"] == "s3://datasets-bucket/bert"
    assert association.inputs["fileSystemPath"] == layout.DATA_REPOSITORY_DIR
    assert association.property_dependencies["fileSystemId"] == (one(plan.find(FSX)).urn,)
    assert not evaluate(STACKS[0], **persistent, fsxDataRepositoryPath="").find(ASSOCIATION)


def test_claim_is_read_write_many_and_bound_to_the_file_system(stack_plan):
    fsx = one(stack_plan.find(FSX))
    # the platform's own volume, on the file system's root (a team's is on its directory: tests/test_teams.py)
    volume = one(
        [
            v
            for v in stack_plan.find("kubernetes:core/v1:PersistentVolume")
            if layout.TEAM_LABEL not in v.inputs["metadata"]["labels"]
        ]
    )
    claim = one(
        [
            c
            for c in stack_plan.find("kubernetes:core/v1:PersistentVolumeClaim")
            if c.inputs["metadata"]["namespace"] == stack_plan.outputs["jobNamespace"]
        ]
    )
    assert volume.inputs["spec"]["csi"]["driver"] == "fsx.csi.aws.com"
    assert fsx.urn in volume.property_dependencies["spec"]
    assert volume.inputs["spec"]["accessModes"] == claim.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volume.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert claim.inputs["spec"]["volumeName"] == volume.inputs["metadata"]["name"]
    assert claim.inputs["metadata"]["name"] == stack_plan.outputs["fsxClaimName"]
    assert claim.inputs["metadata"]["namespace"] == stack_plan.outputs["jobNamespace"]


def test_csi_controller_role_trusts_only_its_service_account_and_can_only_describe_and_expand(stack_plan):
    role = one([r for r in stack_plan.find("aws:iam/role:Role") if r.name.endswith("fsx-csi")])
    trust = json.loads(role.inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    subjects = [v for cond in statement["Condition"]["StringEquals"].items() if cond[0].endswith(":sub") for v in cond[1]]
    assert subjects == ["system:serviceaccount:kube-system:fsx-csi-controller-sa"]
    role_policy = one([p for p in stack_plan.find("aws:iam/rolePolicy:RolePolicy") if p.name.endswith("fsx-csi")])
    policy = json.loads(role_policy.inputs["policy"])
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    assert actions == {"fsx:DescribeFileSystems", "fsx:UpdateFileSystem"}
    update = one([s for s in policy["Statement"] if "fsx:UpdateFileSystem" in s["Action"]])
    assert update["Resource"].startswith("arn:aws:fsx:") and ":file-system/fs-" in update["Resource"]
    assert role_policy.property_dependencies["policy"] == (one(stack_plan.find(FSX)).urn,)
    release = one([r for r in stack_plan.find("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "aws-fsx-csi-driver"])
    annotations = release.inputs["values"]["controller"]["serviceAccount"]["annotations"]
    assert annotations["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")


def test_each_volume_has_the_file_systems_capacity_and_each_claim_requests_it_once(stack_plan):
    """A claim bound to a static volume cannot be resized (nor shrunk below its status): the engine keeps the request it
    was created with, while each volume's capacity follows the file system (tests/test_diff.py applies the growth)."""
    capacity = f"{int(one(stack_plan.find(FSX)).inputs['storageCapacity'])}Gi"
    volumes = stack_plan.find(tokens.K8S_PERSISTENT_VOLUME)
    claims = stack_plan.find(tokens.K8S_PERSISTENT_VOLUME_CLAIM)
    assert volumes and len(claims) == len(volumes)  # the platform's, and one per team
    assert {v.inputs["spec"]["capacity"]["storage"] for v in volumes} == {capacity}
    for claim in claims:
        assert claim.inputs["spec"]["resources"]["requests"]["storage"] == capacity  # what a new stack creates
        assert claim.ignore_changes == (CLAIM_REQUEST,)
    assert not any(v.ignore_changes for v in volumes)
