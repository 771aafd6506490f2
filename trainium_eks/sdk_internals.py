"""Every part of the Pulumi Python SDK and policy SDK beyond their public API that this repository uses, in one place.

The offline engine (``preflight``) records registrations through the SDK's mock monitor and serialises the
stack's outputs as the engine would; the program lists its whole config map; ``preflight check`` serves the packs
through the policy SDK's analyzer servicer, as the CLI does; the policy adapters read the values inside the policy
SDK's unknown-checking proxies in one pass. None of that is public API, so it is read here only, and only from the
releases it was written against: importing this module with another ``pulumi`` or ``pulumi-policy`` installed fails
with one line that says what to install.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from importlib.metadata import version
from typing import Any

# The release whose internals this module was written against; requirements.txt pins the same (a test checks).
PULUMI_VERSION = "3.272.0"
PULUMI_POLICY_VERSION = "1.21.0"

for _package, _pinned in (("pulumi", PULUMI_VERSION), ("pulumi-policy", PULUMI_POLICY_VERSION)):
    if version(_package) != _pinned:
        raise ImportError(
            f"{_package} {version(_package)} is installed but trainium-eks reads SDK internals of {_package} {_pinned}; "
            "install requirements.txt (make builds .venv from it)"
        )

from pulumi.runtime import config as _config  # noqa: E402
from pulumi.runtime import rpc, settings  # noqa: E402
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs  # noqa: E402
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc, resource_pb2  # noqa: E402
from pulumi.runtime.sync_await import _sync_await  # noqa: E402
from pulumi_policy.policy import _PolicyAnalyzerServicer as PolicyAnalyzerServicer  # noqa: E402
from pulumi_policy.proxy import _DictProxy, _ListProxy  # noqa: E402

# How the SDK marks secrets, resource references and unknowns in serialised property maps.
SIGNATURE_KEY = rpc._special_sig_key
SECRET_SIGNATURE = rpc._special_secret_sig
RESOURCE_SIGNATURE = rpc._special_resource_sig
UNKNOWN = rpc.UNKNOWN

__all__ = [
    "RESOURCE_SIGNATURE",
    "SECRET_SIGNATURE",
    "SIGNATURE_KEY",
    "UNKNOWN",
    "MockCallArgs",
    "MockMonitor",
    "MockResourceArgs",
    "PolicyAnalyzerServicer",
    "analyzer_pb2",
    "analyzer_pb2_grpc",
    "config_map",
    "proxy_target",
    "reset_root_resource",
    "resource_pb2",
    "stack_outputs",
]


def config_map() -> Mapping[str, str]:
    """The running program's whole config: the CLI's map plus anything set in-process (tests, mocks)."""
    return {**_config.get_config_env(), **_config.CONFIG.get()}


def reset_root_resource() -> None:
    """Forget the previous program's stack resource, so the next program under mocks registers its own."""
    settings.set_root_resource(None)


def stack_outputs() -> Any:
    """The registered stack's outputs, serialised as the SDK sends them to the engine (a protobuf Struct)."""
    root = settings.get_root_resource()
    return _run(rpc.serialize_properties(root.outputs, {}))


_PROXIES = (_DictProxy, _ListProxy)  # compared by type: an isinstance check through the ABCs costs more than the read


def proxy_target(value: Any) -> Any:
    """The dict or list inside a policy SDK proxy (its items proxied in turn, unknowns left as their sentinels), or
    ``value`` itself: the same values as reading every item through the proxy, without an exception per unknown."""
    return value["__target"] if type(value) in _PROXIES else value


def _run(coroutine: Coroutine) -> Any:
    return _sync_await(coroutine)
