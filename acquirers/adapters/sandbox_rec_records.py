"""The sandbox's Pix Automático records: what it names (its ISPB, the API
Pix statuses and codes it answers with), the Lua scripts that change a rec
or a cobr in one step, and the records read back as the interface's
dataclasses. Used by :mod:`acquirers.adapters.sandbox_recurrence` and its
payer's side (:mod:`acquirers.adapters.sandbox_rec_payer`)."""

from __future__ import annotations

import datetime as dt
import secrets
import string
from collections.abc import Mapping
from typing import Any

from django.utils import timezone

from acquirers.adapters.due import DuePix
from acquirers.adapters.recurrence import (
    CycleAttempt,
    CycleChargeState,
    RecurrenceState,
)

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
