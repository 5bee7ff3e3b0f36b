"""*Resultados por banco pagador e jornada*: a page of the recurrences'
admin. Per payer bank (ISPB) and journey, the recurrences created in the
period and where they stand (authorised, rejected, expired, cancelled by
the payer or by the receiver) with the approval rate, and the cycles due
in the period and how they ended (paid at the first attempt, after a
retry, failed, missed). Users of PSPs report banks that fail some
journeys: the figures are shown per bank, each linked to the records it
counts (:func:`recurrences.admin_selectors.outcomes`)."""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from payments.due_payments import now_in_brazil
from recurrences import admin_selectors
from recurrences.admin_selectors import Outcomes
from recurrences.models import CycleStatus, Journey

TEMPLATE = "admin/recurrences/outcomes.html"
#: The period shown when none is asked: the last 30 days, today included.
DEFAULT_DAYS = 30
#: The longest period one page aggregates.
MAX_DAYS = 366


class PeriodForm(forms.Form):
    start = forms.DateField(label="De", widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"))
    end = forms.DateField(label="Até", widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"))

    def clean(self) -> dict[str, Any] | None:
        data = super().clean() or {}
        start, end = data.get("start"), data.get("end")
        if start and end:
            if start > end:
                raise forms.ValidationError("A data inicial é posterior à final.")
            if (end - start).days >= MAX_DAYS:
                raise forms.ValidationError(f"Escolha um período de até {MAX_DAYS} dias.")
        return data


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}".replace(".", ",")


def _list(model: str, **params: str) -> str:
    return f"{reverse(f'admin:recurrences_{model}_changelist')}?{urlencode(params)}"


def _row(row: Outcomes, start: dt.date, end: dt.date) -> dict[str, Any]:
    """A row as the page shows it: the figures and the lists behind them (none for the total or an unknown bank)."""
    links: dict[str, str] = {}
    if row.ispb and row.journey:
        created = {
            "payer_ispb": row.ispb,
            "journey__exact": row.journey,
            "created_at__gte": start.isoformat(),
            "created_at__lt": (end + dt.timedelta(days=1)).isoformat(),
        }
        due = {
            "payer_ispb": row.ispb,
            "recurrence__journey__exact": row.journey,
            "due_date__gte": start.isoformat(),
            "due_date__lt": (end + dt.timedelta(days=1)).isoformat(),
        }
        links = {
            "created": _list("recurrence", **created),
            "rejected": _list("recurrence", **created, status="rejected"),
            "expired": _list("recurrence", **created, status="expired"),
            "failed": _list("cycle", **due, status=CycleStatus.FAILED),
            "missed": _list("cycle", **due, status=CycleStatus.MISSED),
        }
    return {
        "ispb": row.ispb or "não informado",
        "journey": Journey(row.journey).label if row.journey else "",
        "figures": row,
        "approval_rate": _percent(row.approval_rate),
        "paid_rate": _percent(row.paid_rate),
        "links": links,
    }


def outcomes_view(modeladmin: Any, request: HttpRequest) -> HttpResponse:
    if not modeladmin.has_view_permission(request):
        raise PermissionDenied
    today = now_in_brazil()
    initial = {"start": today - dt.timedelta(days=DEFAULT_DAYS - 1), "end": today}
    form = PeriodForm(request.GET if "start" in request.GET else None, initial=initial)
    start, end = initial["start"], initial["end"]
    if form.is_bound and form.is_valid():
        start, end = form.cleaned_data["start"], form.cleaned_data["end"]
    rows, total = admin_selectors.outcomes(start=start, end=end)
    return TemplateResponse(
        request,
        TEMPLATE,
        {
            **modeladmin.admin_site.each_context(request),
            "opts": modeladmin.model._meta,
            "title": "Pix Automático: resultados por banco pagador e jornada",
            "form": form,
            "start": start,
            "end": end,
            "rows": [_row(row, start, end) for row in rows],
            "total": _row(total, start, end),
        },
    )
