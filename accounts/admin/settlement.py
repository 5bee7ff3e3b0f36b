"""Back office: an account's settlement per day (``accounts.settlement``),
reached from the account's page: credits, debits, fees and the closing
balance of each America/Sao_Paulo day of a period, in reais, and the same
table as a CSV file (``?formato=csv``)."""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account
from accounts.settlement import SAO_PAULO, Settlement, account_settlement, settlement_period_error
from core.admin.lists import CsvColumn, csv_download, csv_money
from core.money import brl

TEMPLATE = "admin/accounts/account/settlement.html"
DATE_INPUT = forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")


class SettlementPeriodForm(forms.Form):
    inicio = forms.DateField(label="De", input_formats=["%Y-%m-%d", "%d/%m/%Y"], widget=DATE_INPUT)
    fim = forms.DateField(label="Até", input_formats=["%Y-%m-%d", "%d/%m/%Y"], widget=DATE_INPUT)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("inicio"), data.get("fim")
        if start is not None and end is not None and (problem := settlement_period_error(start, end)):
            self.add_error("fim", problem)
        return data


def _date(day: dt.date) -> str:
    return day.strftime("%d/%m/%Y")


#: The back office's CSV columns (each amount in centavos and in reais, as its other exports).
CSV_COLUMNS = (
    CsvColumn("data", lambda day: _date(day.date)),
    *csv_money("credits", "créditos"),
    *csv_money("debits", "débitos"),
    *csv_money("fees", "tarifas"),
    CsvColumn("lançamentos", lambda day: day.entries),
    *csv_money("closing_balance", "saldo final"),
)


def _table(settlement: Settlement) -> dict[str, Any]:
    """What the page shows of ``settlement``: dates dd/mm/aaaa, money in reais."""
    return {
        "days": [
            (_date(d.date), brl(d.credits), brl(d.debits), brl(d.fees), d.entries, brl(d.closing_balance))
            for d in settlement.days
        ],
        "totals": {name: value if name == "entries" else brl(value) for name, value in settlement.totals.items()},
        "opening": brl(settlement.opening_balance),
        "closing": brl(settlement.closing_balance),
        "last_day": _date(settlement.date_end),
        "csv_query": urlencode(
            {"inicio": settlement.date_start.isoformat(), "fim": settlement.date_end.isoformat(), "formato": "csv"}
        ),
    }


def settlement_view(model_admin: admin.ModelAdmin[Account], request: HttpRequest, object_id: str) -> HttpResponseBase:
    """The page (or its CSV) for staff who may see the account and its ledger."""
    account = model_admin.get_object(request, unquote(object_id))
    if account is None:
        raise Http404("Conta não encontrada.")
    if not (model_admin.has_view_permission(request, account) and request.user.has_perm("accounts.view_ledgerentry")):
        raise PermissionDenied
    today = timezone.localdate(timezone.now(), SAO_PAULO)
    given = {name: request.GET[name] for name in ("inicio", "fim") if name in request.GET}
    form = SettlementPeriodForm(given or {"inicio": today.replace(day=1).isoformat(), "fim": today.isoformat()})
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "original": account,
        "title": f"Fechamento diário de {account.name}",
        "form": form,
        "account_url": reverse("admin:accounts_account_change", args=[quote(account.pk)]),
    }
    if form.is_valid():
        start, end = form.cleaned_data["inicio"], form.cleaned_data["fim"]
        settlement = account_settlement(account=account, date_start=start, date_end=end)
        if request.GET.get("formato") == "csv":
            period = f"{settlement.date_start:%Y%m%d}-{settlement.date_end:%Y%m%d}"
            return csv_download(request, CSV_COLUMNS, settlement.days, filename=f"fechamento-{account.pk}-{period}.csv")
        context |= {"settlement": settlement, **_table(settlement)}
    return TemplateResponse(request, TEMPLATE, context)
