"""What a cycle's cobr comes to, as its acquirer says it: paid (the
charge credited as any charge), an attempt refused (retried within the
policy, or the cycle fails), cancelled there (by the payer). And the
cycles a recurrence's end stops. Read without a transaction; applied under
the cycle's row lock, then the charge's (the fixed order: recurrence,
cycle, charge, balance)."""

from __future__ import annotations

import datetime as dt
import logging
import uuid

from django.db import transaction
from django.utils import timezone

from acquirers.adapters.base import CycleChargeState
from acquirers.calls import Outcome
from core.exceptions import PixServiceError
from payments import exceptions as payment_errors
from payments.choices import ChargeSource, ChargeStatus
from payments.cycle_acquirer import PAID, cycle_paid_news
from payments.events import charge_event_apply
from payments.models import Charge, ChargeTransition
from payments.recurrence_schedule import next_retry_date, settlement_date
from payments.services import charge_transition
from recurrences import acquirer
from recurrences.cycle_base import OPEN, cycle_changed, cycles_locked, next_due, terms_of
from recurrences.models import CYCLE_ENDED, Cycle, CycleStatus, Recurrence
from recurrences.payloads import cycle_status

logger = logging.getLogger(__name__)

#: API Pix's attempt (``tentativas``) statuses.
ATTEMPT_REJECTED = "REJEITADA"
ATTEMPT_OPEN = ("SOLICITADA", "AGENDADA")
#: A cobr that ended unpaid there: refused by the payer's PSP, or expired.
COBR_FAILED = ("REJEITADA", "EXPIRADA")
COBR_CANCELLED = "CANCELADA"
#: The charge's statuses once its Pix was credited.
MONEY_MOVED = (ChargeStatus.PAID, ChargeStatus.REFUNDED, ChargeStatus.CHARGEBACK)


def cycle_sync(*, cycle_id: uuid.UUID | str, today: dt.date, now: dt.datetime | None = None) -> str:
    """Read the cycle's cobr and apply it, then send a retry it waits on. An
    unclear read changes nothing."""
    cycle = Cycle.objects.select_related("recurrence__acquirer").get(pk=cycle_id)
    if cycle.status not in (CycleStatus.ACTIVE, CycleStatus.RETRYING):
        return str(cycle.status)
    Cycle.objects.filter(pk=cycle.pk).update(synced_at=now or timezone.now())
    call = acquirer.read_cycle(cycle.recurrence.acquirer, cycle.txid)
    if call.result is None:
        return str(cycle.status)
    cycle_apply(cycle_id=cycle.pk, state=call.result, today=today)
    if call.result.status not in (PAID, COBR_CANCELLED, *COBR_FAILED):
        cycle_retry_send(cycle_id=cycle.pk, today=today, state=call.result)
    return str(Cycle.objects.values_list("status", flat=True).get(pk=cycle.pk))


def cycle_apply(*, cycle_id: uuid.UUID | str, state: CycleChargeState, today: dt.date | None) -> None:
    """Apply what the acquirer says of the cycle's cobr: its Pix credited as
    the charge's payment (:func:`payments.events.charge_event_apply`: fee,
    ledger, webhook); a refused attempt retried within the policy, or the
    cycle failed; a cobr cancelled there (by the payer) cancels the cycle."""
    cycle = Cycle.objects.select_related("recurrence__acquirer", "charge").get(pk=cycle_id)
    if cycle.charge is None:
        return
    if state.status == PAID or state.pix:
        for news in cycle_paid_news(state):
            try:
                charge_event_apply(acquirer=cycle.recurrence.acquirer, notification=news, source=ChargeSource.ACQUIRER)
            except PixServiceError:
                logger.warning("cycle %s: the Pix %s could not be applied", cycle.pk, news.e2e_id, exc_info=True)
        with transaction.atomic():
            locked = cycles_locked().select_related("recurrence", "charge").get(pk=cycle.pk)
            credited = locked.charge is not None and locked.charge.status in MONEY_MOVED
            if locked.status in (CycleStatus.ACTIVE, CycleStatus.RETRYING) and credited:
                locked.status = CycleStatus.PAID
                locked.next_retry_on = None
                locked.save(update_fields=["status", "next_retry_on", "updated_at"])
        return
    if state.status == COBR_CANCELLED:
        _end(cycle.pk, CycleStatus.CANCELLED, state.reason or "Cancelada na adquirente.")
        return
    if state.status in COBR_FAILED:
        _end(cycle.pk, CycleStatus.FAILED, state.reason or _last_rejection(state) or "Recusada pelo PSP do pagador.")
        return
    latest = state.attempts[-1] if state.attempts else None
    if latest is None or latest.status != ATTEMPT_REJECTED:
        return
    _rejected(cycle.pk, state, latest.reason or "Tentativa recusada.", today)


def _last_rejection(state: CycleChargeState) -> str:
    rejected = [a for a in state.attempts if a.status == ATTEMPT_REJECTED]
    return rejected[-1].reason if rejected else ""


def _rejected(cycle_id: uuid.UUID, state: CycleChargeState, reason: str, today: dt.date | None) -> None:
    """The latest attempt was refused: a retry on the policy's next day, or the cycle fails."""
    day = today or timezone.localdate()
    with transaction.atomic():
        cycle = cycles_locked().select_related("recurrence").get(pk=cycle_id)
        if cycle.status not in (CycleStatus.ACTIVE, CycleStatus.RETRYING):
            return
        if cycle.status == CycleStatus.RETRYING and cycle.next_retry_on not in {a.settles_on for a in state.attempts}:
            return  # the retry asked for is not sent yet: this refusal is the one already handled
        recurrence = cycle.recurrence
        attempts_days = sorted({a.settles_on for a in state.attempts})
        first_day = attempts_days[0] if attempts_days else settlement_date(cycle.due_date)
        retried = [d.isoformat() for d in attempts_days[1:]]
        following = None
        if terms_of(recurrence).politica_retentativa.allows_retries:
            following = next_retry_date(
                due=cycle.due_date,
                settled_first=first_day,
                next_due=next_due(recurrence, cycle.index),
                today=day,
                previous=attempts_days[1:],
            )
        cycle.failure_reason = reason[:500]
        cycle.tried_on = [first_day.isoformat(), *retried]
        if following is None:
            cycle.save(update_fields=["failure_reason", "tried_on", "updated_at"])
            _end(cycle.pk, CycleStatus.FAILED, reason)
            return
        cycle.status = CycleStatus.RETRYING
        cycle.next_retry_on = following
        cycle.save(update_fields=["status", "failure_reason", "tried_on", "next_retry_on", "updated_at"])
        cycle_changed(cycle, recurrence)


def cycle_retry_send(*, cycle_id: uuid.UUID | str, today: dt.date, state: CycleChargeState | None = None) -> bool:
    """Ask the acquirer for the retry the cycle is waiting on (``POST
    /cobr/{txid}/retentativa/{data}``); True once the cobr shows it. What the
    cobr was just read to hold (``state``) comes first: a retry asked earlier
    whose answer was lost is live there, and is recorded, never moved or
    failed. A refusal is read back for the same reason."""
    cycle = Cycle.objects.select_related("recurrence__acquirer").get(pk=cycle_id)
    if cycle.status != CycleStatus.RETRYING or cycle.next_retry_on is None:
        return False
    if cycle.next_retry_on.isoformat() in cycle.tried_on:
        return True
    if state is not None and _record_live_retry(cycle, state):
        return True
    on = cycle.next_retry_on
    if on <= today:
        # Its day came before the retry could be asked (the acquirer down,
        # the beat late): the next day the policy still allows, or none.
        moved = _retry_moved(cycle, today)
        if moved is None:
            _end(cycle.pk, CycleStatus.FAILED, cycle.failure_reason or "Retentativas esgotadas.")
            return False
        on = moved
    call = acquirer.retry_cycle(cycle.recurrence.acquirer, cycle.txid, on)
    if call.result is None and call.outcome is Outcome.DECLINED:
        call = acquirer.read_cycle(cycle.recurrence.acquirer, cycle.txid)
    if call.result is None:
        return False
    return _record_live_retry(cycle, call.result)


def _record_live_retry(cycle: Cycle, state: CycleChargeState) -> bool:
    """The retry the cobr holds (a later attempt still SOLICITADA or AGENDADA),
    recorded as asked: its day, one more retry counted. False when none."""
    live = [a.settles_on for a in state.attempts[1:] if a.status in ATTEMPT_OPEN]
    if not live:
        return False
    on = live[-1]
    with transaction.atomic():
        locked = cycles_locked().get(pk=cycle.pk)
        if locked.status == CycleStatus.RETRYING and on.isoformat() not in locked.tried_on:
            locked.tried_on = [*locked.tried_on, on.isoformat()]
            locked.retries += 1
            locked.next_retry_on = on
            locked.save(update_fields=["tried_on", "retries", "next_retry_on", "updated_at"])
    return True


def _retry_moved(cycle: Cycle, today: dt.date) -> dt.date | None:
    """A retry whose day passed unsent, moved to the next day the policy allows."""
    days = [dt.date.fromisoformat(d) for d in cycle.tried_on]
    first = days[0] if days else settlement_date(cycle.due_date)
    moved = next_retry_date(
        due=cycle.due_date,
        settled_first=first,
        next_due=next_due(cycle.recurrence, cycle.index),
        today=today,
        previous=days[1:],
    )
    if moved is not None:
        Cycle.objects.filter(pk=cycle.pk, status=CycleStatus.RETRYING).update(next_retry_on=moved)
    return moved


def _end(cycle_id: uuid.UUID, status: str, reason: str) -> None:
    """The cycle ends unpaid: its charge is cancelled (the acquirer asked to
    cancel the cobr until it answers: ``payments.cancellation``)."""
    with transaction.atomic():
        cycle = cycles_locked().select_related("recurrence").get(pk=cycle_id)
        if cycle.status in CYCLE_ENDED:
            return
        _close(cycle, cycle.recurrence, status, reason)


def _close(cycle: Cycle, recurrence: Recurrence, status: str, reason: str) -> None:
    """In the caller's transaction, the cycle locked: it ends unpaid and its
    pending charge is cancelled, unless the charge was paid meanwhile (its
    Pix won the race: the cycle is paid, as its charge's event said). The
    status is written first, so the charge's transition tells it (one event);
    a charge cancelled already (the expiry sweep, staff) told it then, and an
    event goes out only when what the API shows changes."""
    charge = Charge.objects.filter(pk=cycle.charge_id).first() if cycle.charge_id is not None else None
    shown = cycle_status(cycle, charge)
    cycle.status = status
    cycle.failure_reason = reason[:500]
    cycle.next_retry_on = None
    cycle.save(update_fields=["status", "failure_reason", "next_retry_on", "updated_at"])
    if _cancel_charge(cycle.charge_id):
        return
    if charge is not None:
        charge.refresh_from_db(fields=["status"])
        if charge.status in MONEY_MOVED:
            cycle.status = CycleStatus.PAID
            cycle.failure_reason = ""
            cycle.save(update_fields=["status", "failure_reason", "updated_at"])
            return
    if cycle_status(cycle, charge) != shown:
        cycle_changed(cycle, recurrence)


def _cancel_charge(charge_id: uuid.UUID | None) -> bool:
    """Cancel the cycle's pending charge; True when it changed (its
    transition then wrote the cycle's event: ``recurrences.payloads``)."""
    if charge_id is None:
        return False
    try:
        return charge_transition(
            charge_id=charge_id,
            to_status=ChargeStatus.CANCELED,
            source=ChargeTransition.Source.ACQUIRER,
            only_from=[ChargeStatus.PENDING],
        )
    except payment_errors.TransitionNotAllowed:
        return False  # held by a MED: its own news stands


def cycles_stop(*, recurrence: Recurrence, by_payer: bool) -> None:
    """In the transaction that ends the recurrence (its row locked): every
    open cycle is cancelled; a cobr at the acquirer is cancelled there
    (unless the payer's side did it, which the acquirer already knows)."""
    reason = "Recorrência cancelada pelo pagador." if by_payer else "Recorrência encerrada."
    for cycle in Cycle.objects.select_for_update().filter(recurrence=recurrence, status__in=OPEN).order_by("index"):
        _close(cycle, recurrence, CycleStatus.CANCELLED, reason)
