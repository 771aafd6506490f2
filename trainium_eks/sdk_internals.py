"""Every part of the Pulumi Python SDK beyond its public API that this repository uses, in one place.

The offline engine (``preflight``) records registrations through the SDK's mock monitor and serialises the
stack's outputs as the engine would; the program lists its whole config map. None of that is public API, so
it is read here only, and only from the SDK release it was written against: importing this module with
another ``pulumi`` installed fails with one line that says what to install.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from importlib.metadata import version
from typing import Any

# The release whose internals this module was written against; requirements.txt pins the same (a test checks).
PULUMI_VERSION = "3.272.0"

_installed = version("pulumi")
if _installed != PULUMI_VERSION:
    raise ImportError(
        f"pulumi {_installed} is installed but trainium-eks reads SDK internals of pulumi {PULUMI_VERSION}; "
        "install requirements.txt (make builds .venv from it)"
    )

from pulumi.runtime import config as _config  # noqa: E402
from pulumi.runtime import rpc, settings  # noqa: E402
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs  # noqa: E402
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc, resource_pb2  # noqa: E402
from pulumi.runtime.sync_await import _sync_await  # noqa: E402

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
    "analyzer_pb2",
    "analyzer_pb2_grpc",
    "config_map",
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


def _run(coroutine: Coroutine) -> Any:
    return _sync_await(coroutine)
