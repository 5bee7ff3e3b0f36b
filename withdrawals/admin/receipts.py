"""The receipt (comprovante) on a withdrawal's back-office page: a download
link once the withdrawal was paid, and the view that serves the PDF to
staff who may view withdrawals (the same PDF as the API's)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from withdrawals.models import Withdrawal
from withdrawals.receipt_pdf import pdf_response
from withdrawals.receipts import RECEIPT_STATUSES, receipt_of

NO_RECEIPT = "Disponível quando o saque for pago."


class ReceiptAdminMixin:
    """Mixed into the withdrawals' ModelAdmin (before ``admin.ModelAdmin``)."""

    #: Set by ModelAdmin.
    admin_site: admin.AdminSite

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.receipt_view)
        receipt = path("<path:object_id>/comprovante.pdf", view, name="withdrawals_withdrawal_receipt")
        return [receipt, *super().get_urls()]  # type: ignore[misc]

    def receipt_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        withdrawal: Withdrawal | None = self.get_object(request, object_id)  # type: ignore[attr-defined]
        if withdrawal is None or withdrawal.status not in RECEIPT_STATUSES:
            raise Http404(NO_RECEIPT)
        if not self.has_view_permission(request, withdrawal):  # type: ignore[attr-defined]
            raise PermissionDenied
        return pdf_response(receipt_of(withdrawal))

    @admin.display(description="Comprovante")
    def receipt_link(self, withdrawal: Withdrawal) -> str:
        if withdrawal.status not in RECEIPT_STATUSES:
            return NO_RECEIPT
        url = reverse("admin:withdrawals_withdrawal_receipt", args=[withdrawal.pk])
        return format_html('<a class="button" href="{}">Baixar comprovante (PDF)</a>', url)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)  # type: ignore[misc]
        if obj is None:
            return fieldsets
        return [*fieldsets, ("Comprovante", {"fields": ("receipt_link",)})]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*super().get_readonly_fields(request, obj), "receipt_link"]  # type: ignore[misc]
