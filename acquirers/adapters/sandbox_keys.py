"""The sandbox's DICT: who owns a Pix key (``key_lookup``, the payee check).

Deterministic rules, so tests and the demo know the answer in advance
(docs/api/payee-check.md, "The sandbox's DICT"):

- a key registered with :func:`register_key_owner` (tests, the demo) answers
  its registered owner, or "not found" when registered as absent;
- a ``cpf`` or ``cnpj`` key is owned by that document;
- an ``email``, ``phone`` or ``random`` key whose value contains
  ``naoexiste`` is not found (``naoexiste@example.com``);
- any other key is owned by a natural person whose CPF is derived from the
  key (:func:`derived_cpf`: the SHA-256 of ``type:value``, check digits made valid).

A CPF is answered masked as the DICT masks it (``***456789**``, the six
middle digits); a CNPJ in full. The bank is the sandbox's (ISPB 99999999).
Option ``key_lookup``: ``ok`` (default), ``fail`` (unavailable) or
``timeout`` (answers past the deadline).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, ClassVar

from django.core.cache import cache

from acquirers.adapters.base import AcquirerConfig, AcquirerUnavailable, KeyOwner, RecordNotFound
from acquirers.adapters.sandbox_state import STATE_TTL
from acquirers.adapters.sandbox_state import state as _state
from core import deadline

KEY_LOOKUP_BEHAVIOURS = ("ok", "fail", "timeout")
SANDBOX_BANK = ("99999999", "Sandbox Pagamentos S.A.")
#: A key whose value contains this is not in the sandbox's DICT.
NOT_FOUND_MARK = "naoexiste"
_VERSION = 2  # as the sandbox's other state (strings, not pickles)


def _owner_key(acquirer_key: str, key_type: str, key_value: str) -> str:
    return cache.make_key(f"sandbox:{acquirer_key}:dict:{key_type}:{key_value}", version=_VERSION)


def register_key_owner(
    acquirer_key: str, key_type: str, key_value: str, *, name: str = "", document: str = "", found: bool = True
) -> None:
    """Tests and the demo: the owner the sandbox acquirer ``acquirer_key``
    answers for this key (``found=False``: "not found"). ``document``
    digits, answered as the DICT discloses it (a CPF masked)."""
    value: dict[str, Any] = {"found": found, "name": name, "document": document}
    _state().set(_owner_key(acquirer_key, key_type, key_value), json.dumps(value), ex=STATE_TTL)


def mask_cpf(cpf: str) -> str:
    """The DICT's disclosure of a natural person's CPF: the six middle digits."""
    return f"***{cpf[3:9]}**"


def derived_cpf(key_type: str, key_value: str) -> str:
    """A valid CPF derived from the key (the sandbox owner of an e-mail, phone or random key)."""
    digest = hashlib.sha256(f"{key_type}:{key_value}".encode()).hexdigest()
    base = [int(c, 16) % 10 for c in digest[:9]]
    for length in (9, 10):
        total = sum(d * (length + 1 - i) for i, d in enumerate(base[:length]))
        base.append(0 if total % 11 < 2 else 11 - total % 11)
    return "".join(map(str, base))


def _disclosed(document: str) -> str:
    return mask_cpf(document) if len(document) == 11 and document.isdigit() else document


class SandboxKeyLookup:
    """``lookup_key`` of :class:`~acquirers.adapters.sandbox.SandboxAdapter`."""

    supports_key_lookup: ClassVar[bool] = True
    if TYPE_CHECKING:  # provided by AcquirerAdapter
        options: dict[str, Any]
        config: AcquirerConfig

    def lookup_key(self, key_type: str, key_value: str) -> KeyOwner:
        behaviour = self.options.get("key_lookup", "ok")
        if behaviour == "fail":
            raise AcquirerUnavailable("sandbox: key lookup refused (options.key_lookup = fail)")
        if behaviour == "timeout":
            deadline.sleep(self.config.connect_timeout + self.config.read_timeout + 0.5)
        bank_ispb, bank_name = SANDBOX_BANK
        raw = _state().get(_owner_key(self.config.key, key_type, key_value))
        if raw is not None:
            registered = json.loads(raw)
            if not registered["found"]:
                raise RecordNotFound(f"sandbox: no such {key_type} key in the DICT")
            document = registered["document"]
            name = registered["name"] or "Titular Registrado"
        elif key_type in ("cpf", "cnpj"):
            document, name = key_value, f"Titular {key_type.upper()} {key_value[-4:]}"
        elif NOT_FOUND_MARK in key_value.lower():
            raise RecordNotFound(f"sandbox: no such {key_type} key in the DICT")
        else:
            document = derived_cpf(key_type, key_value)
            name = f"Titular Sandbox {document[3:7]}"
        return KeyOwner(name=name, document=_disclosed(document), ispb=bank_ispb, bank_name=bank_name)
