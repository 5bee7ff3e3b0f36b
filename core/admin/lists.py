"""Back-office lists of money records (charges, withdrawals): columns
labelled in pt-BR, totals of what the filters select, a streamed CSV export
of the same list, and the list's actions as buttons on a record's page."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import display_for_field as admin_display_for_field
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Sum
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.urls import URLPattern, path, reverse
from django.utils import dateformat, timezone
from django.utils.cache import add_never_cache_headers
from django.utils.formats import get_format
from django.utils.html import format_html
from django.utils.text import capfirst

from core.connections import read_snapshot
from core.exports import ExportStream, FormattedNumber, csv_lines, spool
from core.money import brl


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


@admin.display(description="ID", ordering="pk")
def short_id(modeladmin: Any, record: Any) -> str:
    """The first 8 characters of a UUID key (the whole one on hover, on the
    record's page and in the CSV): lists stay one line per record."""
    return format_html('<span title="{}">{}…</span>', record.pk, str(record.pk)[:8])


def titled(list_filter: type[admin.FieldListFilter], title: str) -> type[admin.FieldListFilter]:
    """``list_filter`` under a pt-BR title, for fields the API serializes
    (their verbose name stays the model's default, see :func:`labelled`)."""

    class Titled(list_filter):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.title = title

    return Titled


class ListTotalsMixin:
    """The changelist shows, above the results, how many records the current
    filters and search select and the sum of each ``list_totals`` field
    (centavos, shown in reais): one aggregate query over the changelist's
    own filtered queryset, so the totals always follow what is listed."""

    #: Shows the totals, and the export and queue links of the mixins beside it.
    change_list_template: ClassVar[Any] = "admin/money_records/change_list.html"

    list_totals: tuple[tuple[str, str], ...] = ()

    #: Set by ModelAdmin.
    model: type[Any]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        # "Cobranças", not Django's "Selecione cobrança para modificar": nothing here is modified by hand.
        extra_context = {"title": capfirst(self.model._meta.verbose_name_plural), **(extra_context or {})}
        response = super().changelist_view(request, extra_context)  # type: ignore[misc]
        context: dict[str, Any] = getattr(response, "context_data", None) or {}
        changelist = context.get("cl")
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


@dataclass(frozen=True)
class CsvColumn:
    header: str
    value: Callable[[Any], Any]


def csv_field(field: str, header: str) -> CsvColumn:
    """The field's value; text (names, keys, reasons) is neutralised where it
    is written (:func:`core.exports.csv_cell`), numbers stay numbers."""
    return CsvColumn(header, lambda record: getattr(record, field))


def csv_choice(field: str, header: str) -> CsvColumn:
    return CsvColumn(header, lambda record: getattr(record, f"get_{field}_display")())


def csv_money(field: str, header: str) -> list[CsvColumn]:
    """Two columns: the stored centavos (exact, for systems) and reais as a
    pt-BR spreadsheet reads a number (``1234,56``)."""

    def reais(record: Any) -> str:
        value = getattr(record, field)
        return "" if value is None else FormattedNumber(brl(value).replace("R$ ", "").replace(".", ""))

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
    UTF-8 with BOM, as pt-BR spreadsheets open it), read as one snapshot
    into a spooled file and then streamed with no database connection held
    (:func:`csv_download`): a million rows never sit in memory, and a
    download that stalls holds no connection. Who may see the list may
    export it."""

    csv_columns: tuple[CsvColumn, ...] = ()
    csv_filename = "export"
    #: Rows per fetch of the server-side cursor the list is read with.
    csv_chunk_size = 2000

    #: Set by ModelAdmin.
    model: type[Any]
    admin_site: admin.AdminSite

    def get_urls(self) -> list[URLPattern]:
        opts = self.model._meta
        view = self.admin_site.admin_view(self.csv_export_view)
        export = path("export/", view, name=f"{opts.app_label}_{opts.model_name}_export")
        return [export, *super().get_urls()]  # type: ignore[misc]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        """Gives the list's template ``csv_export_url``: the export of what it shows."""
        opts = self.model._meta
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_export")
        query = request.GET.urlencode()
        extra_context = {**(extra_context or {}), "csv_export_url": f"{url}?{query}" if query else url}
        return super().changelist_view(request, extra_context)  # type: ignore[misc]

    def csv_export_view(self, request: HttpRequest) -> HttpResponseBase:
        if not self.has_view_permission(request):  # type: ignore[attr-defined]
            raise PermissionDenied
        opts = self.model._meta
        try:
            changelist = self.get_changelist_instance(request)  # type: ignore[attr-defined]
        except IncorrectLookupParameters:
            return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist") + "?e=1")
        # The changelist's own order (the staff member's sort, the pk last),
        # in one statement: a server-side cursor, fetched while it is spooled.
        records = changelist.queryset.iterator(chunk_size=self.csv_chunk_size)
        stamp = timezone.localtime().strftime("%Y%m%d-%H%M%S")
        return csv_download(request, self.csv_columns, records, filename=f"{self.csv_filename}-{stamp}.csv")


def csv_download(
    request: HttpRequest, columns: Sequence[CsvColumn], records: Iterable[Any], *, filename: str
) -> StreamingHttpResponse:
    """A back-office CSV file of ``records``, one row each, as the staff's
    spreadsheets open it (with the BOM), never cached.

    The records are read whole before the first byte is sent, in one
    read-only REPEATABLE READ transaction (:func:`core.connections.read_snapshot`),
    into a spooled file (:func:`core.exports.spool`: memory up to a bound,
    disk past it): the file is the list as it stood at one instant, every
    row once in the list's order, whatever changes while it is read or
    downloaded. Read in batches between the writes, a row whose sort column
    changed mid-export (a charge paid, a status moved) was skipped or
    written twice. No client is waiting while it is read; then the
    connection is given back and the file streamed as the API's exports are
    (:class:`core.exports.ExportStream`: no connection held while writing,
    the send timeout)."""
    rows = ([column.value(record) for column in columns] for record in records)
    with read_snapshot():
        file = spool(csv_lines([column.header for column in columns], rows, bom=True))
    stream = ExportStream.of_file(file, sock=request.META.get("gunicorn.socket"))
    response = StreamingHttpResponse(stream, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    add_never_cache_headers(response)
    return response


class DetailActionsMixin:
    """Read-only detail pages that act: no Save button (the change
    permission is kept only for the actions), and the list's actions as
    buttons on the record's page, with the same confirmation page and
    permissions. ``detail_actions`` maps an action name to the statuses in
    which its button shows (the action itself still checks)."""

    change_form_template: ClassVar[Any] = "admin/money_records/change_form.html"

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
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        context.update(show_save=False, show_save_and_continue=False, show_save_and_add_another=False)
        if obj is not None:
            context["title"] = f"Ver {self.model._meta.verbose_name}"
            context["detail_actions"] = self._available_detail_actions(request, obj)
        response: HttpResponse = super().render_change_form(  # type: ignore[misc]
            request, context, add, change, form_url, obj
        )
        return response

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
