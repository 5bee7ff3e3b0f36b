"""The sandbox acquirer's due-date charges (the API Pix ``cobv``), kept in
Redis like the rest of its state (a week), so every process sees the same
acquirer.

A cobv is one JSON record: its status (ATIVA, CONCLUIDA,
REMOVIDA_PELO_USUARIO_RECEBEDOR), ``valor.original`` in centavos, the terms
as asked (``valor``, due date, days payable after it) and the Pix it
received. Its withdrawal and its payment each change it in one step (Lua),
so a payer and a cancel racing end as one of them, never both. Created with
the charge behaviours of ``options["charge"]``.

Its BR Code carries no amount: the payer's app reads the amount of the day
it pays on from the location, as a PSP's cobv code does (the amount with
fine, interest and discount changes with the day). Paying it is the
drivers' (:meth:`SandboxDueCharges.due_charge_pay`), which records the Pix
for reconciliation as ``receive`` does an immediate charge's.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from acquirers import brcode
from acquirers.adapters.apipix.formats import centavos
from acquirers.adapters.base import (
    AcquirerUnavailable,
    DueChargeRequest,
    DueChargeResult,
    DueChargeStatus,
    InvalidResponse,
)
from acquirers.adapters.due import DuePix
from acquirers.adapters.sandbox_state import STATE_TTL, state

ACTIVE = "ATIVA"
PAID = "CONCLUIDA"
REMOVED = "REMOVIDA_PELO_USUARIO_RECEBEDOR"
#: Who the sandbox's codes name as the receiver (a PSP's codes name its account holder).
RECEIVER_NAME = "PIX SERVICE SANDBOX"
RECEIVER_CITY = "SAO PAULO"

# One step each in Redis (KEYS[1]: the cobv's key; ARGV[1]: the TTL). cjson
# writes an empty list as {}: the reader takes either.
#: ATIVA → REMOVIDA (ARGV[2]); anything else stays. Returns the record as it stands, nil when none.
_CANCEL_SCRIPT = """
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local cobv = cjson.decode(raw)
if cobv.status == 'ATIVA' then
  cobv.status = ARGV[2]
  raw = cjson.encode(cobv)
  redis.call('SET', KEYS[1], raw, 'EX', ARGV[1])
end
return raw
"""
#: ATIVA → CONCLUIDA with the Pix (ARGV[2], JSON): 1; paid already: 1, its first Pix kept; removed or none: 0.
_PAY_SCRIPT = """
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local cobv = cjson.decode(raw)
if cobv.status == 'CONCLUIDA' then return 1 end
if cobv.status ~= 'ATIVA' then return 0 end
cobv.status = 'CONCLUIDA'
cobv.pix = {cjson.decode(ARGV[2])}
redis.call('SET', KEYS[1], cjson.encode(cobv), 'EX', ARGV[1])
return 1
"""


def answered_emv(emv: str, behaviour: str) -> str:
    """The BR Code a charge (cob or cobv) is answered with: ``invalid_emv``'s has a CRC16 that does not match."""
    return emv[:-4] + ("0000" if emv[-4:] != "0000" else "FFFF") if behaviour == "invalid_emv" else emv


def location_of(txid: str) -> str:
    return f"pix.sandbox.local/qr/v2/cobv/{txid}"


def _status(txid: str, cobv: Mapping[str, Any]) -> DueChargeStatus:
    pix = tuple(
        DuePix(
            e2e_id=str(p["e2e_id"]),
            amount=int(p["amount"]),
            paid_at=dt.datetime.fromisoformat(p["paid_at"]),
            components={str(k): int(v) for k, v in (p.get("components") or {}).items()},
        )
        for p in (cobv.get("pix") or ())  # {} when cjson wrote an empty list
    )
    return DueChargeStatus(txid=txid, status=str(cobv["status"]), original=int(cobv["original"]), pix=pix, raw=cobv)


class SandboxDueCharges:
    """The cobv half of :class:`~acquirers.adapters.sandbox.SandboxAdapter` (a mixin)."""

    if TYPE_CHECKING:  # provided by SandboxAdapter

        def _key(self, *parts: str) -> str: ...

        def _late(self) -> None: ...

        def _charge_behaviour(self) -> str: ...

        def receive(
            self,
            *,
            txid: str,
            amount: int,
            e2e_id: str,
            at: dt.datetime,
            components: Mapping[str, int] | None = None,
        ) -> None: ...

    # ------------------------------------------------------------------ the adapter interface

    def create_due_charge(self, request: DueChargeRequest) -> DueChargeResult:
        """PUT /cobv/{txid}'s counterpart: idempotent on the txid (the
        record first written stands: a retry neither revives a withdrawn
        cobv nor forgets a paid one; a txid holding another amount, or no
        longer ATIVA, is an answer we cannot use, as ``bacen_pix`` reads it)."""
        behaviour = self._charge_behaviour()
        original = centavos(request.valor.get("original"))
        record = {
            "status": ACTIVE,
            "original": original,
            "valor": dict(request.valor),
            "due_date": request.due_date.isoformat(),
            "validity_after_due": request.validity_after_due,
            "debtor_document": request.debtor_document,
            "pix": [],
        }
        key = self._key("cobv", request.txid)
        state().set(key, json.dumps(record), ex=STATE_TTL, nx=True)
        if behaviour == "timeout":
            self._late()  # created, but we hear nothing in time
        stored = self.due_charge_status(request.txid)
        if stored.status != ACTIVE or stored.original != original:
            raise InvalidResponse(f"sandbox: cobv {request.txid} is {stored.status} for {stored.original}")
        location = location_of(request.txid)
        emv = brcode.encode_dynamic(
            location=location, amount=None, merchant_name=RECEIVER_NAME, merchant_city=RECEIVER_CITY
        )
        return DueChargeResult(
            provider_charge_id=f"sbx_{request.txid}",
            emv=answered_emv(emv, behaviour),
            location=location,
            status=ACTIVE,
        )

    def due_charge_status(self, txid: str) -> DueChargeStatus:
        """The cobv as the sandbox holds it; "not found (yet)" (unavailable,
        as ``cancel_charge`` answers) when it holds none."""
        raw = state().get(self._key("cobv", txid))
        if raw is None:
            raise AcquirerUnavailable(f"sandbox: due-date charge {txid} not found (yet)")
        return _status(txid, json.loads(raw))

    def cancel_due_charge(self, txid: str) -> DueChargeStatus:
        """Withdraw it in one step: ATIVA → REMOVIDA_PELO_USUARIO_RECEBEDOR;
        paid first, it stays CONCLUIDA; asked again, the same answer."""
        raw = state().eval(_CANCEL_SCRIPT, 1, self._key("cobv", txid), STATE_TTL, REMOVED)
        if raw is None:  # as a PSP's 404 while the late create is in flight: asked again
            raise AcquirerUnavailable(f"sandbox: due-date charge {txid} not found (yet)")
        return _status(txid, json.loads(str(raw)))

    # ------------------------------------------------------------------ the drivers' side

    def due_charge_pay(
        self, txid: str, *, e2e_id: str, amount: int, components: Mapping[str, int], at: dt.datetime
    ) -> bool:
        """The payer pays the cobv ``amount`` centavos (``components``: its
        ``componentesValor``): ATIVA → CONCLUIDA with this Pix, recorded for
        reconciliation (``list_received``) as ``receive`` records an
        immediate charge's. False, changing nothing, once withdrawn (or never
        created); True when paid already, its first Pix standing."""
        pix = {"e2e_id": e2e_id, "amount": amount, "components": dict(components), "paid_at": at.isoformat()}
        paid = bool(state().eval(_PAY_SCRIPT, 1, self._key("cobv", txid), STATE_TTL, json.dumps(pix)))
        if paid:
            # The Pix the cobv kept (this one, or the first when paid already):
            # the first record stands in receive too, so a repeat changes nothing.
            first = self.due_charge_status(txid).pix[0]
            self.receive(
                txid=txid, amount=first.amount, e2e_id=first.e2e_id, at=first.paid_at or at, components=first.components
            )
        return paid
