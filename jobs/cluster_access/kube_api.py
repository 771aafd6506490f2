"""The cluster's API server as the job tools reach it: the stack's kubeconfig, checked once, pointed through the access
host's tunnel when asked (`jobs.api_tunnel`), and a submission whose every failure is one line.

The Kubernetes client logs a credential command that fails as an error and goes on without a token, and urllib3 logs
each retry of a connection; the tools keep those records to themselves and say in one line what failed and what to do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StrictStr, StringConstraints, ValidationError, model_validator

from jobs.errors import LaunchError
from trainium_eks.contract import PlatformContract

DEFAULT_LOCAL_PORT = 8443  # where `jobs.api_tunnel` forwards from, unless --local-port says otherwise
LOOPBACK = "127.0.0.1"
REREAD = "read the outputs again with `pulumi stack output --json --show-secrets`"


class _Entry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)


class Cluster(_Entry):
    server: Annotated[StrictStr, StringConstraints(pattern=r"^https://[^/?#\s]+")]


class NamedCluster(_Entry):
    name: StrictStr
    cluster: Cluster


class Context(_Entry):
    cluster: StrictStr
    user: StrictStr


class NamedContext(_Entry):
    name: StrictStr
    context: Context


class NamedUser(_Entry):
    name: StrictStr
    user: dict[StrictStr, Any]


class Kubeconfig(_Entry):
    """What the tools and the Kubernetes client read of a kubeconfig: its current context's cluster and user."""

    clusters: list[NamedCluster] = Field(min_length=1)
    contexts: list[NamedContext] = Field(min_length=1)
    users: list[NamedUser] = Field(min_length=1)
    current_context: StrictStr = Field(alias="current-context")

    @model_validator(mode="after")
    def _names_resolve(self) -> Kubeconfig:
        contexts = {entry.name: entry.context for entry in self.contexts}
        if self.current_context not in contexts:
            raise ValueError(f"current-context {self.current_context!r} names no context")
        context = contexts[self.current_context]
        if context.cluster not in {entry.name for entry in self.clusters}:
            raise ValueError(f"context {self.current_context!r} names no cluster {context.cluster!r}")
        if context.user not in {entry.name for entry in self.users}:
            raise ValueError(f"context {self.current_context!r} names no user {context.user!r}")
        return self


def stack_kubeconfig(contract: PlatformContract, local_port: int | None = None) -> dict:
    """The stack's kubeconfig (the caller checked there is one), pointed at the local end of the tunnel on
    ``local_port`` when given; one that does not hold together is refused in one line."""
    kubeconfig = json.loads(contract.kubeconfig or "{}")  # the contract checked it is a JSON object
    try:
        Kubeconfig.model_validate(kubeconfig)
    except ValidationError as error:
        detail = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in detail["loc"])
        problem = str(detail["ctx"]["error"]) if detail["type"] == "value_error" else detail["msg"].lower()
        raise LaunchError(f"the outputs' kubeconfig: {f'{where}: ' if where else ''}{problem}; {REREAD}") from None
    return kubeconfig if local_port is None else through_tunnel(kubeconfig, local_port)


def through_tunnel(kubeconfig: dict, local_port: int) -> dict:
    """``kubeconfig`` pointed at the local end of the tunnel, verifying the server under its own name."""
    clusters = []
    for entry in kubeconfig["clusters"]:
        cluster = dict(entry["cluster"])
        cluster.update({"server": f"https://{LOOPBACK}:{local_port}", "tls-server-name": urlsplit(cluster["server"]).hostname})
        clusters.append({**entry, "cluster": cluster})
    return {**kubeconfig, "clusters": clusters}


def unreachable(contract: PlatformContract, tunnel: int | None) -> str:
    """What to say when the API server cannot be reached."""
    print_command = f"python -m jobs.api_tunnel --stack {contract.environment}"
    if tunnel is not None:
        return f"--api-tunnel {tunnel}: nothing answers on {LOOPBACK}:{tunnel}; start the session `{print_command}` prints first"
    if contract.api_access is not None:
        return (
            f"the {contract.environment} API endpoint is private: start the session `{print_command}` prints, "
            f"then add --api-tunnel {DEFAULT_LOCAL_PORT}"
        )
    return f"the API endpoint {contract.cluster_endpoint} does not answer; check the network and publicAccessCidrs"


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.errors.append(record.getMessage())


@contextmanager
def kept_logs() -> Iterator[list[str]]:
    """The error messages the libraries log meanwhile, kept instead of printed. A handler on the root logger also
    keeps ``logging.error`` from configuring the root logger to print to stderr (``logging.basicConfig``)."""
    handler = _Kept()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler.errors
    finally:
        root.removeHandler(handler)


def refused(job: dict, namespace: str, status: int, reason: str, body: Any, problems: list[str]) -> str:
    """The API server's answer to a job it did not create, with what to do about it."""
    try:
        message = json.loads(body)["message"]
    except (TypeError, ValueError, KeyError):
        message = reason
    kind, name = job["kind"], job["metadata"].get("name", "")
    line = f"the API server refused {kind} {namespace}/{name} ({status} {reason}): {message}"
    if status in (401, 403) and problems:  # the client went on without a token
        return f"{line}; the credential command failed: {problems[-1]}"
    if status == 401:
        return f"{line}; check your AWS credentials (aws sts get-caller-identity)"
    if status == 403:
        return f"{line}; your identity needs an EKS access entry (clusterAdminPrincipalArns) or the team's principalArns"
    if status == 409:
        return f"{line}; delete it first (kubectl -n {namespace} delete {kind.lower()} {name}) or choose another --name"
    return line


def submit(job: dict, contract: PlatformContract, api_tunnel: int | None = None) -> str:
    """Create a Volcano Job or a batch/v1 Job in the job namespace with the stack's kubeconfig, through the access
    host's tunnel on local port ``api_tunnel`` when given (``jobs.api_tunnel``); its name, or one line."""
    if contract.kubeconfig is None:
        raise LaunchError("the outputs hold no kubeconfig (secrets hidden); use --stack, or --dryrun to print the job")
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
    from urllib3.exceptions import MaxRetryError, SSLError

    kubeconfig = stack_kubeconfig(contract, api_tunnel)
    namespace = contract.job_namespace
    with kept_logs() as problems:
        try:
            api = config.new_client_from_config_dict(kubeconfig)
            if job["apiVersion"] == "batch/v1":
                return client.BatchV1Api(api).create_namespaced_job(namespace, job).metadata.name
            created = client.CustomObjectsApi(api).create_namespaced_custom_object(
                "batch.volcano.sh", "v1alpha1", namespace, "jobs", job
            )
            return created["metadata"]["name"]
        except ConfigException as error:
            raise LaunchError(f"the outputs' kubeconfig: {error}; {REREAD}") from None
        except MaxRetryError as error:
            if isinstance(error.reason, SSLError):
                raise LaunchError(
                    f"the API server's certificate did not verify ({error.reason}); the tunnel or network leads "
                    f"elsewhere than {contract.cluster_endpoint}, or the outputs' kubeconfig is stale ({REREAD})"
                ) from None
            raise LaunchError(unreachable(contract, api_tunnel)) from None
        except ApiException as error:
            raise LaunchError(refused(job, namespace, error.status, error.reason, error.body, problems)) from None
