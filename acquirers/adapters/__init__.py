"""Adapter registry: ``Acquirer.adapter`` names a class registered here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from acquirers.adapters.base import AcquirerAdapter, AcquirerConfig, InvalidOptions

if TYPE_CHECKING:
    from acquirers.models import Acquirer

_REGISTRY: dict[str, type[AcquirerAdapter]] = {}
A = TypeVar("A", bound=type[AcquirerAdapter])


def register(cls: A) -> A:
    _REGISTRY[cls.name] = cls
    return cls


def adapter_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def adapter_class(name: str) -> type[AcquirerAdapter]:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InvalidOptions(f"unknown adapter {name!r}") from None


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
