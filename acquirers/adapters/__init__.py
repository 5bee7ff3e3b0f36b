"""Adapter registry: ``Acquirer.adapter`` names a class registered here.

An adapter that is not ``enabled()`` (the sandbox with ``PIX_SANDBOX`` off) is
as unknown as one never written: not offered, its options refused, an
acquirer using it not built."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from acquirers.adapters.base import AcquirerAdapter, AcquirerConfig, InvalidOptions, UnknownAdapter

if TYPE_CHECKING:
    from acquirers.models import Acquirer

_REGISTRY: dict[str, type[AcquirerAdapter]] = {}
A = TypeVar("A", bound=type[AcquirerAdapter])


def register(cls: A) -> A:
    _REGISTRY[cls.name] = cls
    return cls


def adapter_names() -> list[str]:
    _load_builtin()
    return sorted(name for name, cls in _REGISTRY.items() if cls.enabled())


def adapter_class(name: str) -> type[AcquirerAdapter]:
    """The class registered as ``name``; :class:`UnknownAdapter` when there is
    none or it is not enabled."""
    _load_builtin()
    cls = _REGISTRY.get(name)
    if cls is None or not cls.enabled():
        raise UnknownAdapter(f"unknown adapter {name!r}")
    return cls


def config_of(acquirer: Acquirer) -> AcquirerConfig:
    return AcquirerConfig(
        key=acquirer.key,
        options=acquirer.options or {},
        connect_timeout=acquirer.connect_timeout_ms / 1000,
        read_timeout=acquirer.read_timeout_ms / 1000,
    )


def build(acquirer: Acquirer) -> AcquirerAdapter:
    return adapter_class(acquirer.adapter)(config_of(acquirer))


def validate_options(adapter: str, options: Any) -> dict[str, Any]:
    if not isinstance(options, dict):
        raise InvalidOptions("options must be a JSON object")
    return adapter_class(adapter).validate_options(options)


def _load_builtin() -> None:
    # Imported lazily: adapters import settings-dependent modules.
    from acquirers.adapters import bacen_pix, efi_pix, sandbox  # noqa: F401
