"""The overview on the back office's index: the selectors' figures as staff
read them (R$, pt-BR percentages), each linked to the admin list that shows
exactly those records, and the 7-day bar charts drawn as inline SVG here
(no JavaScript, nothing fetched from elsewhere)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db.models import TextChoices
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone

from core.money import brl
from observability import selectors
from observability.selectors import Figure, Volume, local_midnight
from payments.due_payments import day_in_brazil, now_in_brazil
from payments.models import ChargeStatus
from recurrences import admin_selectors as recurrence_selectors
from withdrawals.models import WithdrawalStatus

#: Who sees the overview: every back-office group can view charges.
OVERVIEW_PERMISSION = "payments.view_charge"
#: Who sees the MED card (every back-office group can).
INFRACTIONS_PERMISSION = "infractions.view_infraction"
DUE_CHARGES_PERMISSION = "payments.view_duecharge"
RECURRENCES_PERMISSION = "recurrences.view_recurrence"

# Chart geometry (SVG user units; the SVG scales to its box).
BAR_WIDTH, BAR_GAP, CHART_HEIGHT, LABEL_SPACE, TOP_SPACE = 36, 14, 120, 18, 16


@dataclass(frozen=True)
class Cell:
    """A figure shown as a link to the records it counts."""

    count: int
    amount: str  # R$
    url: str


@dataclass(frozen=True)
class StatusRow:
    label: str
    today: Cell
    week: Cell


@dataclass(frozen=True)
class Bar:
    x: int
    label: str  # dd/mm
    title: str  # the tooltip: the day's figures
    url: str
    paid_y: int
    paid_height: int
    other_y: int
    other_height: int


@dataclass(frozen=True)
class VolumePanel:
    title: str
    paid_label: str
    today_total: Cell
    today_paid: Cell
    week_total: Cell
    rows: list[StatusRow]
    bars: list[Bar]
    chart_width: int
    chart_height: int
    baseline: int


def admin_list(site: str, model: str, **params: Any) -> str:
    """The changelist of ``app_model`` filtered by its own list_filter parameters."""
    url = reverse(f"{site}:{model}_changelist")
    return f"{url}?{urlencode(params)}" if params else url


def _window(start: dt.datetime, end: dt.datetime) -> dict[str, str]:
    # The parameters of the lists' created_at DateFieldListFilter, with the offset.
    return {"created_at__gte": str(start), "created_at__lt": str(end)}


def _sum(figures: dict[str, Figure]) -> Figure:
    return sum(figures.values(), Figure())


def _cell(figure: Figure, url: str) -> Cell:
    return Cell(figure.count, brl(figure.amount), url)


def _bars(volume: Volume, url: Any, paid: str) -> tuple[list[Bar], int]:
    totals = {day: _sum(volume.by_day[day]) for day in volume.days}
    highest = max((figure.amount for figure in totals.values()), default=0) or 1
    bars = []
    baseline = TOP_SPACE + CHART_HEIGHT
    for i, day in enumerate(volume.days):
        paid_amount = volume.by_day[day].get(paid, Figure()).amount
        total = totals[day]
        paid_height = round(CHART_HEIGHT * paid_amount / highest)
        other_height = round(CHART_HEIGHT * total.amount / highest) - paid_height
        start = local_midnight(day)
        bars.append(
            Bar(
                x=BAR_GAP // 2 + i * (BAR_WIDTH + BAR_GAP),
                label=day.strftime("%d/%m"),
                title=f"{day:%d/%m}: {total.count} no total, {brl(total.amount)}; {brl(paid_amount)} pago",
                url=url(**_window(start, local_midnight(day + dt.timedelta(days=1)))),
                paid_y=baseline - paid_height,
                paid_height=paid_height,
                other_y=baseline - paid_height - other_height,
                other_height=other_height,
            )
        )
    return bars, baseline


def _panel(title: str, volume: Volume, statuses: type[TextChoices], paid: str, url: Any) -> VolumePanel:
    today, week = volume.today, volume.week
    today_window = _window(local_midnight(volume.days[-1]), volume.window_end)
    week_window = _window(volume.window_start, volume.window_end)
    rows = [
        StatusRow(
            label=str(label),
            today=_cell(today.get(value, Figure()), url(status__exact=value, **today_window)),
            week=_cell(week.get(value, Figure()), url(status__exact=value, **week_window)),
        )
        for value, label in statuses.choices
    ]
    bars, baseline = _bars(volume, url, paid)
    return VolumePanel(
        title=title,
        paid_label=str(statuses(paid).label),
        today_total=_cell(_sum(today), url(**today_window)),
        today_paid=_cell(today.get(paid, Figure()), url(status__exact=paid, **today_window)),
        week_total=_cell(_sum(week), url(**week_window)),
        rows=rows,
        bars=bars,
        chart_width=len(bars) * (BAR_WIDTH + BAR_GAP),
        chart_height=baseline + LABEL_SPACE,
        baseline=baseline,
    )


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}".replace(".", ",")


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{round(value)} ms"


def overview_context(request: HttpRequest, site: str, *, now: dt.datetime | None = None) -> dict[str, Any] | None:
    """Everything the index's overview shows; None for staff without access."""
    if not request.user.has_perm(OVERVIEW_PERMISSION):
        return None

    def link(model: str) -> Any:
        return lambda **params: admin_list(site, model, **params)

    charges, withdrawals = link("payments_charge"), link("withdrawals_withdrawal")
    waiting = selectors.attention()
    # The acquirer's charges of the same 24 h (created there: a fallback's charge is the one that accepted it).
    since = str(timezone.localtime(now or timezone.now()) - selectors.ACQUIRER_WINDOW)
    acquirers = [
        {
            "name": health.acquirer.name,
            "key": health.acquirer.key,
            "url": reverse(f"{site}:acquirers_acquirer_change", args=[health.acquirer.pk]),
            "charges_url": charges(acquirer__id__exact=health.acquirer.pk, created_at__gte=since),
            "calls": health.calls,
            "success_rate": _percent(health.success_rate),
            "failing": health.success_rate is not None and health.success_rate < 0.9,
            "p50": _ms(health.p50_ms),
            "p95": _ms(health.p95_ms),
            "fallbacks": health.fallbacks,
            "skipped": health.skipped,
            "circuit": health.circuit,
            "circuit_open": health.circuit not in ("fechado", "desligado"),
        }
        for health in selectors.acquirer_health(now=now)
    ]
    attention = [
        ("Saques aguardando aprovação", waiting.withdrawals_awaiting_approval, withdrawals(queue="awaiting")),
        (
            "Lotes de saques aguardando aprovação",
            waiting.payout_batches_awaiting_approval,
            admin_list(site, "withdrawals_payoutbatch", status__exact="awaiting_approval"),
        ),
        (
            "Pedidos de aprovação (maker-checker)",
            waiting.money_actions_pending,
            admin_list(site, "accounts_moneyactionrequest", state__exact="pending"),
        ),
        (
            # No amount: a contact e-mail, manual approval or limit waiting for a second person.
            "Alterações de conta (e-mail, aprovação, limites)",
            Figure(waiting.account_changes_pending, 0),
            admin_list(site, "accounts_accountchangerequest", state__exact="pending"),
        ),
        ("Pagamentos indeterminados", waiting.undetermined_payouts, admin_list(site, "withdrawals_undeterminedpayout")),
        ("Contestações abertas (MED)", waiting.open_chargebacks, charges(status__exact=ChargeStatus.CHARGEBACK)),
        (
            "Pagamentos após cancelamento",
            waiting.late_payments_open,
            admin_list(site, "payments_latepayment", status__exact="open"),
        ),
        (
            "Cancelamentos sem resposta da adquirente",
            waiting.cancels_unanswered,
            admin_list(site, "payments_chargecancellation", state__exact="gave_up"),
        ),
    ]
    infractions = _infractions(request, site, now=now)
    if infractions is not None:
        attention.append(
            (
                # No amount: a registration or a close waiting for a second person.
                "Pedidos sobre infrações MED",
                Figure(infractions["requests_pending"], 0),
                admin_list(site, "infractions_infractionrequest", state__exact="pending"),
            )
        )
    deliveries, endpoints = link("webhooks_webhookdelivery"), link("webhooks_webhookendpoint")
    webhooks = [
        ("Entregas pendentes", waiting.deliveries_pending, deliveries(status__exact="pending")),
        ("Entregas que falharam", waiting.deliveries_failed, deliveries(status__exact="failed")),
        ("Endpoints falhando", waiting.endpoints_failing, endpoints(health="failing")),
        ("Endpoints desativados", waiting.endpoints_disabled, endpoints(health="disabled")),
    ]
    return {
        "volumes": [
            _panel("Cobranças", selectors.charge_volume(now=now), ChargeStatus, ChargeStatus.PAID, charges),
            _panel(
                "Saques", selectors.withdrawal_volume(now=now), WithdrawalStatus, WithdrawalStatus.PAID, withdrawals
            ),
        ],
        "acquirers": acquirers,
        "acquirer_window_hours": int(selectors.ACQUIRER_WINDOW.total_seconds() // 3600),
        "attention": [
            {"label": label, "count": figure.count, "amount": brl(figure.amount) if figure.amount else "", "url": url}
            for label, figure, url in attention
        ],
        "webhooks": [{"label": label, "count": count, "url": url} for label, count, url in webhooks],
        "infractions": infractions["tiles"] if infractions is not None else None,
        "due_charges": _due_charges(request, site, now=now),
        "recurrences": _recurrences(request, site, now=now),
    }


def _recurrences(request: HttpRequest, site: str, *, now: dt.datetime | None) -> list[dict[str, Any]] | None:
    """The Pix Automático card: recurrences waiting for the payer's
    authorisation, and the cycles due in the last 7 days that failed or were
    missed (what staff look at: a missed one may still be sent); None for
    staff who cannot see recurrences."""
    if not request.user.has_perm(RECURRENCES_PERMISSION):
        return None
    found = recurrence_selectors.attention(today=day_in_brazil(now) if now else now_in_brazil())
    since = found.since.isoformat()
    cycles = [
        ("failed", "Ciclos falhos (últimos 7 dias)", found.failed_recent),
        ("missed", "Ciclos perdidos (últimos 7 dias)", found.missed_recent),
    ]
    return [
        {
            "figure": "waiting",
            "label": "Aguardando autorização do pagador",
            "count": found.waiting_authorisation,
            "url": admin_list(site, "recurrences_recurrence", status="created"),
            "hot": False,
        },
        *(
            {
                "figure": status,
                "label": label,
                "count": count,
                "url": admin_list(site, "recurrences_cycle", status=status, due_date__gte=since),
                "hot": count > 0,
            }
            for status, label, count in cycles
        ),
    ]


def _due_charges(request: HttpRequest, site: str, *, now: dt.datetime | None) -> list[dict[str, Any]] | None:
    """The due-date charges card: pending ones due today and overdue, by
    their original amounts (nothing waits for staff here: it is what the
    merchants' billing looks like today); None for staff who cannot see them."""
    if not request.user.has_perm(DUE_CHARGES_PERMISSION):
        return None
    due = selectors.due_charges(today=day_in_brazil(now) if now else now_in_brazil())
    return [
        {
            "figure": situation,
            "label": label,
            "count": figure.count,
            "amount": brl(figure.amount) if figure.count else "",
            "url": admin_list(site, "payments_duecharge", situation=situation),
        }
        for situation, label, figure in (("today", "Vencem hoje", due.today), ("overdue", "Vencidas", due.overdue))
    ]


def _infractions(request: HttpRequest, site: str, *, now: dt.datetime | None) -> dict[str, Any] | None:
    """The MED card: open infractions, what they block, the nearest deadline
    nobody answered, and how many end within 24 h undefended (what
    ``pix_infractions_deadline_near`` alerts on); None for staff who cannot
    see infractions."""
    if not request.user.has_perm(INFRACTIONS_PERMISSION):
        return None
    found = selectors.infractions(now=now)

    def queue(**params: str) -> str:
        return admin_list(site, "infractions_infraction", **params)

    nearest = found.nearest_deadline
    tiles = [
        {"figure": "open", "label": "Abertas", "value": str(found.open), "url": queue(queue="open"), "hot": False},
        {
            "figure": "blocked",
            "label": f"Bloqueado nas adquirentes ({brl(found.held)} retido nos saldos)",
            "value": brl(found.blocked),
            "url": queue(queue="open"),
            "hot": False,
        },
        {
            "figure": "nearest-deadline",
            "label": "Próximo prazo sem defesa",
            "value": timezone.localtime(nearest).strftime("%d/%m %H:%M") if nearest else "—",
            "url": queue(queue="awaiting"),
            "hot": False,
        },
        {
            "figure": "deadline-near",
            "label": "Prazo em menos de 24 h, sem defesa",
            "value": str(found.deadline_near),
            "url": queue(queue="deadline_near"),
            "hot": found.deadline_near > 0,
        },
    ]
    return {"tiles": tiles, "requests_pending": found.requests_pending}
