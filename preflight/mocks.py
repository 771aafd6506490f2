"""Mock AWS and Kubernetes providers for offline evaluation: realistic, deterministic outputs and invokes.

A resource gets the outputs its provider would compute (IDs in AWS's formats, ARNs in the stack's account and
region, auto-names with a random-looking suffix), derived from a hash of its type and name so two runs agree.
In preview mode a new resource returns only its inputs, as the engine does: every computed output is unknown.
Invokes are answered by ``preflight.mock_invokes``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pulumi

from preflight.mock_invokes import ACCOUNT_ID, MockInvokes, az_names, hex_digest
from trainium_eks import sdk_internals as sdk
from trainium_eks import tokens
from trainium_eks.config import PlatformConfig

EKS_CLUSTER_TYPE = tokens.EKS_CLUSTER


def _concat(*lists: Any) -> Any:
    """Concatenate list inputs; an unknown list (preview) makes the result unknown."""
    if any(isinstance(v, pulumi.output.Unknown) for v in lists):
        return pulumi.output.Unknown()
    return [item for v in lists for item in (v or [])]


class PlatformMocks(MockInvokes, pulumi.runtime.Mocks):
    def __init__(self, config: PlatformConfig, preview: bool):
        self.config = config
        self.region = config.region
        self.preview = preview
        self.monitor: sdk.MockMonitor | None = None  # set by the monitor; needed to register eksCluster
        self.request = threading.local()  # the monitor puts the URN being registered here
        self._outputs: dict[str, Callable[[str, dict, str], dict]] = {
            tokens.EC2_VPC: lambda n, i, h: {"id": f"vpc-{h}", "arn": self._arn("ec2", f"vpc/vpc-{h}")},
            tokens.EC2_SUBNET: self._subnet,
            tokens.EC2_INTERNET_GATEWAY: lambda n, i, h: {"id": f"igw-{h}"},
            tokens.EC2_ROUTE_TABLE: lambda n, i, h: {"id": f"rtb-{h}"},
            tokens.EC2_ROUTE_TABLE_ASSOCIATION: lambda n, i, h: {"id": f"rtbassoc-{h}"},
            tokens.EC2_EIP: lambda n, i, h: {"id": f"eipalloc-{h}", "publicIp": f"198.51.100.{int(h[:2], 16) % 250 + 1}"},
            tokens.EC2_NAT_GATEWAY: lambda n, i, h: {"id": f"nat-{h}"},
            tokens.EC2_SECURITY_GROUP: lambda n, i, h: {
                "id": f"sg-{h}",
                "arn": self._arn("ec2", f"security-group/sg-{h}"),
            },
            tokens.EC2_PLACEMENT_GROUP: lambda n, i, h: self._named(
                n, i, h, lambda name: {"id": name, "placementGroupId": f"pg-{h}"}
            ),
            tokens.EC2_LAUNCH_TEMPLATE: lambda n, i, h: {
                "id": f"lt-{h}",
                "latestVersion": 1,
                "defaultVersion": 1,
                "arn": self._arn("ec2", f"launch-template/lt-{h}"),
            },
            tokens.EKS_NODE_GROUP: lambda n, i, h: {
                "id": f"{i.get('clusterName')}:{i.get('nodeGroupName')}",
                "status": "ACTIVE",
                "arn": self._arn("eks", f"nodegroup/{i.get('clusterName')}/{i.get('nodeGroupName')}/{h[:8]}"),
            },
            tokens.EKS_ADDON: lambda n, i, h: {"id": f"{i.get('clusterName')}:{i.get('addonName')}"},
            tokens.KMS_KEY: lambda n, i, h: self._kms_key(h),
            tokens.KMS_ALIAS: lambda n, i, h: {"id": i.get("name"), "arn": self._arn("kms", i.get("name", ""))},
            tokens.IAM_ROLE: lambda n, i, h: self._named(
                n,
                i,
                h,
                lambda name: {"id": name, "arn": f"arn:aws:iam::{ACCOUNT_ID}:role/{name}", "uniqueId": f"AROA{h.upper()}"},
            ),
            tokens.FSX_LUSTRE_FILE_SYSTEM: self._file_system,
            tokens.FSX_DATA_REPOSITORY_ASSOCIATION: lambda n, i, h: {"id": f"dra-{h}"},
            tokens.ECR_REPOSITORY: lambda n, i, h: {
                "id": i.get("name"),
                "registryId": ACCOUNT_ID,
                "arn": self._arn("ecr", f"repository/{i.get('name')}"),
                "repositoryUrl": f"{ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com/{i.get('name')}",
            },
            tokens.EKS_COMPONENT_CLUSTER: self._eks_cluster,
            tokens.SQS_QUEUE: lambda n, i, h: self._named(
                n,
                i,
                h,
                lambda name: {
                    "id": f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT_ID}/{name}",
                    "arn": self._arn("sqs", name),
                    "url": f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT_ID}/{name}",
                },
            ),
            tokens.CLOUDWATCH_EVENT_RULE: lambda n, i, h: self._named(
                n, i, h, lambda name: {"id": name, "arn": self._arn("events", f"rule/{name}")}
            ),
            tokens.EKS_ACCESS_ENTRY: lambda n, i, h: {
                "id": f"{i.get('clusterName')}:{i.get('principalArn')}",
                "accessEntryArn": self._arn("eks", f"access-entry/{i.get('clusterName')}/role/{h[:8]}"),
            },
            tokens.EC2_INSTANCE: lambda n, i, h: {
                "id": f"i-{h}",
                "arn": self._arn("ec2", f"instance/i-{h}"),
                "privateIp": f"10.{int(h[:2], 16)}.{int(h[2:4], 16)}.{int(h[4:6], 16) % 250 + 4}",
            },
            tokens.IAM_INSTANCE_PROFILE: lambda n, i, h: self._named(
                n, i, h, lambda name: {"id": name, "arn": f"arn:aws:iam::{ACCOUNT_ID}:instance-profile/{name}"}
            ),
            tokens.IAM_POLICY: lambda n, i, h: self._named(
                n,
                i,
                h,
                lambda name: {
                    "id": f"arn:aws:iam::{ACCOUNT_ID}:policy/{name}",
                    "arn": f"arn:aws:iam::{ACCOUNT_ID}:policy/{name}",
                },
            ),
        }

    # ---- resources ------------------------------------------------------------------------------

    def new_resource(self, args: sdk.MockResourceArgs) -> tuple[str | None, dict]:
        inputs = dict(args.inputs)
        if args.typ.startswith("pulumi:providers:") or args.custom is None:
            return f"{args.name}-id", inputs
        if args.typ == tokens.EKS_COMPONENT_CLUSTER:
            self._record_eks_cluster_child(args.name, inputs)
        if self.preview:
            return None, inputs  # a create in preview: inputs known, every computed output unknown
        digest = hex_digest(args.typ, args.name)
        compute = self._outputs.get(args.typ)
        if compute is None and args.typ.startswith("kubernetes:"):
            compute = self._kubernetes_object
        computed = compute(args.name, inputs, digest) if compute else {"id": f"{args.name}-{digest[:8]}"}
        resource_id = computed.pop("id", None) if args.custom else None
        return resource_id, {**inputs, **computed}

    def _arn(self, service: str, resource: str) -> str:
        return f"arn:aws:{service}:{self.region}:{ACCOUNT_ID}:{resource}"

    @staticmethod
    def _named(name: str, inputs: dict, digest: str, more: Callable[[str], dict]) -> dict:
        physical = inputs.get("name") or f"{name}-{digest[:7]}"  # the engine's auto-naming
        return {"name": physical, **more(physical)}

    def _subnet(self, name: str, inputs: dict, digest: str) -> dict:
        az_id = inputs.get("availabilityZoneId")
        return {
            "id": f"subnet-{digest}",
            "availabilityZone": az_names(self.region).get(az_id, ""),
            "arn": self._arn("ec2", f"subnet/subnet-{digest}"),
        }

    def _kms_key(self, digest: str) -> dict:
        key_id = f"{digest[:8]}-{digest[8:12]}-4{digest[12:15]}-a{digest[15:17]}{digest[:1]}-{hex_digest(digest, length=12)}"
        return {"id": key_id, "keyId": key_id, "arn": self._arn("kms", f"key/{key_id}")}

    def _file_system(self, name: str, inputs: dict, digest: str) -> dict:
        fs_id = f"fs-{digest}"
        return {
            "id": fs_id,
            "arn": self._arn("fsx", f"file-system/{fs_id}"),
            "dnsName": f"{fs_id}.fsx.{self.region}.amazonaws.com",
            "mountName": hex_digest(fs_id, length=8),
            "vpcId": f"vpc-{hex_digest('aws:ec2/vpc:Vpc', 'trainium-network-vpc')}",
        }

    def _kubernetes_object(self, name: str, inputs: dict, digest: str) -> dict:
        metadata = dict(inputs.get("metadata") or {})
        metadata.setdefault("name", f"{name}-{digest[:8]}")
        metadata["uid"] = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{hex_digest(digest, length=12)}"
        namespace = metadata.get("namespace")
        return {"id": f"{namespace}/{metadata['name']}" if namespace else metadata["name"], "metadata": metadata}

    def _eks_cluster_urn(self, name: str) -> str:
        """The URN of the aws:eks/cluster:Cluster that pulumi-eks creates inside the component being registered."""
        stack_project, qualified_type = self.request.urn.rsplit("::", 2)[:2]
        return f"{stack_project}::{qualified_type}${EKS_CLUSTER_TYPE}::{name}-eksCluster"

    def _record_eks_cluster_child(self, name: str, inputs: dict) -> None:
        """pulumi-eks is a remote component whose provider never runs under mocks; record its cluster child."""
        self.monitor.record_remote_child(
            self._eks_cluster_urn(name),
            EKS_CLUSTER_TYPE,
            f"{name}-eksCluster",
            self.request.urn,
            {  # what pulumi-eks passes to the aws:eks/cluster:Cluster it creates, from the component's inputs
                "name": inputs.get("name"),
                "version": inputs.get("version"),
                "enabledClusterLogTypes": inputs.get("enabledClusterLogTypes"),
                "encryptionConfig": {"provider": {"keyArn": inputs.get("encryptionConfigKeyArn")}, "resources": ["secrets"]},
                "accessConfig": {"authenticationMode": inputs.get("authenticationMode")},
                "vpcConfig": {
                    "endpointPrivateAccess": inputs.get("endpointPrivateAccess"),
                    "endpointPublicAccess": inputs.get("endpointPublicAccess"),
                    "publicAccessCidrs": inputs.get("publicAccessCidrs") or ["0.0.0.0/0"],  # EKS's default
                    "subnetIds": _concat(inputs.get("privateSubnetIds"), inputs.get("publicSubnetIds")),
                },
                "tags": inputs.get("tags"),
            },
        )

    def _eks_cluster(self, name: str, inputs: dict, digest: str) -> dict:
        """The component's outputs, and the cluster child the SDK resolves ``eks_cluster`` to."""
        cluster_name = inputs.get("name") or f"{name}-eksCluster-{digest[:7]}"
        oidc_id = hex_digest(cluster_name, "oidc", length=32).upper()
        issuer = f"oidc.eks.{self.region}.amazonaws.com/id/{oidc_id}"
        endpoint = f"https://{oidc_id}.gr7.{self.region}.eks.amazonaws.com"
        cluster_urn = self._eks_cluster_urn(name)
        self.monitor.resources[cluster_urn] = sdk.MockMonitor.ResourceRegistration(
            cluster_urn,
            cluster_name,
            {
                "name": cluster_name,
                "arn": self._arn("eks", f"cluster/{cluster_name}"),
                # the cluster role pulumi-eks creates (`<name>-eksRole-role`, auto-named, no path)
                "roleArn": f"arn:aws:iam::{ACCOUNT_ID}:role/{name}-eksRole-role-{digest[:7]}",
                "endpoint": endpoint,
                "version": inputs.get("version"),
                "vpcConfig": {
                    "clusterSecurityGroupId": f"sg-{hex_digest(cluster_name, 'cluster-sg')}",
                    "vpcId": inputs.get("vpcId"),
                },
                "identities": [{"oidcs": [{"issuer": f"https://{issuer}"}]}],
            },
        )
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": "TU9DSw=="}}],
            "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
            "current-context": cluster_name,
            "users": [
                {
                    "name": cluster_name,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "aws",
                            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", self.region],
                        }
                    },
                }
            ],
        }
        return {
            # pulumi-eks marks both kubeconfig outputs secret
            "kubeconfig": {sdk.SIGNATURE_KEY: sdk.SECRET_SIGNATURE, "value": kubeconfig},
            "kubeconfigJson": {sdk.SIGNATURE_KEY: sdk.SECRET_SIGNATURE, "value": json.dumps(kubeconfig)},
            "eksCluster": {sdk.SIGNATURE_KEY: sdk.RESOURCE_SIGNATURE, "urn": cluster_urn, "id": cluster_name},
            "oidcProviderArn": f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{issuer}",
            "oidcProviderUrl": f"https://{issuer}",
            "oidcIssuer": issuer,
        }
