"""Admin building blocks shared by the apps."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.cache import add_never_cache_headers

from core.exceptions import PixServiceError
from core.money import brl
from core.plural import plural


class ReadOnlyAdminMixin:
    """Evidence and money records: the back office looks, services write."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ActionsOnlyAdminMixin:
    """Records that move only through their admin actions and services
    (charges, withdrawals): every field read-only, none added or deleted by
    hand. Unlike :class:`ReadOnlyAdminMixin` the change permission stays:
    the actions ask for it."""

    #: Set by ModelAdmin.
    model: type[Any]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class UUIDSearchMixin:
    """Search also matches the primary key when the term is a UUID, and never
    lets a non-UUID term reach the UUID column (that would be a 500)."""

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Any], search_term: str) -> Any:
        results, may_have_duplicates = super().get_search_results(  # type: ignore[misc]
            request, queryset, search_term
        )
        with contextlib.suppress(ValueError):
            results |= queryset.filter(pk=uuid.UUID(search_term.strip()))
        return results, may_have_duplicates


class ReadOnlyInlineMixin:
    """An inline that only shows history (attempts, transitions, deliveries)."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# --------------------------------------------------------------------------- confirming money actions

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


@dataclass(frozen=True)
class TransitionActions:
    """The status-changing admin actions of one model (charges, withdrawals).

    ``move(pk, to_status, description, request)`` moves one record through
    the model's transition service and says whether it changed; ``refused``
    is the service's error for a status that no longer allows it (the record
    moved on since the list was loaded): that record is skipped and counted.
    ``done_message`` (singular, plural) gets ``{description}`` and ``{n}``,
    ``skipped_message`` (singular, plural) ``{n}``."""

    move: Callable[[Any, str, str, HttpRequest], bool]
    refused: type[Exception]
    done_message: tuple[str, str]
    skipped_message: tuple[str, str]
    #: Refusals staff must read (not a status that moved on): shown per record, nothing changed.
    reported: tuple[type[PixServiceError], ...] = ()

    def action(
        self,
        name: str,
        description: str,
        to_status: str,
        from_statuses: tuple[str, ...],
        *,
        permission: str = "change",
        confirmation: Confirmation | None = None,
    ) -> Callable[[Any, HttpRequest, QuerySet[Any]], HttpResponse | None]:
        """An admin action moving each selected record to ``to_status``,
        logging each change; records whose status does not allow it are
        skipped and counted. With a ``confirmation`` (money moves) it first
        shows the confirmation page and logs the reason given there."""

        def perform(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any], reason: str) -> None:
            done = skipped = 0
            for record in queryset.select_related(None).only("pk", "status"):
                changed = False
                if record.status in from_statuses:
                    try:
                        changed = self.move(record.pk, to_status, description, request)
                    except self.refused:  # moved on since the list was loaded
                        pass
                    except self.reported as exc:
                        modeladmin.message_user(request, f"{record.pk}: {exc.message}", messages.ERROR)
                        continue
                if changed:
                    done += 1
                    # The history is staff's: statuses by their pt-BR labels.
                    labels = dict(type(record)._meta.get_field("status").choices or ())
                    shown = f"{labels.get(record.status, record.status)} → {labels.get(to_status, to_status)}"
                    logged = f"{description} ({shown})"
                    modeladmin.log_change(request, record, f"{logged}. Motivo: {reason}" if reason else logged)
                else:
                    skipped += 1
            if done:
                modeladmin.message_user(
                    request, plural(done, *self.done_message).replace("{description}", description), messages.SUCCESS
                )
            if skipped:
                modeladmin.message_user(request, plural(skipped, *self.skipped_message), messages.WARNING)

        if confirmation is not None:
            return confirm_first(
                perform, name=name, description=description, permission=permission, confirmation=confirmation
            )

        def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> None:
            perform(modeladmin, request, queryset, "")

        action.__name__ = name
        return admin.action(description=description, permissions=[permission])(action)


# --------------------------------------------------------------------------- login throttling


def login_client_address(request: HttpRequest) -> str | None:
    """The address django-axes counts a staff login's failures against.

    Behind the TLS proxy (``TRUST_X_FORWARDED_PROTO``) every request comes
    from the proxy's address, so REMOTE_ADDR would let anyone lock any staff
    member out; the proxy appends the address it saw to X-Forwarded-For, and
    only that right-most entry is its word (the ones before it are the
    client's). Without a proxy the header is the client's to forge."""
    address: str | None = request.META.get("REMOTE_ADDR")
    if getattr(settings, "TRUST_X_FORWARDED_PROTO", False):
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")[-1].strip()
        address = forwarded or address
    return address
