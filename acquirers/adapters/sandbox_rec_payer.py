"""The payer's side of the sandbox's Pix Automático: what the payer and the
payer's bank would do (authorise, refuse, let expire, cancel; settle or
reject an attempt), called by the sandbox's HTTP routes and by tests. Part
of :class:`~acquirers.adapters.sandbox_recurrence.SandboxRecurrences`."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from acquirers.adapters.base import AcquirerUnavailable
from acquirers.adapters.recurrence import (
    CycleChargeState,
    RecurrenceState,
)
from acquirers.adapters.sandbox_rec_records import (
    _COBR_CANCELLED_WITH_REC,
    _DECIDE_SCRIPT,
    _FAIL_SCRIPT,
    _REC_CANCELLED_BY_PAYER,
    _REC_REJECTED,
    _SETTLE_SCRIPT,
    APPROVED,
    DEFAULT_REJECTION,
    ENDING_REJECTION_CODES,
    EXPIRED,
    REJECTED,
    REJECTION_CODES,
    _answer,
    _cobr_state,
    _rec_state,
)
from acquirers.adapters.sandbox_state import STATE_TTL, state


class SandboxRecurrencePayer:
    """The drivers' half (a mixin of :class:`~acquirers.adapters.sandbox_recurrence.SandboxRecurrences`)."""

    if TYPE_CHECKING:  # provided by SandboxRecurrences and SandboxAdapter

        def _rec_key(self, id_rec: str) -> str: ...

        def _cobr_key(self, txid: str) -> str: ...

        def _cobr(self, txid: str) -> dict[str, Any]: ...

        def _cancel_rec(
            self, id_rec: str, *, allowed: str, by: tuple[str, str, str], cobr_reason: str
        ) -> RecurrenceState: ...

        def receive(
            self,
            *,
            txid: str,
            amount: int,
            e2e_id: str,
            at: dt.datetime,
            components: Mapping[str, int] | None = None,
        ) -> None: ...

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
