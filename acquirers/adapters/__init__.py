"""Adapters by name: ``Acquirer.adapter`` names a class registered in :mod:`.registry`.

Built in: ``sandbox`` (:mod:`.sandbox`), and the API Pix adapters
``bacen_pix`` and ``efi_pix`` (:mod:`.apipix`). What an adapter can do is in
its ``supports_*`` flags; :func:`adapter_names` filters on them for the
selectors.

An adapter that is not ``enabled()`` (the sandbox with ``PIX_SANDBOX`` off) is
as unknown as one never written: not offered, its options refused, an
acquirer using it not built."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acquirers.adapters.base import AcquirerAdapter, AcquirerConfig, Capability, InvalidOptions, UnknownAdapter

# ``register`` lives in .registry, which the adapters' modules import (this
# package imports them); re-exported for adapters defined elsewhere (tests).
from acquirers.adapters.registry import register as register
from acquirers.adapters.registry import registered

if TYPE_CHECKING:
    from acquirers.models import Acquirer


def adapter_names(*, supporting: Capability | None = None) -> list[str]:
    """The enabled adapters' names; ``supporting``: only those that can do that."""
    _load_builtin()
    return sorted(
        name for name, cls in registered().items() if cls.enabled() and (supporting is None or cls.supports(supporting))
    )


def adapter_class(name: str) -> type[AcquirerAdapter]:
    """The class registered as ``name``; :class:`UnknownAdapter` when there is
    none or it is not enabled."""
    _load_builtin()
    cls = registered().get(name)
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
    from acquirers.adapters import sandbox  # noqa: F401
    from acquirers.adapters.apipix import bacen, efi  # noqa: F401
