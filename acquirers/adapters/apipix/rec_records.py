"""What the ``bacen_pix`` adapter reads of Pix Automático's answers (a rec,
a cobr and its attempts, a recurrence's QR code) and the standard's
statuses and formats it checks them against: :mod:`.rec`'s parsing, kept
apart so the calls read on one screen."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from acquirers import brcode
from acquirers.adapters.apipix.cobv import received_pix
from acquirers.adapters.apipix.formats import E2E_ID, centavos, parse_moment
from acquirers.adapters.base import (
    CycleAttempt,
    CycleChargeState,
    InvalidResponse,
    RecurrenceState,
)
from acquirers.adapters.due import DuePix

#: What Pix Automático needs besides the cob scopes (``payloadlocationrec.write``: the QR journey's ``POST /locrec``).
REC_SCOPES = (
    "rec.write",
    "rec.read",
    "solicrec.write",
    "solicrec.read",
    "cobr.write",
    "cobr.read",
    "payloadlocationrec.write",
)
CANCELLED = "CANCELADA"
REC_STATUSES = frozenset({"CRIADA", "APROVADA", "REJEITADA", "EXPIRADA", CANCELLED})
#: A recurrence that can still be (or is) in force: what a lost create left behind.
LIVE_REC = frozenset({"CRIADA", "APROVADA"})
SOLICREC_STATUSES = frozenset({"CRIADA", "ENVIADA", "RECEBIDA", "REJEITADA", "ACEITA", "EXPIRADA", CANCELLED})
COBR_STATUSES = frozenset({"CRIADA", "ATIVA", "CONCLUIDA", "EXPIRADA", "REJEITADA", CANCELLED})
#: A cobr past which a cancel has nothing to do: its state is the answer.
COBR_ENDED = frozenset({"CONCLUIDA", "EXPIRADA", "REJEITADA", CANCELLED})
ATTEMPT_KINDS = frozenset({"AGND", "NTAG", "RIFL"})
ATTEMPT_STATUSES = frozenset({"SOLICITADA", "AGENDADA", "PAGA", CANCELLED, "REJEITADA", "EXPIRADA"})
JOURNEYS = frozenset({"JORNADA_1", "JORNADA_2", "JORNADA_3", "JORNADA_4", "AGUARDANDO_DEFINICAO"})
#: The terms' fields ``POST /rec`` takes from :mod:`payments.recurrence_terms` (anything else is not ours to send).
TERMS_FIELDS = ("vinculo", "calendario", "valor", "politicaRetentativa")
_ID_REC = re.compile(r"^[a-zA-Z0-9]{29}$")
_TXID = re.compile(r"^[a-zA-Z0-9]{26,35}$")
_ISPB = re.compile(r"^[0-9A-Z]{8}$")
_CPF = re.compile(r"^[0-9]{11}$")
_CNPJ = re.compile(r"^[0-9A-Z]{14}$")
#: Clocks differ: ``GET /rec``'s window is widened by this on both sides (the contract picks ours).
CLOCK_SKEW = dt.timedelta(minutes=10)


def check_rec_code(emv: str, location: str) -> None:
    """What can be checked of a recurrence's code (the JORNADA_2 "QR
    composto"): a well-formed BR Code (CRC, TLV, currency, country), with a
    Pix template among ids 80-99 whose location (25) is the recurrence's. Its
    amount cannot be (the code carries none: the terms live in the payload
    at the location), nor a txid (62.05 is ``***``)."""
    try:
        parsed = brcode.parse(emv)
    except brcode.InvalidBRCode as exc:
        raise InvalidResponse(f"recurrence code: {exc}") from None
    for field_id in (f"{n}" for n in range(80, 100)):
        template = parsed.fields.get(field_id)
        if (
            isinstance(template, dict)
            and str(template.get("00", "")).lower() == brcode.PIX_GUI
            and template.get("25") == location
        ):
            return
    raise InvalidResponse("recurrence code: no Pix template (80-99) with the recurrence's location")


def _check_id_rec(id_rec: str) -> None:
    if not _ID_REC.match(id_rec):
        raise ValueError(f"idRec {id_rec!r} is not 29 alphanumerics")


def _check_txid(txid: str) -> None:
    if not _TXID.match(txid):
        raise ValueError(f"txid {txid!r} is not 26-35 alphanumerics")


def _contract(rec: Mapping[str, Any], *, strict: bool = True) -> str | None:
    vinculo = rec.get("vinculo")
    contract = vinculo.get("contrato") if isinstance(vinculo, dict) else None
    if not isinstance(contract, str) or not contract:
        if strict:
            raise ValueError("the terms name no vinculo.contrato")
        return None
    return contract


def _created_at(rec: Mapping[str, Any]) -> dt.datetime:
    """When the PSP created it: its CRIADA entry in ``atualizacao`` (the
    first entry when none says so); the epoch when unreadable, so it sorts first."""
    history = [h for h in rec.get("atualizacao") or [] if isinstance(h, dict)]
    entry = next((h for h in history if h.get("status") == "CRIADA"), history[0] if history else {})
    return parse_moment(entry.get("data")) or dt.datetime.min.replace(tzinfo=dt.UTC)


def _reason(encerramento: object) -> tuple[str, str]:
    """``(who, "CODE: text")`` of an ``encerramento`` (cancelamento or rejeicao)."""
    if not isinstance(encerramento, dict):
        return "", ""
    for kind in ("cancelamento", "rejeicao"):
        detail = encerramento.get(kind)
        if isinstance(detail, dict):
            code, text = str(detail.get("codigo", ""))[:4], str(detail.get("descricao", ""))[:400]
            who = str(detail.get("solicitante", "")) if kind == "cancelamento" else ""
            return who[:20], f"{code}: {text}" if text else code
    return "", ""


def recurrence_state(rec: Mapping[str, Any], id_rec: str | None) -> RecurrenceState:
    """A ``rec`` answer (``RecGerada``, ``RecCompleta``, a listing's entry);
    ``id_rec``: the one asked for, when one was."""
    found = rec.get("idRec")
    if not isinstance(found, str) or not _ID_REC.match(found) or (id_rec is not None and found != id_rec):
        raise InvalidResponse(f"rec answer names idRec {found!r}, not {id_rec or 'a valid one'}")
    status = rec.get("status")
    if status not in REC_STATUSES:
        raise InvalidResponse(f"rec {found}: unknown status {status!r}")
    ativacao = rec.get("ativacao")
    journey = ativacao.get("tipoJornada") if isinstance(ativacao, dict) else None
    if journey is not None and journey not in JOURNEYS:
        raise InvalidResponse(f"rec {found}: unknown tipoJornada {journey!r}")
    pagador = rec.get("pagador")
    ispb = pagador.get("ispbParticipante") if isinstance(pagador, dict) else None
    if ispb is not None and (not isinstance(ispb, str) or not _ISPB.match(ispb)):
        raise InvalidResponse(f"rec {found}: pagador.ispbParticipante is not an ISPB")
    cancelled_by, reason = _reason(rec.get("encerramento"))
    requests = [s for s in rec.get("solicitacao") or [] if isinstance(s, dict)]
    push_status = str(requests[-1].get("status", "")) if requests else ""
    return RecurrenceState(
        id_rec=found,
        status=str(status),
        journey=journey or "",
        payer_ispb=ispb or "",
        cancelled_by=cancelled_by,
        reason=reason,
        push_status=push_status[:20],
        raw=dict(rec),
    )


def cycle_state(cobr: Mapping[str, Any], txid: str) -> CycleChargeState:
    """A ``cobr`` answer (``CobRGerada``, ``CobRCompleta``)."""
    if cobr.get("txid") != txid:
        raise InvalidResponse(f"cobr answer names txid {cobr.get('txid')!r}, not ours")
    status = cobr.get("status")
    if status not in COBR_STATUSES:
        raise InvalidResponse(f"cobr {txid}: unknown status {status!r}")
    given = cobr.get("valor")
    amount = centavos(given.get("original") if isinstance(given, dict) else None)
    attempts = tuple(_attempt(t, txid) for t in cobr.get("tentativas") or [])
    received = cobr.get("pix") or []
    if not isinstance(received, list):
        raise InvalidResponse(f"cobr {txid}: pix is not a list")
    pix = tuple(received_pix(p, f"cobr {txid}") for p in received)
    if status == "CONCLUIDA" and not pix:
        # A PSP that leaves pix[] out of a paid cobr: the PAGA attempt names the Pix (its
        # endToEndId) and the amount is valor.original (a cobr's Pix is never of another).
        pix = tuple(
            DuePix(e2e_id=a.e2e_id, amount=amount, paid_at=_paid_at(cobr, a.e2e_id))
            for a in attempts
            if a.status == "PAGA" and a.e2e_id
        )
    _, reason = _reason(cobr.get("encerramento"))
    return CycleChargeState(
        txid=txid, status=str(status), amount=amount, attempts=attempts, pix=pix, reason=reason, raw=dict(cobr)
    )


def _attempt(tentativa: object, txid: str) -> CycleAttempt:
    if not isinstance(tentativa, dict):
        raise InvalidResponse(f"cobr {txid}: a tentativa is not an object")
    try:
        settles_on = dt.date.fromisoformat(str(tentativa.get("dataLiquidacao")))
    except ValueError:
        raise InvalidResponse(f"cobr {txid}: a tentativa without a dataLiquidacao") from None
    kind, status, e2e_id = tentativa.get("tipo"), tentativa.get("status"), tentativa.get("endToEndId")
    if kind not in ATTEMPT_KINDS or status not in ATTEMPT_STATUSES:
        raise InvalidResponse(f"cobr {txid}: a tentativa of unknown tipo {kind!r} or status {status!r}")
    if e2e_id is not None and (not isinstance(e2e_id, str) or not E2E_ID.match(e2e_id)):
        raise InvalidResponse(f"cobr {txid}: a tentativa with a malformed endToEndId")
    _, reason = _reason({"rejeicao": tentativa["rejeicao"]} if isinstance(tentativa.get("rejeicao"), dict) else None)
    return CycleAttempt(settles_on=settles_on, kind=str(kind), status=str(status), e2e_id=e2e_id or "", reason=reason)


def _paid_at(cobr: Mapping[str, Any], e2e_id: str) -> dt.datetime | None:
    """When the PAGA attempt was paid (its own history), else when the cobr was CONCLUIDA."""
    for tentativa in cobr.get("tentativas") or []:
        if isinstance(tentativa, dict) and tentativa.get("endToEndId") == e2e_id:
            for entry in tentativa.get("atualizacao") or []:
                if isinstance(entry, dict) and entry.get("status") == "PAGA":
                    return parse_moment(entry.get("data"))
    for entry in cobr.get("atualizacao") or []:
        if isinstance(entry, dict) and entry.get("status") == "CONCLUIDA":
            return parse_moment(entry.get("data"))
    return None
