"""Batches of due-date charges in the back office: each batch's progress
(its items counted by status, in the list's one query) and its items, paged,
with their errors and a link to the charge each created. Read-only: a batch
is created through the API and processed by its workers."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from core.admin.records import ReadOnlyAdminMixin, UUIDSearchMixin
from due_charges.models import DueChargeBatch, DueChargeBatchItem, ItemStatus

ITEMS = "admin:due_charges_duechargebatchitem_changelist"


def items_url(batch: DueChargeBatch, status: str | None = None) -> str:
    params = {"batch__id__exact": str(batch.pk), **({"status__exact": status} if status else {})}
    return f"{reverse(ITEMS)}?{urlencode(params)}"


@admin.register(DueChargeBatch)
class DueChargeBatchAdmin(ReadOnlyAdminMixin, UUIDSearchMixin, admin.ModelAdmin[DueChargeBatch]):
    """The counts come from one aggregate per list (annotated), never one per row."""

    list_display = ("batch_id", "created_at", "account", "status", "total", "progress", "finished_at")
    list_filter = ("status", ("created_at", admin.DateFieldListFilter))
    list_select_related = ("account",)
    search_fields = ("account__name", "description")
    search_help_text = "Nome da conta, descrição do lote, ou o ID do lote."
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")
    fieldsets = (
        (None, {"fields": ("id", "account", "status", "description", "created_at", "finished_at")}),
        ("Progresso", {"fields": ("total", "progress", "items_links")}),
        ("Adquirente", {"fields": ("lote_acquirer", "lote_id", "postback_url")}),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return flatten_fieldsets(self.fieldsets or ())

    def get_queryset(self, request: HttpRequest) -> QuerySet[DueChargeBatch]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                n_pending=Count("items", filter=Q(items__status=ItemStatus.PENDING)),
                n_created=Count("items", filter=Q(items__status=ItemStatus.CREATED)),
                n_failed=Count("items", filter=Q(items__status=ItemStatus.FAILED)),
            )
        )

    @admin.display(description="lote", ordering="pk")
    def batch_id(self, batch: DueChargeBatch) -> str:
        return format_html('<span title="{}">{}…</span>', batch.pk, str(batch.pk)[:8])

    @admin.display(description="progresso")
    def progress(self, batch: Any) -> str:
        done = batch.n_created + batch.n_failed
        percent = done * 100 // batch.total if batch.total else 100
        return format_html(
            "{}% · {} criadas · {} com erro · {} pendentes", percent, batch.n_created, batch.n_failed, batch.n_pending
        )

    @admin.display(description="itens")
    def items_links(self, batch: Any) -> str:
        links = [
            (items_url(batch), f"Todos os itens ({batch.total})"),
            (items_url(batch, ItemStatus.FAILED), f"Com erro ({batch.n_failed})"),
            (items_url(batch, ItemStatus.PENDING), f"Pendentes ({batch.n_pending})"),
            (items_url(batch, ItemStatus.CREATED), f"Criadas ({batch.n_created})"),
        ]
        return format_html_join(" · ", '<a href="{}">{}</a>', links)


@admin.register(DueChargeBatchItem)
class DueChargeBatchItemAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[DueChargeBatchItem]):
    """A batch's items, 100 a page, opened from the batch's page."""

    list_display = ("position", "batch_link", "status", "errors_display", "charge_link", "attempts", "updated_at")
    list_filter = ("status", "batch")
    list_select_related = ("batch",)
    search_fields = ("=charge_id",)
    search_help_text = "ID da cobrança criada pelo item."
    ordering = ("batch", "position")
    list_per_page = 100
    fields = ("batch_link", "position", "status", "errors_display", "charge_link", "attempts", "request", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return list(self.fields or ())

    @admin.display(description="lote", ordering="batch_id")
    def batch_link(self, item: DueChargeBatchItem) -> str:
        url = reverse("admin:due_charges_duechargebatch_change", args=[item.batch_id])
        return format_html('<a href="{}">{}…</a>', url, str(item.batch_id)[:8])

    @admin.display(description="cobrança")
    def charge_link(self, item: DueChargeBatchItem) -> str:
        # The id is allocated with the item; the charge exists only once created.
        if item.status != ItemStatus.CREATED:
            return "—"
        url = reverse("admin:payments_charge_change", args=[item.charge_id])
        return format_html('<a href="{}" title="{}">{}…</a>', url, item.charge_id, str(item.charge_id)[:8])

    @admin.display(description="erros")
    def errors_display(self, item: DueChargeBatchItem) -> str:
        errors = item.errors or {}
        if not errors:
            return "—"
        rows = [
            (field, "; ".join(messages) if isinstance(messages, list) else str(messages))
            for field, messages in errors.items()
        ]
        return format_html_join("", "<div><code>{}</code>: {}</div>", rows)
