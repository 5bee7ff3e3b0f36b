"""The payee check (DICT lookup): part of the adapter interface, re-exported
by :mod:`acquirers.adapters.base`.

Before money leaves, the service asks an acquirer that offers it who owns
the destination key (Banco Central's DICT, through the PSP): the owner's
name, document and bank. Banco Central throttles lookups that lead to no
payment, so callers cache answers for a bounded time and count them per
account (withdrawals.payees); a lookup moves no money and needs no
idempotency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, NoReturn

#: The capability below (part of ``acquirers.adapters.base.Capability``).
KeyLookupCapability = Literal["key_lookup"]


@dataclass(frozen=True)
class KeyOwner:
    """Who owns a Pix key, as the DICT discloses it through the PSP.

    ``document`` is as the PSP gives it, digits and ``*`` only: a CNPJ in
    full (14 characters), a natural person's CPF masked as the DICT masks it
    (11 characters, e.g. ``***456789**``) or in full when the PSP discloses
    it. ``name`` may be abbreviated by the DICT's rules."""

    name: str
    document: str
    ispb: str  # the key's bank (8 digits)
    bank_name: str = ""


class KeyLookupMethods:
    """The DICT lookup of :class:`~acquirers.adapters.base.AcquirerAdapter`;
    the default refuses, as the other optional capabilities' do."""

    name: ClassVar[str]
    supports_key_lookup: ClassVar[bool] = False
    unsupported_error: ClassVar[type[Exception]]

    def _no_key_lookup(self) -> NoReturn:
        raise self.unsupported_error(f"{self.name}: key lookup is not supported")

    def lookup_key(self, key_type: str, key_value: str) -> KeyOwner:
        """The owner of the key (``key_type`` cpf/cnpj/email/phone/random,
        ``key_value`` in our stored form). :class:`RecordNotFound` when no
        such key is registered; :class:`AcquirerUnavailable` and
        :class:`AcquirerTimeout` as any call (nothing is known)."""
        self._no_key_lookup()
