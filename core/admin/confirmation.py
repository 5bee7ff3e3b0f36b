"""Confirming what staff do to money: the page that shows the selected
records, their amounts and effect and asks for a reason, before a list
action runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.cache import add_never_cache_headers

from core.money import brl

CONFIRM_TEMPLATE = "admin/confirm_money_action.html"
#: Set by the confirmation page's form: without it an action only shows the page.
CONFIRMED = "confirmed"


class ReasonForm(forms.Form):
    reason = forms.CharField(
        label="Motivo", max_length=500, widget=forms.Textarea(attrs={"rows": 3, "cols": 80}), strip=True
    )


@dataclass(frozen=True)
class Confirmation:
    """What the confirmation page of an action that moves money says.

    ``amount(record)`` is the centavos the action moves for that record and
    ``effect`` what happens to them (credited, debited, sent)."""

    effect: str
    #: Heading of the amount column: "Crédito na conta", "Enviado via Pix"...
    column: str
    amount: Callable[[Any], int]
    from_statuses: tuple[str, ...]
    #: The field ``from_statuses`` is matched against.
    status_field: str = "status"
    #: Shown under the title: e.g. that a second staff member must approve.
    note: str = ""
    #: More columns, ``(heading, value(record))``: e.g. where a withdrawal's Pix goes and to whom.
    columns: tuple[tuple[str, Callable[[Any], str]], ...] = ()


def reason_form(request: HttpRequest) -> ReasonForm:
    """The reason of a confirmation page, bound only on that page's own
    submit (the list's action POST carries no reason)."""
    return ReasonForm(request.POST if request.POST.get(CONFIRMED) else None)


def confirmation_page(
    modeladmin: Any,
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    name: str,
    description: str,
    template: str,
    form: ReasonForm,
    **context: Any,
) -> TemplateResponse:
    """The page a list action shows before acting: the selection and the
    action carried over, the reason asked, never cached; ``context`` is
    what the template shows of the records."""
    response = TemplateResponse(
        request,
        template,
        {
            **modeladmin.admin_site.each_context(request),
            "opts": modeladmin.model._meta,
            "title": f"{description}: confirmar",
            "description": description,
            "selected": [str(pk) for pk in queryset.values_list("pk", flat=True)],
            "action_name": name,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "confirmed_field": CONFIRMED,
            "form": form,
            **context,
        },
    )
    add_never_cache_headers(response)
    return response


def confirm_or_perform(
    modeladmin: Any,
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    name: str,
    description: str,
    template: str,
    perform: Callable[[str], None],
    page: Callable[[], dict[str, Any]],
) -> HttpResponse | None:
    """The two steps of an action that asks a reason: with the confirmation
    page's reason, ``perform(reason)``; otherwise that page (``template``,
    with ``page()``'s context: what it shows of the records)."""
    form = reason_form(request)
    if form.is_valid():
        perform(form.cleaned_data["reason"])
        return None
    return confirmation_page(
        modeladmin, request, queryset, name=name, description=description, template=template, form=form, **page()
    )


def confirm_first(
    perform: Callable[[Any, HttpRequest, QuerySet[Any], str], None],
    *,
    name: str,
    description: str,
    permission: str,
    confirmation: Confirmation,
) -> Callable[[Any, HttpRequest, QuerySet[Any]], HttpResponse | None]:
    """An admin action that first shows the records it would act on, their
    amounts and total, and asks for a reason (like Django's delete
    confirmation); only the page's own submit, with a reason, calls
    ``perform(modeladmin, request, queryset, reason)``."""

    def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        field = confirmation.status_field
        records = list(
            queryset.filter(**{f"{field}__in": confirmation.from_statuses}).select_related("account").order_by("pk")
        )
        if not records:
            modeladmin.message_user(
                request, f"{description}: nenhum registro selecionado está em um status que permita.", messages.WARNING
            )
            return None

        def page() -> dict[str, Any]:
            amounts = [confirmation.amount(record) for record in records]
            return {
                "confirmation": confirmation,
                "rows": [
                    (
                        record,
                        getattr(record, f"get_{field}_display")(),
                        brl(record.amount),
                        brl(amount),
                        [value(record) for _, value in confirmation.columns],
                    )
                    for record, amount in zip(records, amounts, strict=True)
                ],
                "total": brl(sum(amounts)),
                "skipped": queryset.count() - len(records),
            }

        return confirm_or_perform(
            modeladmin,
            request,
            queryset,
            name=name,
            description=description,
            template=CONFIRM_TEMPLATE,
            perform=lambda reason: perform(modeladmin, request, queryset, reason),
            page=page,
        )

    action.__name__ = name
    return admin.action(description=description, permissions=[permission])(action)
