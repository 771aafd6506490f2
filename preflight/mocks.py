"""Mock AWS and Kubernetes providers for offline evaluation: realistic, deterministic outputs and invokes.

A resource gets the outputs its provider would compute (IDs in AWS's formats, ARNs in the stack's account and
region, auto-names with a random-looking suffix), derived from a hash of its type and name so two runs agree.
Invokes answer from the hardware catalog (AZ IDs and names, instance-type offerings). In preview mode a new
resource returns only its inputs, as the engine does: every computed output is unknown.
"""

from __future__ import annotations

import hashlib
import json
import string
import threading
from collections.abc import Callable
from typing import Any

import pulumi

from trainium_eks import catalog, tokens
from trainium_eks import sdk_internals as sdk
from trainium_eks.config import PlatformConfig

ACCOUNT_ID = "123456789012"
EKS_CLUSTER_TYPE = tokens.EKS_CLUSTER


class UnmockedInvokeError(Exception):
    """The program called an invoke the offline engine does not answer; add it to ``PlatformMocks``."""


def _hex(*parts: str, length: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


def _concat(*lists: Any) -> Any:
    """Concatenate list inputs; an unknown list (preview) makes the result unknown."""
    if any(isinstance(v, pulumi.output.Unknown) for v in lists):
        return pulumi.output.Unknown()
    return [item for v in lists for item in (v or [])]


def az_names(region: str) -> dict[str, str]:
    """AZ ID -> AZ name for the mock account (real accounts map IDs to names in their own order)."""
    return {az_id: f"{region}{string.ascii_lowercase[i]}" for i, az_id in enumerate(catalog.REGIONS[region])}


class PlatformMocks(pulumi.runtime.Mocks):
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
        digest = _hex(args.typ, args.name)
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
        key_id = f"{digest[:8]}-{digest[8:12]}-4{digest[12:15]}-a{digest[15:17]}{digest[:1]}-{_hex(digest, length=12)}"
        return {"id": key_id, "keyId": key_id, "arn": self._arn("kms", f"key/{key_id}")}

    def _file_system(self, name: str, inputs: dict, digest: str) -> dict:
        fs_id = f"fs-{digest}"
        return {
            "id": fs_id,
            "arn": self._arn("fsx", f"file-system/{fs_id}"),
            "dnsName": f"{fs_id}.fsx.{self.region}.amazonaws.com",
            "mountName": _hex(fs_id, length=8),
            "vpcId": f"vpc-{_hex('aws:ec2/vpc:Vpc', 'trainium-network-vpc')}",
        }

    def _kubernetes_object(self, name: str, inputs: dict, digest: str) -> dict:
        metadata = dict(inputs.get("metadata") or {})
        metadata.setdefault("name", f"{name}-{digest[:8]}")
        metadata["uid"] = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{_hex(digest, length=12)}"
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
        oidc_id = _hex(cluster_name, "oidc", length=32).upper()
        issuer = f"oidc.eks.{self.region}.amazonaws.com/id/{oidc_id}"
        endpoint = f"https://{oidc_id}.gr7.{self.region}.eks.amazonaws.com"
        cluster_urn = self._eks_cluster_urn(name)
        self.monitor.resources[cluster_urn] = sdk.MockMonitor.ResourceRegistration(
            cluster_urn,
            cluster_name,
            {
                "name": cluster_name,
                "arn": self._arn("eks", f"cluster/{cluster_name}"),
                "endpoint": endpoint,
                "version": inputs.get("version"),
                "vpcConfig": {"clusterSecurityGroupId": f"sg-{_hex(cluster_name, 'cluster-sg')}", "vpcId": inputs.get("vpcId")},
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

    # ---- invokes --------------------------------------------------------------------------------

    def call(self, args: sdk.MockCallArgs) -> tuple[dict, list]:
        handler = {
            tokens.INDEX_GET_AVAILABILITY_ZONES: self._availability_zones,
            tokens.INDEX_GET_AVAILABILITY_ZONE: self._availability_zone,
            tokens.EC2_GET_INSTANCE_TYPE_OFFERINGS: self._offerings,
            tokens.EC2_GET_SUBNET: self._get_subnet,
            tokens.IAM_GET_POLICY_DOCUMENT: self._policy_document,
            tokens.EKS_GET_ADDON_VERSION: self._addon_version,
            tokens.EKS_GET_CLUSTERS: self._clusters,
            tokens.SSM_GET_PARAMETER: self._parameter,
            tokens.INDEX_GET_CALLER_IDENTITY: lambda args: {
                "id": ACCOUNT_ID,
                "accountId": ACCOUNT_ID,
                "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/preflight",
                "userId": "AIDAPREFLIGHT",
            },
        }.get(args.token)
        if handler is None:
            raise UnmockedInvokeError(f"preflight has no answer for invoke {args.token}; add it to preflight/mocks.py")
        return handler(args.args), []

    def _parameter(self, args: dict) -> dict:
        """A public parameter of an AMI (the only kind the platform reads): an image ID that follows the name."""
        name = args.get("name", "")
        if not name.startswith("/aws/service/ami-"):
            raise UnmockedInvokeError(f"preflight knows only public AMI parameters, not {name}")
        value = f"ami-{_hex(self.region, name)}"
        return {"id": name, "name": name, "type": "String", "value": value, "insecureValue": value, "version": 1}

    def _availability_zones(self, args: dict) -> dict:
        names = az_names(self.region)
        return {
            "id": self.region,
            "names": list(names.values()),
            "zoneIds": list(names),
            "groupNames": [self.region] * len(names),
        }

    def _availability_zone(self, args: dict) -> dict:
        az_id = args.get("zoneId")
        names = az_names(self.region)
        if az_id not in names:
            raise ValueError(f"no availability zone with ID {az_id} in {self.region}")
        return {
            "name": names[az_id],
            "zoneId": az_id,
            "region": self.region,
            "state": "available",
            "zoneType": "availability-zone",
        }

    def _offerings(self, args: dict) -> dict:
        filters = {f["name"]: f["values"] for f in args.get("filters", [])}
        locations = filters.get("location", [])
        offered = [
            (instance_type, az_id)
            for instance_type in filters.get("instance-type", [])
            for az_id in locations
            if catalog.INSTANCE_TYPES[instance_type].offered_in(self.region, az_id)
        ]
        return {
            "id": self.region,
            "instanceTypes": [t for t, _ in offered],
            "locations": [az for _, az in offered],
            "locationTypes": [args.get("locationType")] * len(offered),
        }

    def _clusters(self, args: dict) -> dict:
        # A new stack: EKS has none of its clusters yet (tests override this for a stack that exists).
        return {"id": self.region, "names": []}

    def _get_subnet(self, args: dict) -> dict:
        # Existing subnets are assumed to lie where the stack says; tests override this to exercise the check.
        return {"id": args.get("id"), "availabilityZoneId": self.config.network.trainium_az_id}

    @staticmethod
    def _policy_document(args: dict) -> dict:
        statements = []
        for s in args.get("statements", []):
            statement: dict[str, Any] = {"Effect": s.get("effect", "Allow"), "Action": s.get("actions", [])}
            for principal in s.get("principals", []):
                statement.setdefault("Principal", {})[principal["type"]] = principal["identifiers"]
            for condition in s.get("conditions", []):
                statement.setdefault("Condition", {}).setdefault(condition["test"], {})[condition["variable"]] = condition[
                    "values"
                ]
            if "resources" in s:
                statement["Resource"] = s["resources"]
            statements.append(statement)
        document = json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)
        return {"id": _hex(document), "json": document, "minifiedJson": document}

    @staticmethod
    def _addon_version(args: dict) -> dict:
        # EKS's add-on catalog is not known offline; the answer has the real format, names the mock and, as EKS's
        # default build does, changes with the cluster's version (so a diff shows the add-ons move with it).
        version = f"v0.0.0-eksbuild.preflight.k8s-{str(args.get('kubernetesVersion')).replace('.', '-')}"
        return {"id": args.get("addonName"), "addonName": args.get("addonName"), "version": version}
