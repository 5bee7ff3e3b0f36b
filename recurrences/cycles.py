"""A recurrence's cycles: opened by the schedule inside their window, each
charged once as a ``cobr`` at the recurrence's acquirer, retried within the
policy, followed until paid, failed or cancelled.

Never twice: a cycle is a row unique per (recurrence, index), opened under
the recurrence's row lock (two beats: one waits, then finds it opened), and
its txid is derived from both, so a send repeated after a killed worker or
an unclear answer is the same idempotent ``PUT /cobr/{txid}``. The amount is
frozen from the first send on. The money is the cycle's charge's
(:class:`payments.models.Charge` of kind ``recurring``), created once the
acquirer holds the cobr and moved by :mod:`payments.events` like any other.

Dates are Brasília's (``today``), given by the caller: the beat passes the
clock's, tests pass theirs.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid

from django.db import transaction

from accounts.fees import cashin_fee
from acquirers.adapters.base import CycleChargeRequest, CycleChargeState, RecordNotFound
from acquirers.calls import Outcome
from core import dispatch
from payments import exceptions as payment_errors
from payments.cancellation import charge_cancellation_open
from payments.choices import ChargeKind, ChargeStatus
from payments.due_charges import expires_at_of
from payments.models import Charge
from payments.recurrence_schedule import (
    MIN_LEAD_DAYS,
    RETRY_SPAN_DAYS,
    creation_window,
    due_date,
    settlement_date,
)
from payments.services import MIN_NET_AMOUNT
from recurrences import acquirer
from recurrences import exceptions as err
from recurrences.cycle_base import cycle_changed, cycle_txid, cycles_locked, next_due, opens_on, terms_of
from recurrences.models import CYCLE_ENDED, Cycle, CycleStatus, Recurrence, RecurrenceStatus
from recurrences.outcomes import cycle_apply

logger = logging.getLogger(__name__)

#: The task that sends one cycle (recurrences.tasks), handed work by name.
SEND_CYCLE = "recurrences.tasks.send_cycle"


# --------------------------------------------------------------------------- opening


def cycles_open(*, recurrence_id: uuid.UUID | str, today: dt.date) -> list[uuid.UUID]:
    """Open the recurrence's cycles whose window has opened by ``today``,
    each once; a window already closed (the beat was down, an approval came
    late) opens the cycle as missed, for staff. Returns the cycles to send.
    Skips a recurrence another process holds: it is opening them."""
    with transaction.atomic():
        recurrence = (
            Recurrence.objects.select_for_update(skip_locked=True)
            .filter(pk=recurrence_id, status=RecurrenceStatus.APPROVED, next_index__isnull=False)
            .first()
        )
        if recurrence is None:
            return []
        terms = terms_of(recurrence)
        calendario = terms.calendario
        k = recurrence.next_index
        assert k is not None  # filtered
        opened: list[Cycle] = []
        while True:
            due = due_date(calendario, k)
            if calendario.data_final is not None and due > calendario.data_final:
                break
            window = creation_window(due)
            if window.opens > today:
                break
            missed = window.missed(today)
            status = CycleStatus.MISSED if missed else CycleStatus.SCHEDULED
            amount = terms.valor.valor_rec
            if amount is None and not missed:
                status = CycleStatus.AWAITING_AMOUNT
            opened.append(
                Cycle(
                    recurrence=recurrence,
                    index=k,
                    due_date=due,
                    amount=amount,
                    status=status,
                    txid=cycle_txid(recurrence.pk, k),
                    failure_reason="Janela de envio perdida." if missed else "",
                )
            )
            k += 1
        if not opened:
            return []
        # A cycle the merchant gave an amount early exists already: it stands
        # (and told its own change). Read under the recurrence's lock, which
        # every writer of a cycle row takes first.
        indices = [c.index for c in opened]
        existing = set(Cycle.objects.filter(recurrence=recurrence, index__in=indices).values_list("index", flat=True))
        Cycle.objects.bulk_create(opened, ignore_conflicts=True)
        recurrence.next_index = k
        recurrence.next_open_on = opens_on(recurrence, k)
        recurrence.save(update_fields=["next_index", "next_open_on", "updated_at"])
        stored = list(Cycle.objects.filter(recurrence=recurrence, index__in=indices))
        for cycle in stored:
            if cycle.index not in existing and cycle.status in (CycleStatus.MISSED, CycleStatus.AWAITING_AMOUNT):
                cycle_changed(cycle, recurrence)
    return [c.pk for c in stored if c.status == CycleStatus.SCHEDULED and c.amount is not None]


def cycles_miss_unpriced(*, today: dt.date) -> int:
    """Variable cycles whose window closed without the merchant's amount:
    missed, for the merchant and staff to see (nothing was sent)."""
    closed_before = today + dt.timedelta(days=MIN_LEAD_DAYS)  # closes = due - 2 < today
    missed = 0
    for cycle_id in Cycle.objects.filter(status=CycleStatus.AWAITING_AMOUNT, due_date__lt=closed_before).values_list(
        "pk", flat=True
    )[:500]:
        with transaction.atomic():
            cycle = cycles_locked().select_related("recurrence").filter(pk=cycle_id).first()
            if cycle is None or cycle.status != CycleStatus.AWAITING_AMOUNT:
                continue
            _miss(cycle, cycle.recurrence, "O valor do ciclo não foi informado a tempo.")
            missed += 1
    return missed


def cycle_amount_set(*, recurrence: Recurrence, index: int, amount: int, today: dt.date) -> Cycle:
    """The merchant's amount for a variable cycle, until its window closes
    and as long as no cobr was sent for it (the acquirer may hold that amount
    from then on). A cycle not opened yet is opened with it."""
    terms = terms_of(recurrence)
    if terms.valor.fixed:
        raise err.CycleAmountRefused(err.FIXED_AMOUNT)
    top = terms.valor.valor_minimo_recebedor
    if top is not None and amount > top:
        raise err.CycleAmountRefused(err.AMOUNT_ABOVE_MAX)
    if amount - cashin_fee(recurrence.account, amount) < MIN_NET_AMOUNT:
        # As a charge's creation refuses it: the cycle's charge would credit (almost) nothing.
        raise err.CycleAmountRefused(payment_errors.NET_BELOW_MIN)
    calendario = terms.calendario
    try:
        due = due_date(calendario, index)
    except (OverflowError, ValueError):  # past year 9999, or a negative index: no such cycle
        raise err.CycleAmountRefused(err.NOT_A_CYCLE) from None
    if calendario.data_final is not None and due > calendario.data_final:
        raise err.CycleAmountRefused(err.NOT_A_CYCLE)
    if creation_window(due).missed(today):
        raise err.CycleAmountRefused(err.AMOUNT_TOO_LATE)
    with transaction.atomic():
        locked = Recurrence.objects.select_for_update().get(pk=recurrence.pk)
        if locked.status != RecurrenceStatus.APPROVED and locked.status != RecurrenceStatus.CREATED:
            raise err.RecurrenceEnded()
        if locked.next_index is not None and index < locked.next_index:
            cycle = Cycle.objects.select_for_update().filter(recurrence=locked, index=index).first()
            if cycle is None:
                raise err.CycleAmountRefused(err.NOT_A_CYCLE)
        else:
            cycle, _ = Cycle.objects.get_or_create(
                recurrence=locked,
                index=index,
                defaults={"due_date": due, "txid": cycle_txid(locked.pk, index), "status": CycleStatus.AWAITING_AMOUNT},
            )
            cycle = Cycle.objects.select_for_update().get(pk=cycle.pk)
        if cycle.sends or cycle.status not in (CycleStatus.SCHEDULED, CycleStatus.AWAITING_AMOUNT):
            raise err.CycleAmountRefused(err.AMOUNT_TOO_LATE)
        cycle.amount = amount
        cycle.status = CycleStatus.SCHEDULED
        cycle.save(update_fields=["amount", "status", "updated_at"])
        cycle_changed(cycle, locked)
        if creation_window(due).contains(today):
            # Its window is open (it may close before the next round): sent now.
            transaction.on_commit(lambda: dispatch.enqueue(SEND_CYCLE, str(cycle.pk), left_to="the recurrences tick"))
    return cycle


# --------------------------------------------------------------------------- sending


def cycle_send(*, cycle_id: uuid.UUID | str, today: dt.date) -> str:
    """Send the cycle's cobr (``PUT /cobr/{txid}``) if it is due to be sent
    today, and store its charge once the acquirer holds it. Returns the
    cycle's status afterwards. An unclear answer leaves it scheduled: the
    next round sends the same txid again or, its window closed, reads it;
    only the acquirer's "not there" (a 404) makes it missed."""
    with transaction.atomic():
        cycle = cycles_locked().select_related("recurrence__acquirer").get(pk=cycle_id)
        recurrence = cycle.recurrence
        if cycle.status != CycleStatus.SCHEDULED or cycle.amount is None:
            return str(cycle.status)
        if recurrence.status != RecurrenceStatus.APPROVED:
            return str(cycle.status)
        window = creation_window(cycle.due_date)
        if window.opens > today:
            return str(cycle.status)
        late = window.missed(today)
        if late and cycle.sends == 0:
            return _miss(cycle, recurrence, "Janela de envio perdida.")
        if not late:
            # Counted before the call: from the first send on, the amount is
            # frozen, and until a clear answer the acquirer may hold the cobr.
            cycle.sends += 1
            cycle.send_unclear = True
            cycle.save(update_fields=["sends", "send_unclear", "updated_at"])
    request = CycleChargeRequest(
        txid=cycle.txid,
        id_rec=recurrence.id_rec,
        due_date=cycle.due_date,
        amount=cycle.amount,
        description=(terms_of(recurrence).vinculo.objeto or "")[:140],
    )
    # Past the window only a read: the PSP would refuse a new PUT, but may hold the unclear one.
    call = (
        acquirer.read_cycle(recurrence.acquirer, cycle.txid)
        if late
        else acquirer.create_cycle(recurrence.acquirer, request)
    )
    if call.result is not None:
        return _store_charge(cycle.pk, call.result, today)
    if not late and call.outcome is Outcome.DECLINED:
        if cycle.sends == 1:  # a first send refused: nothing was created
            return _fail_unsent(cycle.pk, f"Recusada pela adquirente: {call.error_message}")
        # Refused after an unclear send: it may be that send's cobr. Read before failing.
        call = acquirer.read_cycle(recurrence.acquirer, cycle.txid)
        if call.result is not None:
            return _store_charge(cycle.pk, call.result, today)
        if isinstance(call.error, RecordNotFound):
            return _fail_unsent(cycle.pk, "Recusada pela adquirente.")
        return str(CycleStatus.SCHEDULED)
    if late and isinstance(call.error, RecordNotFound):
        with transaction.atomic():
            locked = cycles_locked().select_related("recurrence").get(pk=cycle.pk)
            if locked.status != CycleStatus.SCHEDULED:
                return str(locked.status)
            locked.send_unclear = False
            locked.save(update_fields=["send_unclear"])
            return _miss(locked, locked.recurrence, "Janela de envio perdida (o envio sem resposta não chegou).")
    logger.info("cycle %s: cobr send or read unclear (%s): asked again next round", cycle.pk, call.outcome)
    return str(CycleStatus.SCHEDULED)


def cycle_send_settle(*, cycle_id: uuid.UUID | str, today: dt.date) -> bool:
    """A cycle that ended (cancelled, missed) while a send's answer was unclear:
    read its cobr. Held there, it is stored and cancelled at once (the payer
    is never charged for a cycle that ended); not there, nothing is left to
    do. True once settled either way."""
    cycle = Cycle.objects.select_related("recurrence__acquirer").get(pk=cycle_id)
    if not cycle.send_unclear:
        return True
    call = acquirer.read_cycle(cycle.recurrence.acquirer, cycle.txid)
    if call.result is not None:
        _store_charge(cycle.pk, call.result, today)
        return True
    if isinstance(call.error, RecordNotFound):
        Cycle.objects.filter(pk=cycle.pk).update(send_unclear=False)
        return True
    return False


def _store_charge(cycle_id: uuid.UUID, state: CycleChargeState, today: dt.date) -> str:
    """The acquirer holds the cobr: the cycle's charge is stored (once), then
    what the cobr already says is applied (paid, refused). A cycle that ended
    meanwhile (a cancel while the send was in flight) gets its charge stored
    cancelled, the acquirer asked to cancel the cobr until it answers."""
    with transaction.atomic():
        cycle = cycles_locked().select_related("recurrence__account").get(pk=cycle_id)
        recurrence = cycle.recurrence
        cycle.send_unclear = False
        if cycle.charge_id is None:
            if state.amount != cycle.amount:
                logger.error("cycle %s: the acquirer holds %s, we sent %s", cycle.pk, state.amount, cycle.amount)
            assert cycle.amount is not None
            ended = cycle.status in CYCLE_ENDED
            account = recurrence.account
            fee = cashin_fee(account, cycle.amount)
            terms = terms_of(recurrence)
            charge = Charge.objects.create(
                account=account,
                kind=ChargeKind.RECURRING,
                status=ChargeStatus.CANCELED if ended else ChargeStatus.PENDING,
                amount=cycle.amount,
                platform_tax=fee,
                liquid_amount=cycle.amount - fee,
                txid=cycle.txid,
                emv="",
                acquirer_id=recurrence.acquirer_id,
                provider_charge_id=cycle.txid,
                buyer_name=terms.vinculo.devedor.nome[:255],
                buyer_document=recurrence.debtor_document,
                buyer_phone="",
                postback_url=recurrence.postback_url,
                metadata={"recurrence_id": str(recurrence.pk), "cycle": cycle.index},
                expires_at=expires_at_of(_last_settlement_day(recurrence, cycle)),
            )
            cycle.charge = charge
            if ended:
                charge_cancellation_open(charge=charge)
            elif cycle.status == CycleStatus.SCHEDULED:
                cycle.status = CycleStatus.ACTIVE
            cycle.save(update_fields=["charge", "status", "send_unclear", "updated_at"])
            if not ended:
                cycle_changed(cycle, recurrence)
        else:
            cycle.save(update_fields=["send_unclear"])
    cycle_apply(cycle_id=cycle_id, state=state, today=today)
    return str(Cycle.objects.values_list("status", flat=True).get(pk=cycle_id))


def _last_settlement_day(recurrence: Recurrence, cycle: Cycle) -> dt.date:
    """The last day the cycle may settle: the first attempt's day, or with
    retries the last day the policy allows one."""
    first = settlement_date(cycle.due_date)
    if not terms_of(recurrence).politica_retentativa.allows_retries:
        return first
    last = cycle.due_date + dt.timedelta(days=RETRY_SPAN_DAYS)
    following = next_due(recurrence, cycle.index)
    if following is not None:
        last = min(last, following - dt.timedelta(days=1))
    return max(first, last)


def _fail_unsent(cycle_id: uuid.UUID, reason: str) -> str:
    with transaction.atomic():
        cycle = cycles_locked().select_related("recurrence").get(pk=cycle_id)
        if cycle.status != CycleStatus.SCHEDULED:
            return str(cycle.status)
        cycle.status = CycleStatus.FAILED
        cycle.failure_reason = reason[:500]
        cycle.send_unclear = False
        cycle.save(update_fields=["status", "failure_reason", "send_unclear", "updated_at"])
        cycle_changed(cycle, cycle.recurrence)
    return str(CycleStatus.FAILED)


def _miss(cycle: Cycle, recurrence: Recurrence, reason: str) -> str:
    """In the caller's transaction, the cycle locked."""
    cycle.status = CycleStatus.MISSED
    cycle.failure_reason = reason
    cycle.save(update_fields=["status", "failure_reason", "updated_at"])
    cycle_changed(cycle, recurrence)
    return str(CycleStatus.MISSED)
