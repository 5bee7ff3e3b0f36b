"""Reads of the back office's overview: what was processed, which acquirer
fails, what waits for a person. A handful of aggregate queries, each over an
indexed time window or a small partial index, whatever the tables' size.

"Today" is the São Paulo day (``TIME_ZONE``), as merchants and staff count
it: the 7-day window starts at local midnight six days ago.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Aggregate, Count, FloatField, Min, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from accounts.models import AccountChangeRequest, MoneyActionRequest
from acquirers import breaker
from acquirers.models import Acquirer
from infractions.models import Infraction, InfractionRequest
from infractions.selectors import deadline_near, undefended_ahead
from payments.due_models import DueCharge
from payments.models import Charge, ChargeAttempt, ChargeCancellation, ChargeStatus, LatePayment
from webhooks.models import WebhookDelivery, WebhookEndpoint
from withdrawals.models import PayoutBatch, UndeterminedPayout, Withdrawal, WithdrawalStatus

DAYS = 7
ACQUIRER_WINDOW = dt.timedelta(hours=24)
#: Rows of attempts that made no call (the chain skipped the acquirer).
SKIPPED = (ChargeAttempt.Outcome.CIRCUIT_OPEN, ChargeAttempt.Outcome.BUSY)


class PercentileCont(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expr)``:
    the interpolated percentile, computed by the database."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: str, fraction: float, **extra: Any) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError(fraction)
        super().__init__(expression, fraction=repr(float(fraction)), **extra)


# --------------------------------------------------------------------------- volume by day and status


@dataclass(frozen=True)
class Figure:
    """How many records and how many centavos."""

    count: int = 0
    amount: int = 0

    def __add__(self, other: Figure) -> Figure:
        return Figure(self.count + other.count, self.amount + other.amount)


@dataclass(frozen=True)
class Volume:
    """Records created in the window, by São Paulo day and status."""

    days: list[dt.date]  # oldest first; the last one is today
    by_day: dict[dt.date, dict[str, Figure]]
    window_start: dt.datetime  # local midnight of days[0]
    window_end: dt.datetime  # local midnight after today

    @property
    def today(self) -> dict[str, Figure]:
        return self.by_day[self.days[-1]]

    @property
    def week(self) -> dict[str, Figure]:
        total: dict[str, Figure] = defaultdict(Figure)
        for statuses in self.by_day.values():
            for status, figure in statuses.items():
                total[status] += figure
        return dict(total)


def local_midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=timezone.get_default_timezone())


def _volume(queryset: QuerySet[Any], *, now: dt.datetime | None) -> Volume:
    today = timezone.localdate(now or timezone.now(), timezone.get_default_timezone())
    days = [today - dt.timedelta(days=n) for n in range(DAYS - 1, -1, -1)]
    start, end = local_midnight(days[0]), local_midnight(today + dt.timedelta(days=1))
    rows = (
        queryset.filter(created_at__gte=start, created_at__lt=end)
        .annotate(day=TruncDate("created_at", tzinfo=timezone.get_default_timezone()))
        .values("day", "status")
        .annotate(n=Count("*"), total=Sum("amount"))
        .order_by()
    )
    by_day: dict[dt.date, dict[str, Figure]] = {day: {} for day in days}
    for row in rows:
        by_day[row["day"]][row["status"]] = Figure(row["n"], row["total"] or 0)
    return Volume(days=days, by_day=by_day, window_start=start, window_end=end)


def charge_volume(*, now: dt.datetime | None = None) -> Volume:
    """Charges created today and in the last 7 days, by day and status (one query)."""
    return _volume(Charge.objects.all(), now=now)


def withdrawal_volume(*, now: dt.datetime | None = None) -> Volume:
    """Withdrawals requested today and in the last 7 days, by day and status (one query)."""
    return _volume(Withdrawal.objects.all(), now=now)


# --------------------------------------------------------------------------- acquirers


@dataclass(frozen=True)
class AcquirerHealth:
    acquirer: Acquirer
    calls: int  # attempts that called the acquirer (skips aside)
    succeeded: int  # accepted charges
    fallbacks: int  # calls made after an earlier acquirer of the chain failed or was skipped
    skipped: int  # not called: open circuit, or too many calls in flight
    p50_ms: float | None
    p95_ms: float | None
    circuit: str  # pt-BR, as the acquirer's admin shows it

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.calls if self.calls else None


def _circuit_labels(acquirers: list[Acquirer]) -> dict[int, str]:
    if not settings.ACQUIRER_BREAKER_ENABLED:
        return {a.pk: "desligado" for a in acquirers}
    found = breaker.snapshots(acquirers)
    if found is None:
        return {a.pk: "indisponível (Redis fora do ar)" for a in acquirers}
    return {a.pk: breaker.STATE_LABELS[found[a.pk].state] for a in acquirers}


def acquirer_health(*, now: dt.datetime | None = None) -> list[AcquirerHealth]:
    """Each acquirer over the last 24 h, from the charge attempts: one query
    for the acquirers, one for the attempts (the ``attempt_acquirer_recent``
    index, one range per acquirer), one Redis round trip for the circuits."""
    since = (now or timezone.now()) - ACQUIRER_WINDOW
    acquirers = list(Acquirer.objects.order_by("default_priority", "key"))
    called = ~Q(outcome__in=SKIPPED)
    stats: dict[int, dict[str, Any]] = {
        row["acquirer_id"]: dict(row)
        for row in ChargeAttempt.objects.filter(acquirer_id__in=[a.pk for a in acquirers], created_at__gte=since)
        .values("acquirer_id")
        .annotate(
            calls=Count("pk", filter=called),
            succeeded=Count("pk", filter=Q(outcome=ChargeAttempt.Outcome.OK)),
            fallbacks=Count("pk", filter=called & Q(position__gt=1)),
            skipped=Count("pk", filter=~called),
            p50=PercentileCont("latency_ms", 0.5, filter=called),
            p95=PercentileCont("latency_ms", 0.95, filter=called),
        )
        .order_by()
    }
    circuits = _circuit_labels(acquirers)
    health = []
    for acquirer in acquirers:
        row = stats.get(acquirer.pk, {})
        if not row and not acquirer.enabled:
            continue  # switched off and silent: nothing to watch
        health.append(
            AcquirerHealth(
                acquirer=acquirer,
                calls=row.get("calls", 0),
                succeeded=row.get("succeeded", 0),
                fallbacks=row.get("fallbacks", 0),
                skipped=row.get("skipped", 0),
                p50_ms=row.get("p50"),
                p95_ms=row.get("p95"),
                circuit=circuits[acquirer.pk],
            )
        )
    return health


# --------------------------------------------------------------------------- what waits for a person


@dataclass(frozen=True)
class Attention:
    withdrawals_awaiting_approval: Figure
    payout_batches_awaiting_approval: Figure
    money_actions_pending: Figure
    account_changes_pending: int
    undetermined_payouts: Figure
    open_chargebacks: Figure
    late_payments_open: Figure
    cancels_unanswered: Figure
    deliveries_pending: int
    deliveries_failed: int
    endpoints_failing: int
    endpoints_disabled: int


def _figure(queryset: QuerySet[Any], amount: str) -> Figure:
    found = queryset.aggregate(n=Count("*"), total=Sum(amount))
    return Figure(found["n"], found["total"] or 0)


def attention() -> Attention:
    """Queues staff work through, each counted from a partial or small index."""
    # The two partial indexes (delivery_due, delivery_failed), never the
    # delivered rows: an OR of the two predicates (an IN matches neither index).
    backlog = WebhookDelivery.objects.filter(
        Q(status=WebhookDelivery.Status.PENDING) | Q(status=WebhookDelivery.Status.FAILED)
    )
    deliveries = backlog.aggregate(
        pending=Count("pk", filter=Q(status=WebhookDelivery.Status.PENDING)),
        failed=Count("pk", filter=Q(status=WebhookDelivery.Status.FAILED)),
    )
    live = WebhookEndpoint.objects.filter(deleted_at__isnull=True)
    endpoints = live.aggregate(
        failing=Count("pk", filter=Q(is_active=True, failing_since__isnull=False)),
        disabled=Count("pk", filter=Q(is_active=False)),
    )
    return Attention(
        withdrawals_awaiting_approval=_figure(
            Withdrawal.objects.filter(status=WithdrawalStatus.PENDING, account__withdrawals_need_approval=True),
            "amount",
        ),
        # One staff decision each (withdrawals.batches); their items are in the line above too.
        payout_batches_awaiting_approval=_figure(
            PayoutBatch.objects.filter(status=PayoutBatch.Status.AWAITING_APPROVAL), "total_amount"
        ),
        money_actions_pending=_figure(
            MoneyActionRequest.objects.filter(state=MoneyActionRequest.State.PENDING), "amount"
        ),
        account_changes_pending=AccountChangeRequest.objects.filter(state=AccountChangeRequest.State.PENDING).count(),
        undetermined_payouts=_figure(UndeterminedPayout.objects.all(), "liquid_amount"),
        open_chargebacks=_figure(Charge.objects.filter(status=ChargeStatus.CHARGEBACK), "amount"),
        # A Pix received after a cancel, waiting to be credited or returned (late_payment_open).
        late_payments_open=_figure(LatePayment.objects.filter(status=LatePayment.Status.OPEN), "amount"),
        # Charges cancelled here that their acquirer never confirmed withdrawing (cancellation_gave_up).
        cancels_unanswered=_figure(
            ChargeCancellation.objects.filter(state=ChargeCancellation.State.GAVE_UP), "charge__amount"
        ),
        deliveries_pending=deliveries["pending"],
        deliveries_failed=deliveries["failed"],
        endpoints_failing=endpoints["failing"],
        endpoints_disabled=endpoints["disabled"],
    )


# --------------------------------------------------------------------------- MED infractions


@dataclass(frozen=True)
class Infractions:
    open: int
    #: Centavos the acquirers blocked on the open ones, and what of it is kept back on balances.
    blocked: int
    held: int
    #: The nearest deadline still ahead of an open infraction nobody defended (nor waived).
    nearest_deadline: dt.datetime | None
    #: Open, undefended, not waived, the deadline ahead but near (infractions.selectors.deadline_near).
    deadline_near: int
    requests_pending: int


def infractions(*, now: dt.datetime | None = None) -> Infractions:
    """The open infractions in one aggregate over the ``infraction_open_deadline``
    partial index (open ones only, whatever the closed ones' number), and the
    requests waiting for a second staff member."""
    now = now or timezone.now()
    undefended = undefended_ahead(now)
    found = Infraction.objects.filter(closed_at__isnull=True).aggregate(
        open=Count("pk"),
        blocked=Sum("blocked_amount"),
        # An open infraction's block is never released yet: released is the close.
        held=Sum("hold"),
        nearest=Min("defense_deadline", filter=undefended),
        near=Count("pk", filter=deadline_near(now)),
    )
    return Infractions(
        open=found["open"],
        blocked=found["blocked"] or 0,
        held=found["held"] or 0,
        nearest_deadline=found["nearest"],
        deadline_near=found["near"],
        requests_pending=InfractionRequest.objects.filter(state=InfractionRequest.State.PENDING).count(),
    )


@dataclass(frozen=True)
class DueToday:
    """Pending due-date charges due today and overdue (due date before today), Brasília's day."""

    today: Figure
    overdue: Figure


def due_charges(*, today: dt.date) -> DueToday:
    """One aggregate over the pending due-date charges due up to today (the
    ``due_charge_due_date`` index); amounts are their original values."""
    due_today, overdue = Q(due_date=today), Q(due_date__lt=today)
    found = DueCharge.objects.filter(charge__status=ChargeStatus.PENDING, due_date__lte=today).aggregate(
        today_n=Count("pk", filter=due_today),
        today_sum=Sum("original", filter=due_today),
        overdue_n=Count("pk", filter=overdue),
        overdue_sum=Sum("original", filter=overdue),
    )
    return DueToday(
        today=Figure(found["today_n"], found["today_sum"] or 0),
        overdue=Figure(found["overdue_n"], found["overdue_sum"] or 0),
    )
