"""Admin building blocks shared by the apps."""

from __future__ import annotations

import contextlib
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.cache import cache
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.cache import add_never_cache_headers

from core.money import brl

# --------------------------------------------------------------------------- money as staff read and type it


def money(field: str, description: str) -> Callable[[Any, Any], str]:
    """A list or detail column showing ``field`` (centavos) as ``R$ 1.234,56``,
    sorted by the stored integer. Use as a ModelAdmin attribute:
    ``amount_brl = money("amount", "Valor")``."""

    @admin.display(description=description, ordering=field)
    def column(modeladmin: Any, record: Any) -> str:
        value = getattr(record, field)
        return "—" if value is None else brl(value)

    column.__name__ = f"{field}_brl"
    return column


_REAIS = re.compile(r"^-?\d+(?:[.,]\d{1,2})?$")


def parse_reais(text: str) -> int:
    """``"1.234,56"``, ``"R$ 1234,56"``, ``"1234.56"``, ``"12"`` → centavos.

    A comma is always the decimal mark when present (dots before it group
    thousands); without a comma a dot followed by one or two digits at the end
    is the decimal mark, any other dot groups thousands ("1.234" is R$ 1.234,00).
    More than two decimals is refused, never rounded: money is not guessed."""
    value = text.strip().removeprefix("R$").strip().replace(" ", "")
    if "," in value or not re.search(r"\.\d{1,2}$", value):
        value = value.replace(".", "")
    if not _REAIS.match(value):
        raise ValueError(text)
    negative = value.startswith("-")
    whole, _, cents = value.lstrip("-").replace(",", ".").partition(".")
    centavos = int(whole) * 100 + int((cents + "00")[:2])
    return -centavos if negative else centavos


class ReaisField(forms.CharField):
    """A form field for a centavos column that staff fill in reais
    (``1.234,56``); the model still receives and validates integer centavos."""

    default_error_messages = {
        "invalid": "Informe um valor em reais, por exemplo 1.234,56 (no máximo dois decimais).",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.pop("max_length", None)
        kwargs.pop("min_value", None)
        kwargs.pop("max_value", None)
        kwargs.pop("step_size", None)
        super().__init__(**kwargs)
        self.widget.attrs.setdefault("inputmode", "decimal")
        self.widget.attrs.setdefault("placeholder", "0,00")

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return brl(value).replace("R$ ", "")
        return value

    def to_python(self, value: Any) -> int | None:  # type: ignore[override]
        text = super().to_python(value)
        if text is None or text in self.empty_values:
            return None
        try:
            return parse_reais(text)
        except ValueError:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid") from None

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return bool(self.to_python(data) != initial)
        except forms.ValidationError:
            return True


class ReaisFieldsMixin:
    """ModelAdmin mixin: the centavos fields named in ``reais_fields`` are
    typed in reais on the change form (label, help text and required-ness
    stay the model's; a note says the unit)."""

    reais_fields: tuple[str, ...] = ()

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name in self.reais_fields:
            help_text = str(db_field.help_text or "")
            return ReaisField(
                label=str(db_field.verbose_name).capitalize(),
                required=not db_field.blank,
                help_text=f"{help_text} Em reais, por exemplo 1.234,56.".strip(),
            )
        return super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]


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
        form = ReasonForm(request.POST if request.POST.get(CONFIRMED) else None)
        if form.is_valid():
            perform(modeladmin, request, queryset, form.cleaned_data["reason"])
            return None
        amounts = [confirmation.amount(record) for record in records]
        context = {
            **modeladmin.admin_site.each_context(request),
            "opts": modeladmin.model._meta,
            "title": f"{description}: confirmar",
            "description": description,
            "confirmation": confirmation,
            "rows": [
                (record, getattr(record, f"get_{field}_display")(), brl(record.amount), brl(amount))
                for record, amount in zip(records, amounts, strict=True)
            ],
            "total": brl(sum(amounts)),
            "skipped": queryset.count() - len(records),
            "selected": [str(pk) for pk in queryset.values_list("pk", flat=True)],
            "action_name": name,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "confirmed_field": CONFIRMED,
            "form": form,
        }
        response = TemplateResponse(request, CONFIRM_TEMPLATE, context)
        add_never_cache_headers(response)
        return response

    action.__name__ = name
    return admin.action(description=description, permissions=[permission])(action)


@dataclass(frozen=True)
class TransitionActions:
    """The status-changing admin actions of one model (charges, withdrawals).

    ``move(pk, to_status, description, request)`` moves one record through
    the model's transition service and says whether it changed; ``refused``
    is the service's error for a status that no longer allows it (the record
    moved on since the list was loaded): that record is skipped and counted.
    ``done_message`` gets ``{description}`` and ``{count}``,
    ``skipped_message`` ``{count}``."""

    move: Callable[[Any, str, str, HttpRequest], bool]
    refused: type[Exception]
    done_message: str
    skipped_message: str

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
                    with contextlib.suppress(self.refused):  # moved on since the list was loaded
                        changed = self.move(record.pk, to_status, description, request)
                if changed:
                    done += 1
                    logged = f"{description} ({record.status} → {to_status})"
                    modeladmin.log_change(request, record, f"{logged}. Motivo: {reason}" if reason else logged)
                else:
                    skipped += 1
            if done:
                modeladmin.message_user(
                    request, self.done_message.format(description=description, count=done), messages.SUCCESS
                )
            if skipped:
                modeladmin.message_user(request, self.skipped_message.format(count=skipped), messages.WARNING)

        if confirmation is not None:
            return confirm_first(
                perform, name=name, description=description, permission=permission, confirmation=confirmation
            )

        def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> None:
            perform(modeladmin, request, queryset, "")

        action.__name__ = name
        return admin.action(description=description, permissions=[permission])(action)


# --------------------------------------------------------------------------- secrets shown once

#: Session keys of the tokens of secrets waiting for the page that shows them once.
REVEAL_PREFIX = "pix_admin_reveal:"
#: A secret not read within this many seconds of its POST is dropped unseen.
REVEAL_MAX_AGE = 600


def reveal_later(
    request: HttpRequest, *, template: str, context: dict[str, Any], url_name: str, back_url: str
) -> HttpResponse:
    """Post/Redirect/Get for a page that shows a new secret: the answer to the
    POST is a 303 to the page that shows it once (:func:`reveal_view`).
    Reloading that page shows nothing again and never repeats the POST (no
    second credential, no second rotation).

    The secret waits in the cache (Redis), which drops it after
    ``REVEAL_MAX_AGE`` whether or not the page is opened; the session (a
    database row, signed but not encrypted, as long-lived as the login) holds
    only the random token, which also binds the page to this staff member."""
    now = time.time()
    for key, at in list(request.session.items()):
        # Not a number: a secret itself, stored here by an earlier release.
        if key.startswith(REVEAL_PREFIX) and (not isinstance(at, float) or now - at > REVEAL_MAX_AGE):
            del request.session[key]
    token = secrets.token_urlsafe(18)
    cache.set(
        REVEAL_PREFIX + token,
        {"template": template, "context": {**context, "back_url": back_url}},
        timeout=REVEAL_MAX_AGE,
    )
    request.session[REVEAL_PREFIX + token] = now
    response = HttpResponseRedirect(reverse(url_name, args=[token]))
    response.status_code = 303
    return response


def reveal_view(modeladmin: Any, request: HttpRequest, token: str) -> HttpResponse:
    """Shows what :func:`reveal_later` stored, once, to the session that
    stored it: it is removed as it is read, and the page is never cached."""
    stored = None
    if request.session.pop(REVEAL_PREFIX + token, None) is not None:
        stored = cache.get(REVEAL_PREFIX + token)
        cache.delete(REVEAL_PREFIX + token)
    if stored is None:
        modeladmin.message_user(
            request,
            "Este segredo já foi exibido e não é mostrado de novo. Se não foi copiado, rotacione-o.",
            messages.WARNING,
        )
        opts = modeladmin.model._meta
        return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
    context = {**modeladmin.admin_site.each_context(request), "opts": modeladmin.model._meta, **stored["context"]}
    response = TemplateResponse(request, stored["template"], context)
    add_never_cache_headers(response)
    response["Cache-Control"] = "no-store"
    return response


def reveal_url(modeladmin: Any) -> URLPattern:
    """The URL of ``modeladmin``'s reveal page (before the admin's catch-all)."""
    opts = modeladmin.model._meta

    def view(request: HttpRequest, token: str) -> HttpResponse:
        return reveal_view(modeladmin, request, token)

    name = f"{opts.app_label}_{opts.model_name}_reveal"
    site: admin.AdminSite = modeladmin.admin_site
    return path("reveal/<str:token>/", site.admin_view(view), name=name)


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


# ---- money lists (payments, withdrawals): columns labelled in pt-BR, totals, streamed CSV, detail actions


import csv  # noqa: E402
from collections.abc import Iterator  # noqa: E402

from django.contrib.admin.options import IncorrectLookupParameters  # noqa: E402
from django.contrib.admin.utils import display_for_field as admin_display_for_field  # noqa: E402
from django.contrib.admin.utils import quote, unquote  # noqa: E402
from django.core.exceptions import PermissionDenied  # noqa: E402
from django.db.models import Count, Sum  # noqa: E402
from django.http import Http404, StreamingHttpResponse  # noqa: E402
from django.utils import dateformat, timezone  # noqa: E402
from django.utils.formats import get_format  # noqa: E402


def labelled(field: str, description: str) -> Callable[[Any, Any], Any]:
    """A list or detail column showing ``field`` as Django shows it (choice
    label, localised date, related record) under a pt-BR ``description``.

    For fields the API serializes: their model ``verbose_name`` and
    ``help_text`` become the OpenAPI schema's title and description, so the
    back office names them here instead of on the model."""

    @admin.display(description=description, ordering=field)
    def column(modeladmin: Any, record: Any) -> Any:
        model_field = record._meta.get_field(field)
        return admin_display_for_field(getattr(record, field), model_field, modeladmin.get_empty_value_display())

    column.__name__ = f"{field}_label"
    return column


class ListTotalsMixin:
    """The changelist shows, above the results, how many records the current
    filters and search select and the sum of each ``list_totals`` field
    (centavos, shown in reais): one aggregate query over the changelist's
    own filtered queryset, so the totals always follow what is listed."""

    list_totals: tuple[tuple[str, str], ...] = ()

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        response = super().changelist_view(request, extra_context)  # type: ignore[misc]
        context = getattr(response, "context_data", None)
        changelist = context.get("cl") if context else None
        if changelist is not None and self.list_totals:
            sums = changelist.queryset.order_by().aggregate(
                selected=Count("pk"), **{f"sum_{field}": Sum(field) for field, _ in self.list_totals}
            )
            count = sums["selected"]
            context["list_totals"] = {
                "count": count,
                "noun": changelist.opts.verbose_name if count == 1 else changelist.opts.verbose_name_plural,
                "sums": [(label, brl(sums[f"sum_{field}"] or 0)) for field, label in self.list_totals],
            }
        return response


class _Echo:
    """csv.writer's file: hands each written line back instead of keeping it."""

    def write(self, value: str) -> str:
        return value


@dataclass(frozen=True)
class CsvColumn:
    header: str
    value: Callable[[Any], Any]


def csv_text(value: Any) -> str:
    """Text a spreadsheet will not run: a cell starting with = + - @ (or a
    tab/CR) is a formula to Excel, and names, keys and metadata come from
    the API's clients."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def csv_field(field: str, header: str) -> CsvColumn:
    return CsvColumn(header, lambda record: csv_text(getattr(record, field)))


def csv_choice(field: str, header: str) -> CsvColumn:
    return CsvColumn(header, lambda record: getattr(record, f"get_{field}_display")())


def csv_money(field: str, header: str) -> list[CsvColumn]:
    """Two columns: the stored centavos (exact, for systems) and reais as a
    pt-BR spreadsheet reads a number (``1234,56``)."""

    def reais(record: Any) -> str:
        value = getattr(record, field)
        return "" if value is None else brl(value).replace("R$ ", "").replace(".", "")

    return [
        CsvColumn(f"{header} (centavos)", lambda record: getattr(record, field)),
        CsvColumn(f"{header} (R$)", reais),
    ]


def csv_datetime(field: str, header: str) -> CsvColumn:
    """``dd/mm/aaaa HH:MM:SS`` in the project's time zone (America/Sao_Paulo),
    the format the back office shows (config/formats/pt_BR)."""
    zone = timezone.get_default_timezone()
    pattern = str(get_format("DATETIME_FORMAT", lang="pt-br"))

    def value(record: Any) -> str:
        moment = getattr(record, field)
        return "" if moment is None else dateformat.format(timezone.localtime(moment, zone), pattern)

    return CsvColumn(header, value)


class CsvExportMixin:
    """``export/`` next to the changelist: the records the staff member is
    looking at (same filters, search and order) as a CSV (``;``-separated,
    UTF-8 with BOM, as pt-BR spreadsheets open it), streamed in chunks from
    a server-side cursor: a million rows never sit in memory. Who may see
    the list may export it."""

    csv_columns: tuple[CsvColumn, ...] = ()
    csv_filename = "export"
    csv_chunk_size = 2000

    #: Set by ModelAdmin.
    model: type[Any]
    admin_site: admin.AdminSite

    def get_urls(self) -> list[URLPattern]:
        opts = self.model._meta
        view = self.admin_site.admin_view(self.csv_export_view)
        export = path("export/", view, name=f"{opts.app_label}_{opts.model_name}_export")
        return [export, *super().get_urls()]  # type: ignore[misc]

    def csv_export_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):  # type: ignore[attr-defined]
            raise PermissionDenied
        opts = self.model._meta
        try:
            changelist = self.get_changelist_instance(request)  # type: ignore[attr-defined]
        except IncorrectLookupParameters:
            return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist") + "?e=1")
        records = changelist.queryset.iterator(chunk_size=self.csv_chunk_size)
        columns = self.csv_columns
        writer = csv.writer(_Echo(), delimiter=";")

        def lines() -> Iterator[str]:
            yield "\ufeff" + writer.writerow([column.header for column in columns])
            for record in records:
                yield writer.writerow([column.value(record) for column in columns])

        stamp = timezone.localtime().strftime("%Y%m%d-%H%M%S")
        response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{self.csv_filename}-{stamp}.csv"'
        add_never_cache_headers(response)
        return response


class DetailActionsMixin:
    """Read-only detail pages that act: no Save button (the change
    permission is kept only for the actions), and the list's actions as
    buttons on the record's page, with the same confirmation page and
    permissions. ``detail_actions`` maps an action name to the statuses in
    which its button shows (the action itself still checks)."""

    detail_actions: dict[str, tuple[str, ...]] = {}

    #: Set by ModelAdmin.
    model: type[Any]
    admin_site: admin.AdminSite

    def get_urls(self) -> list[URLPattern]:
        opts = self.model._meta
        view = self.admin_site.admin_view(self.detail_action_view)
        run = path("<path:object_id>/run/", view, name=f"{opts.app_label}_{opts.model_name}_run")
        return [run, *super().get_urls()]  # type: ignore[misc]

    def _available_detail_actions(self, request: HttpRequest, record: Any) -> list[tuple[str, str]]:
        actions = self.get_actions(request)  # type: ignore[attr-defined]
        return [
            (name, str(actions[name][2]))
            for name, statuses in self.detail_actions.items()
            if name in actions and record.status in statuses
        ]

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], add: bool = False, change: bool = False, **kwargs: Any
    ) -> Any:
        record = kwargs.get("obj")
        context.update(show_save=False, show_save_and_continue=False, show_save_and_add_another=False)
        if record is not None:
            context["title"] = f"Ver {self.model._meta.verbose_name}"
            context["detail_actions"] = self._available_detail_actions(request, record)
        return super().render_change_form(request, context, add, change, **kwargs)  # type: ignore[misc]

    def detail_action_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        opts = self.model._meta
        record = self.get_object(request, unquote(object_id))  # type: ignore[attr-defined]
        if record is None:
            raise Http404
        change_url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[quote(record.pk)])
        if request.method != "POST":
            return HttpResponseRedirect(change_url)
        name = request.POST.get("action", "")
        actions = self.get_actions(request)  # type: ignore[attr-defined]
        if name not in self.detail_actions or name not in actions:
            raise PermissionDenied
        queryset = self.get_queryset(request).filter(pk=record.pk)  # type: ignore[attr-defined]
        response: HttpResponse | None = actions[name][0](self, request, queryset)
        return response if response is not None else HttpResponseRedirect(change_url)
