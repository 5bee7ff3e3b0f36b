"""A withdrawal's history on its page: every call to an acquirer (with the
answers that came late) and every status change."""

from __future__ import annotations

from django.contrib import admin

from core.admin.records import ReadOnlyInlineMixin
from withdrawals.models import PayoutAttempt, Withdrawal, WithdrawalTransition


class PayoutAttemptInline(ReadOnlyInlineMixin, admin.TabularInline[PayoutAttempt, Withdrawal]):
    model = PayoutAttempt
    fields = (
        "created_at",
        "acquirer",
        "action",
        "outcome",
        "error_class",
        "error_message",
        "latency_ms",
        "released",
        "late_outcome",
        "late_detail",
        "late_at",
    )
    readonly_fields = fields


class WithdrawalTransitionInline(ReadOnlyInlineMixin, admin.TabularInline[WithdrawalTransition, Withdrawal]):
    model = WithdrawalTransition
    fields = ("created_at", "from_status", "to_status", "source", "actor")
    readonly_fields = fields
