"""The sandbox acquirer's Pix Automático (API Pix ``/rec``, ``/solicrec``,
``/locrec``, ``/cobr``), and the payer's bank it talks to, simulated: kept in
Redis like the rest of its state (a week), so every process sees the same
acquirer.

A recurrence (rec) is one JSON record: its ``idRec``, status (CRIADA,
APROVADA, REJEITADA, EXPIRADA, CANCELADA), the terms as asked, the journey,
the push request sent (``push``), who ended it and why, and the txids of its
cycle charges. A cycle charge (cobr) is another: status (ATIVA, CONCLUIDA,
REJEITADA, CANCELADA), ``valor.original`` in centavos, due date, the
recurrence's retry policy (copied: it never changes), its attempts
(``tentativas``) and the Pix it received. Every change of either is one Lua
script, so racing changes (a payer's bank settling while the receiver
cancels, a payer cancelling while a cobr is created) end as one of them,
never both.

The adapter side is the interface (:class:`acquirers.adapters.recurrence.RecurrenceMethods`);
the payer's side, what the payer and the payer's bank would do, is the
drivers' (``recurrence_approve``... ``cycle_settle``, ``cycle_fail``), called
by the sandbox's HTTP routes and by tests. A settled attempt's Pix is
recorded for reconciliation (``list_received``) as ``receive`` records an
immediate charge's.

What the sandbox does not check, leaving it to the service's schedule
(:mod:`payments.recurrence_schedule`), since it would need the calendar and
the clock the drivers stand in for: a cobr's due date after its creation and
one live cobr per cycle, a cancel before the first attempt's day, a retry
"in the future" and before the next cycle.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import string
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from acquirers import brcode
from acquirers.adapters.base import AcquirerDeclined, AcquirerUnavailable, InvalidResponse
from acquirers.adapters.due import DuePix
from acquirers.adapters.recurrence import (
    JOURNEY_PUSH,
    JOURNEY_QR,
    CycleAttempt,
    CycleChargeRequest,
    CycleChargeState,
    PushRequest,
    PushSent,
    RecurrenceCreated,
    RecurrenceRequest,
    RecurrenceState,
)
from acquirers.adapters.sandbox_due import RECEIVER_CITY, RECEIVER_NAME, answered_emv
from acquirers.adapters.sandbox_state import STATE_TTL, state

#: The sandbox's ISPB in the ids it assigns: ``sandbox.SANDBOX_ISPB`` (that module imports this one).
RECEIVER_ISPB = "99999999"
CREATED = "CRIADA"
APPROVED = "APROVADA"
REJECTED = "REJEITADA"
EXPIRED = "EXPIRADA"
CANCELLED = "CANCELADA"
ACTIVE = "ATIVA"
CONCLUDED = "CONCLUIDA"
SCHEDULED = "AGENDADA"
ALLOWS_RETRIES = "PERMITE_3R_7D"
MAX_RETRIES = 3
RETRY_SPAN_DAYS = 7
#: ``tentativas[].rejeicao.codigo``. The schema: "Os códigos de rejeição da
#: tentativa AC05, AM09, DENC, DS27, DTED, MIDI, MSUC, NITX, RC09 ... causam
#: a rejeição da cobrança recorrente correspondente"; the others leave the
#: cobr ATIVA, open to a retry.
ENDING_REJECTION_CODES = frozenset({"AC05", "AM09", "DENC", "DS27", "DTED", "MIDI", "MSUC", "NITX", "RC09"})
REJECTION_CODES = ENDING_REJECTION_CODES | {
    "AB10",
    "AC06",
    "AM02",
    "DTNT",
    "FBRD",
    "IRNT",
    "NIEC",
    "NIPA",
    "QUNT",
    "UDEI",
}
#: What a failed attempt says by default: AM02 (ISO 20022 "NotAllowedAmount",
#: the amount the payer's account may not be debited now), a failure a later
#: day may cure, so it does not end the cobr (the AM04 of an immediate Pix,
#: insufficient funds, is not among the schema's codes).
DEFAULT_REJECTION = "AM02"

# encerramento codes (the schema's catalogues). Rec: SLCR, the receiver's
# request (the schema's own example), SLDB the payer's (debtor's); rejected
# by the payer, AP13. Cobr: SLCR, the receiver's request (the example); CCLD
# when its recurrence was cancelled under it.
_REC_CANCELLED_BY_RECEIVER = ("USUARIO_RECEBEDOR", "SLCR", "Cancelamento solicitado pelo usuário recebedor")
_REC_CANCELLED_BY_PAYER = ("USUARIO_PAGADOR", "SLDB", "Cancelamento solicitado pelo usuário pagador")
_REC_REJECTED = "AP13: Recorrência rejeitada pelo usuário pagador"
_COBR_CANCELLED_BY_RECEIVER = "SLCR: Cancelamento de agendamento solicitado pelo usuário recebedor"
_COBR_CANCELLED_WITH_REC = "CCLD: Recorrência cancelada"

_ALNUM = string.ascii_letters + string.digits

# One step each in Redis (KEYS[1]: the record's key; ARGV[1]: the TTL). cjson
# writes an empty list as {}: the reader takes either. Times (ISO) come from
# the caller; dates compare as ISO strings.

#: A cobr ends cancelled: ATIVA → CANCELADA, its scheduled attempts with it. Shared by both cancels.
_CANCEL_COBR_FN = """
local function cancel_cobr(cobr, by, reason, at)
  if cobr.status ~= 'ATIVA' then return false end
  cobr.status = 'CANCELADA'
  cobr.cancelled_by = by
  cobr.reason = reason
  for _, attempt in ipairs(cobr.attempts) do
    if attempt.status == 'AGENDADA' or attempt.status == 'SOLICITADA' then attempt.status = 'CANCELADA' end
  end
  table.insert(cobr.atualizacao, {status = 'CANCELADA', data = at})
  return true
end
"""
#: CRIADA → ARGV[2] (APROVADA, REJEITADA, EXPIRADA) with the payer's ISPB
#: (ARGV[3], "" to keep), the reason (ARGV[4]), its push request's end
#: (ARGV[5]) at ARGV[6]; from anything else it stays. The record as it stands; nil when none.
_DECIDE_SCRIPT = """
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local rec = cjson.decode(raw)
if rec.status ~= 'CRIADA' then return raw end
rec.status = ARGV[2]
if ARGV[3] ~= '' then rec.payer_ispb = ARGV[3] end
rec.reason = ARGV[4]
if type(rec.push) == 'table' and rec.push.status == 'ENVIADA' then rec.push.status = ARGV[5] end
table.insert(rec.atualizacao, {status = ARGV[2], data = ARGV[6]})
raw = cjson.encode(rec)
redis.call('SET', KEYS[1], raw, 'EX', ARGV[1])
return raw
"""
#: A status named in ARGV[2] (space-separated) → CANCELADA by ARGV[3] ("code:
#: text" ARGV[4]) at ARGV[5], and with it each of its ATIVA cobrs (keys:
#: ARGV[6] .. txid) by the same requester, ARGV[7] their reason. The record as it stands; nil when none.
_CANCEL_REC_SCRIPT = (
    _CANCEL_COBR_FN
    + """
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local rec = cjson.decode(raw)
if not string.find(' ' .. ARGV[2] .. ' ', ' ' .. rec.status .. ' ', 1, true) then return raw end
rec.status = 'CANCELADA'
rec.cancelled_by = ARGV[3]
rec.reason = ARGV[4]
if type(rec.push) == 'table' and rec.push.status == 'ENVIADA' then rec.push.status = 'CANCELADA' end
table.insert(rec.atualizacao, {status = 'CANCELADA', data = ARGV[5]})
for _, txid in ipairs(rec.cobrs) do
  local key = ARGV[6] .. txid
  local cobr_raw = redis.call('GET', key)
  if cobr_raw then
    local cobr = cjson.decode(cobr_raw)
    if cancel_cobr(cobr, ARGV[3], ARGV[7], ARGV[5]) then
      redis.call('SET', key, cjson.encode(cobr), 'EX', ARGV[1])
    end
  end
end
raw = cjson.encode(rec)
redis.call('SET', KEYS[1], raw, 'EX', ARGV[1])
return raw
"""
)
#: The push request (ARGV[2], JSON) on a CRIADA push-journey rec: {'sent'|'stored', push JSON} or {'refused', why}.
_PUSH_SCRIPT = """
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local rec = cjson.decode(raw)
if rec.status ~= 'CRIADA' then return {'refused', 'it is ' .. rec.status} end
if rec.journey ~= ARGV[3] then return {'refused', 'its journey is ' .. rec.journey} end
if type(rec.push) == 'table' then return {'stored', cjson.encode(rec.push)} end
rec.push = cjson.decode(ARGV[2])
redis.call('SET', KEYS[1], cjson.encode(rec), 'EX', ARGV[1])
return {'sent', ARGV[2]}
"""
#: KEYS[1] the rec, KEYS[2] the cobr (ARGV[2], JSON; txid ARGV[3]): created
#: and listed on its rec when the rec is APROVADA. {'created'|'stored', cobr
#: JSON}, {'refused', rec status}, {'missing', ''}.
_CREATE_COBR_SCRIPT = """
local stored = redis.call('GET', KEYS[2])
if stored then return {'stored', stored} end
local raw = redis.call('GET', KEYS[1])
if not raw then return {'missing', ''} end
local rec = cjson.decode(raw)
if rec.status ~= 'APROVADA' then return {'refused', rec.status} end
table.insert(rec.cobrs, ARGV[3])
redis.call('SET', KEYS[1], cjson.encode(rec), 'EX', ARGV[1])
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[1])
return {'created', ARGV[2]}
"""
#: The receiver cancels (ARGV[2]: by, ARGV[3]: reason, ARGV[4]: at). The record as it stands; nil when none.
_CANCEL_COBR_SCRIPT = (
    _CANCEL_COBR_FN
    + """
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local cobr = cjson.decode(raw)
if cancel_cobr(cobr, ARGV[2], ARGV[3], ARGV[4]) then
  raw = cjson.encode(cobr)
  redis.call('SET', KEYS[1], raw, 'EX', ARGV[1])
end
return raw
"""
)
#: The attempt AGENDADA on ARGV[2] of an ATIVA cobr, looked up by the two scripts below.
_SCHEDULED_FN = """
local function scheduled(cobr, on)
  if cobr.status ~= 'ATIVA' then return nil end
  for _, attempt in ipairs(cobr.attempts) do
    if attempt.status == 'AGENDADA' and attempt.settles_on == on then return attempt end
  end
  return nil
end
"""
#: The payer's bank settles the attempt of ARGV[2] with the Pix (ARGV[3],
#: JSON) at ARGV[4]: PAGA, the cobr CONCLUIDA. {'done'|'paid' (already),
#: cobr JSON} or {'refused', cobr JSON}; nil when none.
_SETTLE_SCRIPT = (
    _SCHEDULED_FN
    + """
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local cobr = cjson.decode(raw)
if cobr.status == 'CONCLUIDA' then return {'paid', raw} end
local attempt = scheduled(cobr, ARGV[2])
if not attempt then return {'refused', raw} end
local pix = cjson.decode(ARGV[3])
attempt.status = 'PAGA'
attempt.e2e_id = pix.e2e_id
cobr.status = 'CONCLUIDA'
cobr.pix = {pix}
table.insert(cobr.atualizacao, {status = 'CONCLUIDA', data = ARGV[4]})
raw = cjson.encode(cobr)
redis.call('SET', KEYS[1], raw, 'EX', ARGV[1])
return {'done', raw}
"""
)
#: The payer's bank rejects the attempt of ARGV[2] ("code: text" ARGV[3]) at
#: ARGV[5]; the cobr is REJEITADA too when ARGV[4] is '1' (an ending code) or
#: its rec allows no retry. {'done'|'refused', cobr JSON}; nil when none.
_FAIL_SCRIPT = (
    _SCHEDULED_FN
    + """
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local cobr = cjson.decode(raw)
local attempt = scheduled(cobr, ARGV[2])
if not attempt then return {'refused', raw} end
attempt.status = 'REJEITADA'
attempt.reason = ARGV[3]
if ARGV[4] == '1' or cobr.policy ~= 'PERMITE_3R_7D' then
  cobr.status = 'REJEITADA'
  cobr.reason = ARGV[3]
  table.insert(cobr.atualizacao, {status = 'REJEITADA', data = ARGV[5]})
end
raw = cjson.encode(cobr)
redis.call('SET', KEYS[1], raw, 'EX', ARGV[1])
return {'done', raw}
"""
)
#: A retry (RIFL, AGENDADA) on ARGV[2], no later than ARGV[3] (due + 7), at
#: most ARGV[4] of them. {'done', cobr JSON} or {why, detail}; nil when none.
_RETRY_SCRIPT = """
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local cobr = cjson.decode(raw)
if cobr.policy ~= 'PERMITE_3R_7D' then return {'policy', cobr.policy} end
if cobr.status ~= 'ATIVA' then return {'status', cobr.status} end
local last = cobr.attempts[#cobr.attempts]
if last.status ~= 'REJEITADA' then return {'last', last.status} end
local retries = 0
for _, attempt in ipairs(cobr.attempts) do
  if attempt.kind == 'RIFL' then retries = retries + 1 end
  if attempt.settles_on == ARGV[2] then return {'day', ARGV[2]} end
end
if retries >= tonumber(ARGV[4]) then return {'count', tostring(retries)} end
if ARGV[2] <= last.settles_on then return {'order', last.settles_on} end
if ARGV[2] <= cobr.due_date or ARGV[2] > ARGV[3] then return {'window', ARGV[3]} end
table.insert(cobr.attempts, {settles_on = ARGV[2], kind = 'RIFL', status = 'AGENDADA', e2e_id = '', reason = ''})
raw = cjson.encode(cobr)
redis.call('SET', KEYS[1], raw, 'EX', ARGV[1])
return {'done', raw}
"""


def _sandbox_id(prefix: str, at: dt.datetime) -> str:
    """``prefix`` + ISPB + ``yyyyMMdd`` (Brasília) + 11 random alphanumerics:
    the shape of ``RecId`` (prefix ``RR``/``RN``) and ``idSolicRec`` (``SC``)."""
    day = timezone.localtime(at).date()
    return f"{prefix}{RECEIVER_ISPB}{day:%Y%m%d}" + "".join(secrets.choice(_ALNUM) for _ in range(11))


def location_of(id_rec: str) -> str:
    return f"pix.sandbox.local/qr/v2/rec/{id_rec}"


def _debtor_document(terms: Mapping[str, Any]) -> str:
    devedor = (terms.get("vinculo") or {}).get("devedor") or {}
    return str(devedor.get("cpf") or devedor.get("cnpj") or "")


def _contract(terms: Mapping[str, Any]) -> str:
    return str((terms.get("vinculo") or {}).get("contrato") or "")


def _rec_state(rec: Mapping[str, Any]) -> RecurrenceState:
    push = rec.get("push")
    return RecurrenceState(
        id_rec=str(rec["id_rec"]),
        status=str(rec["status"]),
        journey=str(rec["journey"]),
        payer_ispb=str(rec.get("payer_ispb") or ""),
        cancelled_by=str(rec.get("cancelled_by") or ""),
        reason=str(rec.get("reason") or ""),
        push_status=str(push["status"]) if isinstance(push, Mapping) else "",
        raw=rec,
    )


def _cobr_state(cobr: Mapping[str, Any]) -> CycleChargeState:
    attempts = tuple(
        CycleAttempt(
            settles_on=dt.date.fromisoformat(a["settles_on"]),
            kind=str(a["kind"]),
            status=str(a["status"]),
            e2e_id=str(a.get("e2e_id") or ""),
            reason=str(a.get("reason") or ""),
        )
        for a in (cobr.get("attempts") or ())
    )
    pix = tuple(
        DuePix(e2e_id=str(p["e2e_id"]), amount=int(p["amount"]), paid_at=dt.datetime.fromisoformat(p["paid_at"]))
        for p in (cobr.get("pix") or ())  # {} when cjson wrote an empty list
    )
    return CycleChargeState(
        txid=str(cobr["txid"]),
        status=str(cobr["status"]),
        amount=int(cobr["amount"]),
        attempts=attempts,
        pix=pix,
        reason=str(cobr.get("reason") or ""),
        raw=cobr,
    )


def _answer(result: Any) -> tuple[str, str]:
    """A script's ``{code, text}`` answer."""
    code, text = result
    return str(code), str(text)


class SandboxRecurrences:
    """The Pix Automático half of :class:`~acquirers.adapters.sandbox.SandboxAdapter` (a mixin)."""

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

    # ------------------------------------------------------------------ helpers

    def _rec_key(self, id_rec: str) -> str:
        return self._key("rec", id_rec)

    def _cobr_key(self, txid: str) -> str:
        return self._key("cobr", txid)

    def _index_key(self, document: str, contract: str) -> str:
        # One per (acquirer, debtor, contract): what settles a create whose answer was lost.
        return self._key("rec_by_contract", document, contract)

    def _rec(self, id_rec: str) -> dict[str, Any]:
        raw = state().get(self._rec_key(id_rec))
        if raw is None:
            raise AcquirerUnavailable(f"sandbox: recurrence {id_rec} not found (yet)")
        return dict(json.loads(raw))

    def _cobr(self, txid: str) -> dict[str, Any]:
        raw = state().get(self._cobr_key(txid))
        if raw is None:
            raise AcquirerUnavailable(f"sandbox: cycle charge {txid} not found (yet)")
        return dict(json.loads(raw))

    def _cancel_rec(self, id_rec: str, *, allowed: str, by: tuple[str, str, str], cobr_reason: str) -> RecurrenceState:
        solicitante, code, text = by
        raw = state().eval(
            _CANCEL_REC_SCRIPT,
            1,
            self._rec_key(id_rec),
            STATE_TTL,
            allowed,
            solicitante,
            f"{code}: {text}",
            timezone.now().isoformat(),
            self._cobr_key(""),
            cobr_reason,
        )
        if raw is None:
            raise AcquirerUnavailable(f"sandbox: recurrence {id_rec} not found (yet)")
        return _rec_state(json.loads(str(raw)))

    # ------------------------------------------------------------------ the adapter interface

    def create_recurrence(self, request: RecurrenceRequest) -> RecurrenceCreated:
        """``POST /rec`` (and for the QR journey its ``locrec`` and code), with
        the charge behaviours of ``options["charge"]``: ``timeout`` creates
        it, then answers too late, which :meth:`find_recurrence` settles."""
        behaviour = self._charge_behaviour()
        terms = dict(request.terms)
        now = timezone.now()
        letter = "R" if terms.get("politicaRetentativa") == ALLOWS_RETRIES else "N"
        id_rec = _sandbox_id("R" + letter, now)
        location = emv = ""
        if request.journey == JOURNEY_QR:
            location = location_of(id_rec)
            # No amount, even for a fixed valorRec: the second journey's code
            # asks for an authorisation, not a payment now (that is the third
            # journey, a cob with the rec); the payer's app reads the terms,
            # valorRec or the floor, from the location.
            emv = brcode.encode_dynamic(
                location=location, amount=None, merchant_name=RECEIVER_NAME, merchant_city=RECEIVER_CITY
            )
        record = {
            "id_rec": id_rec,
            "status": CREATED,
            "terms": terms,
            "journey": request.journey,
            "recurrence_id": str(request.recurrence_id),
            "location": location,
            "created_at": now.isoformat(),
            "payer_ispb": "",
            "cancelled_by": "",
            "reason": "",
            "cobrs": [],
            "atualizacao": [{"status": CREATED, "data": now.isoformat()}],
        }
        index = self._index_key(_debtor_document(terms), _contract(terms))
        pipe = state().pipeline(transaction=True)
        pipe.set(self._rec_key(id_rec), json.dumps(record), ex=STATE_TTL, nx=True)
        pipe.zadd(index, {id_rec: now.timestamp()})
        pipe.expire(index, STATE_TTL)
        pipe.execute()
        if behaviour == "timeout":
            self._late()  # created, but we hear nothing in time
        return RecurrenceCreated(
            id_rec=id_rec, status=CREATED, location=location, emv=answered_emv(emv, behaviour) if emv else ""
        )

    def find_recurrence(self, *, debtor_document: str, contract: str, since: dt.datetime) -> RecurrenceState | None:
        """The newest recurrence created for this debtor and contract since ``since``, or None."""
        found = state().zrangebyscore(self._index_key(debtor_document, contract), since.timestamp(), "+inf")
        return self.recurrence_status(str(found[-1])) if found else None

    def recurrence_status(self, id_rec: str) -> RecurrenceState:
        """The rec as the sandbox holds it; "not found (yet)" (unavailable) when it holds none."""
        return _rec_state(self._rec(id_rec))

    def request_authorisation(self, request: PushRequest) -> PushSent:
        """``POST /solicrec``: the payer's bank now shows it (ENVIADA). Only
        for a CRIADA push-journey rec (declined otherwise); asked again, the
        request already sent (a retry after a lost answer is not a second one)."""
        now = timezone.now()
        push = {
            "id_solic_rec": _sandbox_id("SC", now),
            "status": "ENVIADA",
            "expires_at": request.expires_at.isoformat(),
            "payer_document": request.payer_document,
            "payer_ispb": request.payer_ispb,
            "payer_branch": request.payer_branch,
            "payer_account": request.payer_account,
            "sent_at": now.isoformat(),
        }
        result = state().eval(_PUSH_SCRIPT, 1, self._rec_key(request.id_rec), STATE_TTL, json.dumps(push), JOURNEY_PUSH)
        if result is None:
            raise AcquirerUnavailable(f"sandbox: recurrence {request.id_rec} not found (yet)")
        code, text = _answer(result)
        if code == "refused":
            raise AcquirerDeclined(f"sandbox: no push request for recurrence {request.id_rec}: {text}")
        sent = json.loads(text)
        return PushSent(id_solic_rec=str(sent["id_solic_rec"]), status=str(sent["status"]))

    def cancel_recurrence(self, id_rec: str) -> RecurrenceState:
        """The receiver cancels (CRIADA or APROVADA → CANCELADA, USUARIO_RECEBEDOR),
        and with it the rec's ATIVA cobrs, in one step; ended already: its state."""
        return self._cancel_rec(
            id_rec, allowed=f"{CREATED} {APPROVED}", by=_REC_CANCELLED_BY_RECEIVER, cobr_reason=_COBR_CANCELLED_WITH_REC
        )

    def create_cycle_charge(self, request: CycleChargeRequest) -> CycleChargeState:
        """``PUT /cobr/{txid}``: ATIVA with its first attempt (AGND, AGENDADA)
        on the due date, for an APROVADA rec only (declined otherwise).
        Idempotent on the txid: the cobr first written stands, whatever it
        became; one holding another rec, amount or due date is an answer we
        cannot use. With the charge behaviours (``timeout``: created, answered late)."""
        behaviour = self._charge_behaviour()
        try:
            rec = self._rec(request.id_rec)
        except AcquirerUnavailable:
            raise AcquirerDeclined(f"sandbox: no recurrence {request.id_rec}: no cobr for it") from None
        now = timezone.now().isoformat()
        # ajusteDiaUtil is recorded but the first attempt settles on the due
        # date itself: the business-day calendar is payments.business_days,
        # which an acquirer cannot import, and the drivers pick the day they
        # settle on anyway.
        record = {
            "txid": request.txid,
            "id_rec": request.id_rec,
            "status": ACTIVE,
            "amount": request.amount,
            "due_date": request.due_date.isoformat(),
            "adjust_to_business_day": request.adjust_to_business_day,
            "description": request.description,
            "policy": str(rec["terms"].get("politicaRetentativa") or ""),
            "attempts": [
                {"settles_on": request.due_date.isoformat(), "kind": "AGND", "status": SCHEDULED, "e2e_id": ""}
            ],
            "pix": [],
            "reason": "",
            "cancelled_by": "",
            "atualizacao": [{"status": "CRIADA", "data": now}, {"status": ACTIVE, "data": now}],
        }
        code, text = _answer(
            state().eval(
                _CREATE_COBR_SCRIPT,
                2,
                self._rec_key(request.id_rec),
                self._cobr_key(request.txid),
                STATE_TTL,
                json.dumps(record),
                request.txid,
            )
        )
        if code == "missing":
            raise AcquirerDeclined(f"sandbox: no recurrence {request.id_rec}: no cobr for it")
        if code == "refused":
            raise AcquirerDeclined(f"sandbox: recurrence {request.id_rec} is {text}, not APROVADA: no cobr for it")
        if behaviour == "timeout":
            self._late()  # created, but we hear nothing in time
        stored = json.loads(text)
        asked = (request.id_rec, request.amount, request.due_date.isoformat())
        held = (stored["id_rec"], int(stored["amount"]), stored["due_date"])
        if held != asked:
            raise InvalidResponse(f"sandbox: cobr {request.txid} is {held}, not {asked}")
        return _cobr_state(stored)

    def cycle_charge_status(self, txid: str) -> CycleChargeState:
        """The cobr as the sandbox holds it; "not found (yet)" (unavailable) when it holds none."""
        return _cobr_state(self._cobr(txid))

    def cancel_cycle_charge(self, txid: str) -> CycleChargeState:
        """The receiver cancels, in one step: ATIVA → CANCELADA (its scheduled
        attempt too); settled first, it stays CONCLUIDA; asked again, the same."""
        raw = state().eval(
            _CANCEL_COBR_SCRIPT,
            1,
            self._cobr_key(txid),
            STATE_TTL,
            "USUARIO_RECEBEDOR",
            _COBR_CANCELLED_BY_RECEIVER,
            timezone.now().isoformat(),
        )
        if raw is None:
            raise AcquirerUnavailable(f"sandbox: cycle charge {txid} not found (yet)")
        return _cobr_state(json.loads(str(raw)))

    def retry_cycle_charge(self, txid: str, on: dt.date) -> CycleChargeState:
        """A retry (RIFL, AGENDADA) on ``on``: only for an ATIVA cobr whose
        last attempt was REJEITADA, of a rec that allows retries
        (PERMITE_3R_7D), with fewer than 3 retries so far, on a day no
        attempt has, after the last one's and within 7 days after the due
        date. Declined otherwise, saying which rule."""
        due = dt.date.fromisoformat(self._cobr(txid)["due_date"])  # never changes: read outside the step
        last_day = due + dt.timedelta(days=RETRY_SPAN_DAYS)
        result = state().eval(
            _RETRY_SCRIPT, 1, self._cobr_key(txid), STATE_TTL, on.isoformat(), last_day.isoformat(), MAX_RETRIES
        )
        if result is None:
            raise AcquirerUnavailable(f"sandbox: cycle charge {txid} not found (yet)")
        code, text = _answer(result)
        if code == "done":
            return _cobr_state(json.loads(text))
        why = {
            "policy": f"its recurrence allows no retry ({text})",
            "status": f"it is {text}, not ATIVA",
            "last": f"its last attempt is {text}, not REJEITADA",
            "day": f"an attempt settles on {text} already",
            "count": f"it has had {text} retries, at most {MAX_RETRIES}",
            "order": f"a retry must come after the last attempt ({text})",
            "window": f"a retry must fall after the due date ({due}) and no later than {text}",
        }[code]
        raise AcquirerDeclined(f"sandbox: no retry of cobr {txid} on {on}: {why}")

    # ------------------------------------------------------------------ the drivers' side (the payer and its bank)

    def _decide(
        self, id_rec: str, status: str, *, payer_ispb: str = "", reason: str = "", push: str
    ) -> RecurrenceState:
        raw = state().eval(
            _DECIDE_SCRIPT,
            1,
            self._rec_key(id_rec),
            STATE_TTL,
            status,
            payer_ispb,
            reason,
            push,
            timezone.now().isoformat(),
        )
        if raw is None:
            raise AcquirerUnavailable(f"sandbox: recurrence {id_rec} not found (yet)")
        return _rec_state(json.loads(str(raw)))

    def recurrence_approve(self, id_rec: str, *, payer_ispb: str) -> RecurrenceState:
        """The payer authorises it at its bank (``payer_ispb``): CRIADA →
        APROVADA, its push request ACEITA. From any other status nothing
        changes: the state returned says so."""
        if len(payer_ispb) != 8 or not payer_ispb.isalnum():
            raise ValueError("payer_ispb is 8 alphanumerics")
        return self._decide(id_rec, APPROVED, payer_ispb=payer_ispb, push="ACEITA")

    def recurrence_reject(self, id_rec: str) -> RecurrenceState:
        """The payer refuses it: CRIADA → REJEITADA (AP13), its push request REJEITADA."""
        return self._decide(id_rec, REJECTED, reason=_REC_REJECTED, push=REJECTED)

    def recurrence_expire(self, id_rec: str) -> RecurrenceState:
        """Nobody answered in time: CRIADA → EXPIRADA, its push request EXPIRADA."""
        return self._decide(id_rec, EXPIRED, push=EXPIRED)

    def recurrence_payer_cancel(self, id_rec: str) -> RecurrenceState:
        """The payer cancels at its bank: APROVADA → CANCELADA (USUARIO_PAGADOR),
        and its ATIVA cobrs with it, in one step; otherwise nothing changes."""
        return self._cancel_rec(
            id_rec, allowed=APPROVED, by=_REC_CANCELLED_BY_PAYER, cobr_reason=_COBR_CANCELLED_WITH_REC
        )

    def cycle_settle(self, txid: str, *, on: dt.date, e2e_id: str, at: dt.datetime) -> CycleChargeState | None:
        """The payer's bank settles the attempt scheduled on ``on``: PAGA, the
        cobr CONCLUIDA with this Pix of ``valor.original``, recorded for
        reconciliation (``list_received``) as ``due_charge_pay`` does.
        None, changing nothing, when the cobr is not ATIVA (cancelled,
        rejected) or has no attempt AGENDADA on ``on``; settled already, its
        state (the first Pix stands). Unknown: "not found" (unavailable)."""
        cobr = self._cobr(txid)
        pix = {"e2e_id": e2e_id, "amount": int(cobr["amount"]), "paid_at": at.isoformat()}
        result = state().eval(
            _SETTLE_SCRIPT, 1, self._cobr_key(txid), STATE_TTL, on.isoformat(), json.dumps(pix), at.isoformat()
        )
        if result is None:
            raise AcquirerUnavailable(f"sandbox: cycle charge {txid} not found (yet)")
        code, text = _answer(result)
        if code == "refused":
            return None
        settled = _cobr_state(json.loads(text))
        first = settled.pix[0]
        # The first record stands in receive too, so a repeat changes nothing.
        self.receive(txid=txid, amount=first.amount, e2e_id=first.e2e_id, at=first.paid_at or at)
        return settled

    def cycle_fail(self, txid: str, *, on: dt.date, reason_code: str = DEFAULT_REJECTION) -> CycleChargeState | None:
        """The payer's bank rejects the attempt scheduled on ``on``
        (``reason_code``, one of :data:`REJECTION_CODES`): REJEITADA; the
        cobr is REJEITADA too when the code is one that ends it
        (:data:`ENDING_REJECTION_CODES`) or its rec allows no retry. None,
        changing nothing, as :meth:`cycle_settle`."""
        if reason_code not in REJECTION_CODES:
            raise ValueError(f"{reason_code} is not a tentativa rejeicao code")
        ends = "1" if reason_code in ENDING_REJECTION_CODES else "0"
        reason = f"{reason_code}: Tentativa rejeitada pelo PSP pagador (sandbox)"
        result = state().eval(
            _FAIL_SCRIPT,
            1,
            self._cobr_key(txid),
            STATE_TTL,
            on.isoformat(),
            reason,
            ends,
            timezone.now().isoformat(),
        )
        if result is None:
            raise AcquirerUnavailable(f"sandbox: cycle charge {txid} not found (yet)")
        code, text = _answer(result)
        return _cobr_state(json.loads(text)) if code == "done" else None
