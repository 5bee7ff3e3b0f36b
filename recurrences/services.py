"""A recurrence's life: created at the first acquirer of the account's chain
that holds recurrences, authorised (or not) by the payer at their bank,
cancelled by either side. Its cycles are :mod:`recurrences.cycles`'.

Every status change is applied under the recurrence's row lock with its
webhook event (outbox), and is a no-op when repeated. The acquirer is asked
with no transaction open; what it says is then applied.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.fees import cashin_fee
from accounts.models import Account, PaymentMethod
from acquirers.adapters.base import RecurrenceCreated, RecurrenceRequest, RecurrenceState
from acquirers.adapters.recurrence import JOURNEY_PUSH, JOURNEY_QR
from acquirers.chain import run_recurrence_chain
from acquirers.models import Acquirer
from acquirers.selectors import recurrence_chain
from core import dispatch
from core.exceptions import ValidationFailed
from payments import exceptions as payment_errors
from payments.due_payments import day_in_brazil
from payments.recurrence_schedule import creation_window, due_date
from payments.recurrence_terms import InvalidRecurrenceTerms, RecurrenceTerms
from payments.services import MAX_AMOUNT, MIN_NET_AMOUNT
from recurrences import exceptions as err
from recurrences.cycle_base import OPEN, opens_on
from recurrences.models import RECURRENCE_ENDED, CancelledBy, Journey, Recurrence, RecurrenceStatus
from recurrences.outcomes import cycles_stop
from recurrences.payloads import recurrence_event
from webhooks.services import event_emit

logger = logging.getLogger(__name__)

#: Tasks (recurrences.tasks), handed work by name after commit.
SEND_PUSH = "recurrences.tasks.send_push"
CANCEL_AT_ACQUIRER = "recurrences.tasks.cancel_at_acquirer"
CANCEL_ORPHAN = "recurrences.tasks.cancel_orphan"
#: What picks the work up when the broker does not take it.
LEFT_TO = "the recurrences tick (recurrences.tasks.tick)"
ORPHAN_LEFT_TO = "nobody: the orphan recurrence stays CRIADA there until it expires unapproved"

#: How far back an orphan is looked for from the create's time: the acquirer's clock is not ours.
CLOCK_SKEW = dt.timedelta(minutes=10)
#: How long the payer's bank shows a push request (``dataExpiracaoSolicitacao``).
PUSH_VALIDITY = dt.timedelta(days=7)

#: API Pix's ``StatusRec`` → ours.
STATUS_OF = {
    "CRIADA": RecurrenceStatus.CREATED,
    "APROVADA": RecurrenceStatus.APPROVED,
    "REJEITADA": RecurrenceStatus.REJECTED,
    "EXPIRADA": RecurrenceStatus.EXPIRED,
    "CANCELADA": RecurrenceStatus.CANCELLED,
}
#: ``encerramento.cancelamento.solicitante`` → who cancelled.
CANCELLED_BY = {
    "USUARIO_PAGADOR": CancelledBy.PAYER,
    "PSP_PAGADOR": CancelledBy.PAYER_PSP,
    "USUARIO_RECEBEDOR": CancelledBy.MERCHANT,
    "PSP_RECEBEDOR": CancelledBy.RECEIVER_PSP,
}
#: The transitions a recurrence may take (StatusRec's life); anything else is late news, ignored.
TRANSITIONS = {
    RecurrenceStatus.CREATED: {
        RecurrenceStatus.APPROVED,
        RecurrenceStatus.REJECTED,
        RecurrenceStatus.EXPIRED,
        RecurrenceStatus.CANCELLED,
    },
    # EXPIRADA of an approved one: its PSP ended it (its term over).
    RecurrenceStatus.APPROVED: {RecurrenceStatus.CANCELLED, RecurrenceStatus.EXPIRED, RecurrenceStatus.COMPLETED},
}


@dataclass(frozen=True)
class PayerBank:
    """Where the push journey's request goes: the payer's PSP and account."""

    ispb: str
    account: str
    branch: str = ""

    def as_json(self) -> dict[str, str]:
        return {"ispb": self.ispb, "branch": self.branch, "account": self.account}


# --------------------------------------------------------------------------- creation


def recurrence_check(*, account: Account, terms: RecurrenceTerms, today: dt.date) -> int:
    """Every rule that can refuse the recurrence before an acquirer is
    called; returns the largest amount a cycle charges (for the chain's
    ticket limits): the fixed amount or the merchant's maximum."""
    try:
        terms.check_creation(today)
    except InvalidRecurrenceTerms as exc:
        raise ValidationFailed(
            {"first_due_date": ["A data do primeiro vencimento não pode estar no passado."]}
        ) from exc
    if PaymentMethod.PIX not in account.payment_methods:
        raise payment_errors.BusinessRuleError(payment_errors.METHOD_NOT_ENABLED)
    top = terms.valor.valor_rec or terms.valor.valor_minimo_recebedor or 0
    if top > MAX_AMOUNT:
        raise payment_errors.BusinessRuleError(payment_errors.AMOUNT_ABOVE_MAX)
    if terms.valor.fixed and top - cashin_fee(account, top) < MIN_NET_AMOUNT:
        raise payment_errors.BusinessRuleError(payment_errors.NET_BELOW_MIN)
    document = terms.vinculo.devedor.cpf or terms.vinculo.devedor.cnpj or ""
    if Recurrence.objects.filter(
        account=account,
        debtor_document=document,
        contract=terms.vinculo.contrato,
        status__in=[RecurrenceStatus.CREATED, RecurrenceStatus.APPROVED],
    ).exists():
        raise err.LiveRecurrenceExists()
    return top


def recurrence_create(
    *,
    account: Account,
    terms: RecurrenceTerms,
    journey: str,
    payer_bank: PayerBank | None = None,
    postback_url: str = "",
    metadata: Mapping[str, Any] | None = None,
    override: Sequence[Acquirer] | None = None,
    now: dt.datetime | None = None,
    in_transaction: Callable[[Recurrence], None] | None = None,
) -> Recurrence:
    """Create the recurrence at the first acquirer of the chain that takes it
    (``POST /rec``; the QR journey's code comes back with it) and store it;
    the push journey's request to the payer's bank follows in a worker.
    Raises :class:`~payments.exceptions.AllAcquirersFailed` when none took
    it; an acquirer that may hold one anyway (it timed out) is asked to find
    and cancel it."""
    moment = now or timezone.now()
    top = recurrence_check(account=account, terms=terms, today=day_in_brazil(moment))
    if journey == Journey.PUSH and payer_bank is None:
        raise ValidationFailed({"payer_bank": ["Obrigatório na jornada push."]})
    recurrence_id = uuid.uuid4()
    document = terms.vinculo.devedor.cpf or terms.vinculo.devedor.cnpj or ""
    request = RecurrenceRequest(
        recurrence_id=recurrence_id,
        terms=terms.to_api(),
        journey=JOURNEY_PUSH if journey == Journey.PUSH else JOURNEY_QR,
    )
    outcome = run_recurrence_chain(recurrence_chain(account, top, override), request)
    for acquirer in outcome.to_cancel:
        if outcome.acquirer is None or acquirer.pk != outcome.acquirer.pk:
            dispatch.enqueue(
                CANCEL_ORPHAN,
                acquirer.pk,
                document,
                terms.vinculo.contrato,
                (timezone.now() - CLOCK_SKEW).isoformat(),
                "",
                left_to=ORPHAN_LEFT_TO,
            )
    if outcome.acquirer is None or not isinstance(outcome.result, RecurrenceCreated):
        raise payment_errors.AllAcquirersFailed()
    created = outcome.result
    try:
        with transaction.atomic():
            recurrence = Recurrence.objects.create(
                id=recurrence_id,
                account=account,
                acquirer=outcome.acquirer,
                id_rec=created.id_rec,
                journey=journey,
                terms=terms.to_api(),
                debtor_document=document,
                contract=terms.vinculo.contrato,
                payer_bank=payer_bank.as_json() if payer_bank is not None else {},
                location=created.location,
                emv=created.emv,
                postback_url=postback_url,
                metadata=dict(metadata or {}),
            )
            _emit(recurrence)
            if in_transaction is not None:
                in_transaction(recurrence)
            if journey == Journey.PUSH:
                transaction.on_commit(lambda: dispatch.enqueue(SEND_PUSH, str(recurrence_id), left_to=LEFT_TO))
    except IntegrityError:
        # A twin request won the (account, debtor, contract) race: ours is withdrawn there.
        dispatch.enqueue(
            CANCEL_ORPHAN,
            outcome.acquirer.pk,
            document,
            terms.vinculo.contrato,
            (timezone.now() - CLOCK_SKEW).isoformat(),
            created.id_rec,
            left_to=ORPHAN_LEFT_TO,
        )
        raise err.LiveRecurrenceExists() from None
    return recurrence


def terms_of(recurrence: Recurrence) -> RecurrenceTerms:
    return RecurrenceTerms.from_api(recurrence.terms)


# --------------------------------------------------------------------------- status


def recurrence_apply(*, recurrence_id: uuid.UUID | str, state: RecurrenceState, now: dt.datetime | None = None) -> bool:
    """Apply what the acquirer says of the recurrence: its authorisation's
    state, who ended it and why, the payer's bank. True when the status
    changed. A cancellation stops its cycles (:func:`recurrences.cycles.cycles_stop`)."""
    moment = now or timezone.now()
    new = STATUS_OF.get(state.status)
    with transaction.atomic():
        recurrence = Recurrence.objects.select_for_update().get(pk=recurrence_id)
        fields = ["synced_at", "updated_at"]
        recurrence.synced_at = moment
        if state.payer_ispb and recurrence.payer_ispb != state.payer_ispb:
            recurrence.payer_ispb = state.payer_ispb[:8]
            fields.append("payer_ispb")
        if state.push_status and recurrence.push_status != state.push_status:
            recurrence.push_status = state.push_status[:10]
            fields.append("push_status")
        changed = new is not None and new in TRANSITIONS.get(RecurrenceStatus(recurrence.status), set())
        if changed and new is not None:
            fields += _move(recurrence, new, moment, reason=state.reason, by=CANCELLED_BY.get(state.cancelled_by))
        elif new == RecurrenceStatus.CANCELLED and recurrence.cancel_pending:
            # Our own cancel, now confirmed there.
            recurrence.cancel_pending = False
            fields.append("cancel_pending")
        recurrence.save(update_fields=fields)
    return changed


def recurrence_cancel(
    *, recurrence: Recurrence, by: str = CancelledBy.MERCHANT, now: dt.datetime | None = None
) -> Recurrence:
    """Cancel here at once (no cycle is charged after this: only our beat
    creates them) and stop its open cycles; the acquirer is asked after the
    commit, until it answers (``PATCH /rec`` to CANCELADA). Cancelling a
    cancelled recurrence changes nothing; one that ended otherwise is a 409."""
    moment = now or timezone.now()
    with transaction.atomic():
        locked = Recurrence.objects.select_for_update().get(pk=recurrence.pk)
        if locked.status == RecurrenceStatus.CANCELLED:
            return locked
        if locked.status in RECURRENCE_ENDED:
            label = RecurrenceStatus(locked.status).label
            raise err.RecurrenceEnded(err.ALREADY_ENDED.format(status=label.lower()))
        fields = _move(locked, RecurrenceStatus.CANCELLED, moment, reason="", by=by)
        locked.cancel_pending = True
        locked.save(update_fields=[*fields, "cancel_pending", "updated_at"])
        transaction.on_commit(lambda: dispatch.enqueue(CANCEL_AT_ACQUIRER, str(locked.pk), left_to=LEFT_TO))
    return locked


def _move(recurrence: Recurrence, new: str, moment: dt.datetime, *, reason: str, by: str | None) -> list[str]:
    """The status change itself, in the caller's transaction (the row locked):
    its fields, its event, and for an end its cycles stopped."""
    recurrence.status = new
    fields = ["status"]
    if reason:
        recurrence.status_reason = reason[:500]
        fields.append("status_reason")
    if new == RecurrenceStatus.APPROVED:
        recurrence.approved_at = moment
        recurrence.next_index = first_chargeable_index(recurrence, day_in_brazil(moment))
        recurrence.next_open_on = opens_on(recurrence, recurrence.next_index)
        fields += ["approved_at", "next_index", "next_open_on"]
    if new in RECURRENCE_ENDED:
        recurrence.ended_at = moment
        fields.append("ended_at")
        if new == RecurrenceStatus.CANCELLED:
            recurrence.cancelled_by = by or CancelledBy.RECEIVER_PSP
            fields.append("cancelled_by")
        cycles_stop(
            recurrence=recurrence, by_payer=recurrence.cancelled_by in (CancelledBy.PAYER, CancelledBy.PAYER_PSP)
        )
    _emit(recurrence)
    return fields


def recurrence_complete(*, recurrence_id: uuid.UUID | str, now: dt.datetime | None = None) -> bool:
    """An approved recurrence with no cycle left to open (``dataFinal``
    passed) and none still open is ``completed``: no longer live (its
    contract may take a new recurrence), no longer read back. True when it
    changed."""
    moment = now or timezone.now()
    with transaction.atomic():
        recurrence = (
            Recurrence.objects.select_for_update(skip_locked=True)
            .filter(pk=recurrence_id, status=RecurrenceStatus.APPROVED, next_index__isnull=False, next_open_on=None)
            .first()
        )
        if recurrence is None or recurrence.cycles.filter(status__in=OPEN).exists():
            return False
        fields = _move(recurrence, RecurrenceStatus.COMPLETED, moment, reason="", by=None)
        recurrence.save(update_fields=[*fields, "updated_at"])
    return True


def first_chargeable_index(recurrence: Recurrence, approved_on: dt.date) -> int:
    """The first cycle whose cobr can still be sent in its window on the day
    of approval: earlier ones were never chargeable by Pix Automático (the
    arrangement wants the cobr at least 2 days ahead), so they are not part
    of the schedule (docs/api/recurrences.md, "The schedule")."""
    calendario = terms_of(recurrence).calendario
    k = 0
    while creation_window(due_date(calendario, k)).closes < approved_on:
        k += 1
    return k


def _emit(recurrence: Recurrence) -> None:
    event = recurrence_event(recurrence)
    event_emit(
        account_id=recurrence.account_id,
        event_type=event.event_type,
        record_id=event.record_id,
        status=event.status,
        data=event.data,
        postback_url=recurrence.postback_url,
    )
