"""Every part of the Pulumi Python SDK and policy SDK beyond their public API that this repository uses, in one place.

The offline engine (``preflight``) records registrations through the SDK's mock monitor and serialises the
stack's outputs as the engine would; the program lists its whole config map; ``preflight check`` serves the packs
through the policy SDK's analyzer servicer, as the CLI does, and has it decode each resource once for all policies;
the policy adapters read the values inside the policy SDK's unknown-checking proxies in one pass. None of that is
public API, so it is read here only, and only from the releases it was written against: importing this module with
another ``pulumi`` or ``pulumi-policy`` installed fails with one line that says what to install.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import version
from types import SimpleNamespace
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
from pulumi_policy import policy as _policy  # noqa: E402
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
    "servicer_decoding",
    "shared_property_decoding",
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


def servicer_decoding() -> tuple[Any, Any, Any]:
    """The three decoding steps the policy servicer calls now (what ``shared_property_decoding`` swaps while open)."""
    return _policy.json_format, _policy.deserialize_properties, _policy.unknown_checking_proxy


@contextmanager
def shared_property_decoding() -> Iterator[None]:
    """While open, the policy servicer decodes each distinct property map once instead of once per policy.

    ``AnalyzeStack`` decodes every resource's properties (``MessageToDict``, ``deserialize_properties``, then the
    unknown-checking proxy) again for each stack policy, and ``Analyze`` again for each resource policy: most of a
    check. Each step is a pure function of the message's bytes, so the values every policy reads are the ones it would
    read otherwise; the proxies are shared, which is safe because the packs' adapters only read them (they copy each
    into plain dicts: ``policies/adapters.py``). A remediation's secrets-preserving decoding, which the remediation
    writes to, is left as the SDK does it.
    """
    decoded: dict[tuple[str, bytes], Any] = {}
    shared: dict[int, tuple[Any, Any]] = {}  # by the identity of a value this context made (kept alive here)
    sdk_decode, sdk_deserialize, sdk_proxy = servicer_decoding()

    def once(value: Any, step) -> Any:
        entry = shared.get(id(value))
        if entry is None or entry[0] is not value:
            entry = shared[id(value)] = (value, step(value))
        return entry[1]

    def message_to_dict(message):  # the servicer passes no options
        key = (message.DESCRIPTOR.full_name, message.SerializeToString(deterministic=True))
        if key not in decoded:
            decoded[key] = sdk_decode.MessageToDict(message)
        return decoded[key]

    deserialized: set[int] = set()  # what deserialize_properties below returned, all kept alive by ``shared``

    def deserialize_properties(props, proxy_secrets=False):
        if proxy_secrets:
            return sdk_deserialize(props, True)
        result = once(props, sdk_deserialize)
        deserialized.add(id(result))
        return result

    def unknown_checking_proxy(props):
        return once(props, sdk_proxy) if id(props) in deserialized else sdk_proxy(props)

    _policy.json_format = SimpleNamespace(MessageToDict=message_to_dict)
    _policy.deserialize_properties, _policy.unknown_checking_proxy = deserialize_properties, unknown_checking_proxy
    try:
        yield
    finally:
        _policy.json_format = sdk_decode
        _policy.deserialize_properties, _policy.unknown_checking_proxy = sdk_deserialize, sdk_proxy


def _run(coroutine: Coroutine) -> Any:
    return _sync_await(coroutine)
