"""Writes for charges: creation through the acquirer chain, and the one
service that applies every status change with its ledger effect."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Model
from django.utils import timezone

from accounts.fees import cashin_fee
from accounts.models import Account, LedgerEntry, PaymentMethod
from accounts.services import ledger_post
from acquirers.adapters.base import ChargeRequest
from acquirers.chain import ChainResult, run_charge_chain
from acquirers.models import Acquirer
from acquirers.selectors import acquirer_label, cashin_chain, selectable_acquirers
from core import metrics
from core.sql import insert_together
from payments import exceptions as err
from payments import kinds
from payments.cancellation import charge_cancellation_open
from payments.choices import ChargeKind
from payments.due_payloads import due_charge_payload
from payments.due_payments import due_payment_apply
from payments.models import Charge, ChargeAttempt, ChargeRefund, ChargeStatus, ChargeTransition
from payments.payloads import charge_payload
from payments.refund_reservations import charge_refund_close
from webhooks.models import EventType
from webhooks.services import event_emit

logger = logging.getLogger(__name__)

MAX_AMOUNT = 300_000
MIN_NET_AMOUNT = 10
#: The tasks (of acquirers.tasks) that ask an acquirer to withdraw a charge we will not use.
CANCEL_CHARGE = "cancel_charge_at_acquirer"
CANCEL_DUE_CHARGE = "cancel_due_charge_at_acquirer"


@dataclass(frozen=True)
class Buyer:
    name: str
    document: str  # digits (or the alphanumeric CNPJ), no formatting
    phone: str
    address: Mapping[str, str]


@dataclass(frozen=True)
class OverrideItem:
    acquirer_key: str
    priority: int


# --------------------------------------------------------------------------- creation


def resolve_override(*, account: Account, items: Sequence[OverrideItem]) -> list[Acquirer]:
    """The spec's override rules: duplicates refused, unavailable keys skipped
    silently, sorted by priority; nothing left is a 422 under ``acquirers``."""
    keys = [item.acquirer_key for item in items]
    err.reject_repeats(priorities=[item.priority for item in items], keys=keys)
    selectable = {a.key: a for a in selectable_acquirers(account).filter(key__in=keys)}
    chain = [
        selectable[item.acquirer_key]
        for item in sorted(items, key=lambda i: i.priority)
        if item.acquirer_key in selectable
    ]
    if not chain:
        raise err.AcquirerRuleViolation(err.NO_ACQUIRER_AVAILABLE)
    return chain


def override_items(data: Mapping[str, Any]) -> list[OverrideItem] | None:
    """The two override forms of a request body (decisions §4), mutually exclusive."""
    if "acquirers" in data and "acquirer_key" in data:
        raise err.AcquirerRuleViolation(err.BOTH_OVERRIDE_FORMS)
    if "acquirer_key" in data:
        return [OverrideItem(acquirer_key=data["acquirer_key"], priority=1)]
    if "acquirers" in data:
        return [OverrideItem(acquirer_key=i["acquirer_key"], priority=i["priority"]) for i in data["acquirers"]]
    return None


def charge_create(
    *,
    account: Account,
    amount: int,
    buyer: Buyer,
    payment_method: str = PaymentMethod.PIX,
    override: Sequence[OverrideItem] | None = None,
    postback_url: str = "",
    metadata: Mapping[str, Any] | None = None,
    in_transaction: Callable[[Charge], None] | None = None,
) -> Charge:
    """Create a charge: acquirer rules (422), business rules (400, in the
    spec's order), then the chain. The charge row is written only when an
    acquirer accepted it; every attempt is recorded either way.
    ``in_transaction`` runs with the new charge before its transaction commits
    (the idempotency key's answer commits with the charge, or neither does)."""
    chosen = resolve_override(account=account, items=override) if override else None

    if payment_method not in account.payment_methods:
        raise err.BusinessRuleError(err.METHOD_NOT_ENABLED)
    if amount > MAX_AMOUNT:
        raise err.BusinessRuleError(err.AMOUNT_ABOVE_MAX)
    platform_tax = cashin_fee(account, amount)
    if amount - platform_tax < MIN_NET_AMOUNT:
        raise err.BusinessRuleError(err.NET_BELOW_MIN)

    chain = cashin_chain(account, amount, chosen)
    charge_id = uuid.uuid4()
    request = ChargeRequest(
        charge_id=charge_id,
        txid=charge_id.hex,  # 32 alphanumerics: within the API Pix's 26-35
        amount=amount,
        expires_in=account.charge_expiry_seconds,
        payer_name=buyer.name,
        payer_document=buyer.document,
        merchant_name=account.name,
        merchant_city=settings.PIX_MERCHANT_CITY,
    )
    outcome = run_charge_chain(chain, request)
    charge = None
    if outcome.result is not None and outcome.acquirer is not None:
        charge = Charge(
            id=charge_id,
            account=account,
            payment_method=payment_method,
            amount=amount,
            platform_tax=platform_tax,
            liquid_amount=amount - platform_tax,
            txid=request.txid,
            emv=outcome.result.emv,
            acquirer=outcome.acquirer,
            provider_charge_id=outcome.result.provider_charge_id,
            buyer_name=buyer.name,
            buyer_document=buyer.document,
            buyer_phone=buyer.phone,
            buyer_address=dict(buyer.address),
            postback_url=postback_url,
            metadata=dict(metadata or {}),
            expires_at=timezone.now() + dt.timedelta(seconds=account.charge_expiry_seconds),
        )
    return charge_store(
        charge=charge, account=account, outcome=outcome, txid=request.txid, in_transaction=in_transaction
    )


def charge_store(
    *,
    charge: Charge | None,
    account: Account,
    outcome: ChainResult[Any],
    txid: str,
    in_transaction: Callable[[Charge], None] | None = None,
    also: Sequence[Model] = (),
    cancel: str = CANCEL_CHARGE,
) -> Charge:
    """Store what a creation through the chain came to: the charge (None:
    no acquirer took it) with ``also`` (rows that belong to it) and every
    attempt; :class:`~payments.exceptions.AllAcquirersFailed` when none took
    it. Acquirers that may hold a charge we will not use are asked to cancel
    it (``cancel``: the task's name)."""
    charge_id = charge.pk if charge is not None else uuid.UUID(hex=txid)
    _cancel_abandoned(outcome.to_cancel, txid, keep=outcome.acquirer, task=cancel)
    rows: list[Model] = [charge, *also] if charge is not None else []
    rows += [
        ChargeAttempt(
            charge_id=charge_id,
            account=account,
            acquirer=a.acquirer,
            position=a.position,
            outcome=a.outcome,
            error_class=a.error_class,
            error_message=a.error_message,
            latency_ms=a.latency_ms,
        )
        for a in outcome.attempts
    ]
    # A failed insert or commit leaves the accepting acquirer with a charge
    # the client never gets: it is asked to cancel it. The charge and its
    # attempts go in one statement, atomic by itself; a transaction is opened
    # only for what must commit with them (the idempotency key's answer).
    with _cancel_unless_stored(outcome.acquirer, txid, cancel):
        if charge is not None and in_transaction is not None:
            with transaction.atomic():
                insert_together(rows)
                in_transaction(charge)
        else:
            insert_together(rows)
    # Committed here: charge_create is never called inside another transaction.
    taken = (outcome.acquirer.key, "created") if charge is not None and outcome.acquirer else ("none", "rejected")
    metrics.CHARGES.labels(*taken).inc()
    if charge is None:
        raise err.AllAcquirersFailed()
    return charge


@contextlib.contextmanager
def _cancel_unless_stored(acquirer: Acquirer | None, txid: str, task: str) -> Iterator[None]:
    try:
        yield
    except BaseException:
        if acquirer is not None:
            _cancel_now(acquirer, txid, task)  # now: no commit is coming
        raise


def _cancel_now(acquirer: Acquirer, txid: str, task: str) -> None:
    from acquirers import tasks

    try:
        getattr(tasks, task).delay(acquirer.pk, txid)
    except Exception:
        # Best effort: a broker outage must not fail a charge that succeeded elsewhere.
        logger.warning("could not enqueue cancel of %s at %s", txid, acquirer.key, exc_info=True)


def _cancel_abandoned(to_cancel: Sequence[Acquirer], txid: str, keep: Acquirer | None, task: str) -> None:
    """After a timeout or an answer we refused, the acquirer may hold the
    charge; ask it, in the background, to cancel, so the payer never holds a
    live code the client did not get."""
    for acquirer in to_cancel:
        if keep is None or acquirer.pk != keep.pk:
            transaction.on_commit(functools.partial(_cancel_now, acquirer, txid, task))


# --------------------------------------------------------------------------- lifecycle


#: (from, to) → (ledger kind, sign of liquid_amount) or None for no money movement (decisions §4).
TRANSITIONS: dict[tuple[str, str], tuple[str, int] | None] = {
    (ChargeStatus.PENDING, ChargeStatus.PAID): (LedgerEntry.Kind.CHARGE_PAID, +1),
    (ChargeStatus.PENDING, ChargeStatus.FAILED): None,
    (ChargeStatus.PENDING, ChargeStatus.CANCELED): None,
    (ChargeStatus.PAID, ChargeStatus.REFUNDED): (LedgerEntry.Kind.CHARGE_REFUND, -1),
    (ChargeStatus.PAID, ChargeStatus.CHARGEBACK): (LedgerEntry.Kind.CHARGE_CHARGEBACK, -1),
    (ChargeStatus.CHARGEBACK, ChargeStatus.PAID): (LedgerEntry.Kind.CHARGEBACK_REVERSAL, +1),
    (ChargeStatus.CHARGEBACK, ChargeStatus.REFUNDED): None,
}


def charge_transition(
    *,
    charge_id: uuid.UUID | str,
    to_status: str,
    source: str,
    actor: str = "",
    e2e_id: str | None = None,
    paid_at: dt.datetime | None = None,
    only_from: Collection[str] | None = None,
    strict: bool = False,
    med: Callable[[Charge], None] | None = None,
    paid_amount: int | None = None,
    components: Mapping[str, int] | None = None,
) -> bool:
    """Apply one status change, its ledger effect, its audit row and its
    webhook event atomically,
    under the charge's row lock (then the balance's, inside ``ledger_post``).

    Returns False, changing nothing, when the charge already is in
    ``to_status`` (a repeated notification). Raises
    :class:`~payments.exceptions.TransitionNotAllowed` for any change the
    table does not allow. ``only_from`` narrows the table: from any other
    status the change is a no-op (late news from an acquirer), or, with
    ``strict``, refused like any change the table does not allow (a client
    asked for exactly this change: the sandbox drivers).

    ``med``: a MED infraction's change (:mod:`infractions.services`), run
    with the locked charge in place of the table's ledger effect: it posts
    the infraction's own entries (a block, its release, a return) and sets
    ``med_open``. While ``med_open`` is set, every other change is refused
    (or, not ``strict``, a no-op): a block's charge moves only with its
    infraction, so no refund or chargeback elsewhere counts its money twice
    (docs/api/infractions.md).

    ``paid_amount``/``components``: what the acquirer reported paid, which a
    due-date charge is credited (:mod:`payments.due_payments`); an immediate
    charge's amount is fixed.
    """
    with transaction.atomic():
        charge = Charge.objects.select_for_update().get(pk=charge_id)
        if charge.status == to_status:
            return False
        # only_from is judged here, under the lock: a caller's earlier read
        # may be stale (a repeated "paid" racing a chargeback must not undo it).
        outside = only_from is not None and charge.status not in only_from
        if outside and not strict:
            return False
        key = (charge.status, to_status)
        if charge.med_open and med is None:
            if not strict:
                return False
            raise err.TransitionNotAllowed(err.MED_OPEN)
        if outside or key not in TRANSITIONS:
            raise err.TransitionNotAllowed(
                f"A transação não pode passar de {ChargeStatus(charge.status).label} "
                f"para {ChargeStatus(to_status).label}."
            )
        effect = TRANSITIONS[key]
        from_status = charge.status
        charge.status = to_status
        charge.version += 1
        fields = ["status", "version", "updated_at"]
        if to_status == ChargeStatus.PAID and charge.paid_at is None:
            charge.paid_at = paid_at or timezone.now()
            charge.e2e_id = e2e_id or charge.e2e_id
            fields += ["paid_at", "e2e_id"]
            if charge.kind == ChargeKind.DUE:
                fields += due_payment_apply(
                    charge, paid_amount=paid_amount, components=components, paid_at=charge.paid_at
                )
        charge.save(update_fields=fields)
        ChargeTransition.objects.create(
            charge=charge, from_status=from_status, to_status=to_status, source=source, actor=actor[:150]
        )
        if to_status == ChargeStatus.CANCELED:
            # Cancelled here (staff, expiry): the acquirer is asked to withdraw
            # it after the commit, until it answers (payments.cancellation).
            charge_cancellation_open(charge=charge)
        if from_status == ChargeStatus.PAID:
            # A reserved refund ends with "paid": refunded, the reservation
            # gives way to the refund's own debit below (the balance moves
            # once); charged back, to the chargeback's.
            # A MED return is not the refund: the refund is released and asked
            # about until the acquirer says whether it made it too.
            refunded = to_status == ChargeStatus.REFUNDED and med is None
            ended = ChargeRefund.Status.DONE if refunded else ChargeRefund.Status.RELEASED
            charge_refund_close(charge=charge, status=ended)
        if med is not None:
            # After a reserved refund's release above: the block sees the balance it gives back.
            med(charge)
            charge.save(update_fields=["med_open"])
        elif effect is not None:
            kind, sign = effect
            ledger_post(
                account_id=charge.account_id,
                amount=sign * charge.liquid_amount,
                kind=kind,
                reference=f"charge:{charge.pk}:{charge.version}",
            )
        acquirer_id = charge.acquirer_id
        metrics.on_commit(lambda: metrics.CHARGE_STATUS_CHANGES.labels(acquirer_label(acquirer_id), to_status).inc())
        owned = kinds.event_of(charge)  # a product above payments (a Pix Automático cycle)
        if owned is not None:
            event_type, record_id, status, data = owned.event_type, owned.record_id, owned.status, owned.data
        elif charge.kind == ChargeKind.DUE:
            event_type, record_id, status, data = EventType.DUE_CHARGE, charge.pk, to_status, due_charge_payload(charge)
        else:
            event_type, record_id, status, data = EventType.TRANSACTION, charge.pk, to_status, charge_payload(charge)
        event_emit(
            account_id=charge.account_id,
            event_type=event_type,
            record_id=record_id,
            status=status,
            data=data,
            postback_url=charge.postback_url,
        )
    return True


def charges_expire(*, now: dt.datetime | None = None, batch_size: int = 500) -> int:
    """Cancel pending charges past their expiry. Safe to run from several
    beats or workers at once: each charge is changed under its lock, and an
    already-changed one is a no-op."""
    moment = now or timezone.now()
    ids = list(
        Charge.objects.filter(status=ChargeStatus.PENDING, expires_at__lte=moment)
        .order_by("expires_at")
        .values_list("pk", flat=True)[:batch_size]
    )
    expired = 0
    for charge_id in ids:
        try:
            expired += charge_transition(
                charge_id=charge_id, to_status=ChargeStatus.CANCELED, source=ChargeTransition.Source.EXPIRY
            )
        except err.TransitionNotAllowed:
            continue  # paid (or otherwise moved on) since we listed it
    return expired
