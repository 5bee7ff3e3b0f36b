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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from acquirers import brcode
from acquirers.adapters.base import AcquirerDeclined, AcquirerUnavailable, InvalidResponse, RecordNotFound
from acquirers.adapters.recurrence import (
    JOURNEY_PUSH,
    JOURNEY_QR,
    CycleChargeRequest,
    CycleChargeState,
    PushRequest,
    PushSent,
    RecurrenceCreated,
    RecurrenceRequest,
    RecurrenceState,
)
from acquirers.adapters.sandbox_due import RECEIVER_CITY, RECEIVER_NAME, answered_emv
from acquirers.adapters.sandbox_rec_payer import SandboxRecurrencePayer
from acquirers.adapters.sandbox_rec_records import (
    _CANCEL_COBR_SCRIPT,
    _CANCEL_REC_SCRIPT,
    _COBR_CANCELLED_BY_RECEIVER,
    _COBR_CANCELLED_WITH_REC,
    _CREATE_COBR_SCRIPT,
    _PUSH_SCRIPT,
    _REC_CANCELLED_BY_RECEIVER,
    _RETRY_SCRIPT,
    ACTIVE,
    ALLOWS_RETRIES,
    APPROVED,
    CREATED,
    MAX_RETRIES,
    RETRY_SPAN_DAYS,
    SCHEDULED,
    _answer,
    _cobr_state,
    _contract,
    _debtor_document,
    _rec_state,
    _sandbox_id,
    location_of,
)
from acquirers.adapters.sandbox_state import STATE_TTL, state


class SandboxRecurrences(SandboxRecurrencePayer):
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
        """The cobr as the sandbox holds it; :class:`RecordNotFound` (a 404) when
        it holds none: a create, even a "timeout" one, stores its cobr before
        answering, so a read that finds none is a definitive answer."""
        raw = state().get(self._cobr_key(txid))
        if raw is None:
            raise RecordNotFound(f"sandbox: cycle charge {txid} not found")
        return _cobr_state(json.loads(raw))

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
