"""Back office for balances and the ledger: read-only, money in reais."""

from __future__ import annotations

from django.contrib import admin

from accounts.models import AccountBalance, LedgerEntry
from core.admin.records import ReadOnlyAdminMixin
from core.money import brl


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[LedgerEntry]):
    list_display = ("id", "account", "kind", "amount_display", "balance_after_display", "reference", "created_at")
    list_filter = ("kind", "created_at")
    search_fields = ("account__name", "=account__document", "reference")
    list_select_related = ("account",)
    date_hierarchy = "created_at"
    # The detail page too shows money as R$ (the stored centavos never).
    fields = ("account", "kind", "amount_display", "balance_after_display", "reference", "created_at")
    readonly_fields = fields

    @admin.display(description="valor", ordering="amount")
    def amount_display(self, entry: LedgerEntry) -> str:
        return brl(entry.amount)

    @admin.display(description="saldo após", ordering="balance_after")
    def balance_after_display(self, entry: LedgerEntry) -> str:
        return brl(entry.balance_after)


@admin.register(AccountBalance)
class AccountBalanceAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[AccountBalance]):
    list_display = ("account", "available_display", "updated_at")
    list_filter = ("updated_at",)
    search_fields = ("account__name", "account__document")
    list_select_related = ("account",)
    ordering = ("account__name",)
    fields = ("account", "available_display", "updated_at")
    readonly_fields = fields

    @admin.display(description="disponível", ordering="available")
    def available_display(self, balance: AccountBalance) -> str:
        return brl(balance.available)
