"""The adapter classes by name, filled by :func:`register` as each adapter's
module is imported.

Apart from :mod:`acquirers.adapters`, which looks them up and imports the
built-in adapters first: an adapter's module imports this one, never the
package that imports it back."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

from acquirers.adapters.base import AcquirerAdapter

_REGISTRY: dict[str, type[AcquirerAdapter]] = {}
A = TypeVar("A", bound=type[AcquirerAdapter])


def register(cls: A) -> A:
    # A flag without its method would put the acquirer in chains whose every
    # call it refuses: caught when the class is registered, not in production.
    missing = cls.missing_methods()
    if missing:
        raise TypeError(f"adapter {cls.name!r} claims capabilities it does not implement: {', '.join(missing)}")
    _REGISTRY[cls.name] = cls
    return cls


def registered() -> Mapping[str, type[AcquirerAdapter]]:
    """Every class registered so far, by name (a read-only view)."""
    return MappingProxyType(_REGISTRY)
