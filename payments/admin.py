"""Back office for charges: find them, see every acquirer attempt and status
change, and act on them through the same transition service acquirers use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from payments.exceptions import TransitionNotAllowed
from payments.models import Charge, ChargeAttempt, ChargeStatus, ChargeTransition
from payments.services import charge_transition
from pix_service.admin import ReadOnlyInlineMixin, UUIDSearchMixin, transition_action


class ChargeAttemptInline(ReadOnlyInlineMixin, admin.TabularInline[ChargeAttempt, Charge]):
    model = ChargeAttempt
    fields = ("position", "acquirer", "outcome", "error_class", "error_message", "latency_ms", "created_at")
    readonly_fields = fields
    ordering = ("position",)


class ChargeTransitionInline(ReadOnlyInlineMixin, admin.TabularInline[ChargeTransition, Charge]):
    model = ChargeTransition
    fields = ("created_at", "from_status", "to_status", "source", "actor")
    readonly_fields = fields


def _transition_action(
    name: str, description: str, to_status: str, from_statuses: tuple[str, ...]
) -> Callable[[Any, HttpRequest, QuerySet[Any]], None]:
    def apply(pk: Any, request: HttpRequest) -> bool:
        return charge_transition(
            charge_id=pk, to_status=to_status, source=ChargeTransition.Source.STAFF, actor=request.user.get_username()
        )

    return transition_action(
        name=name,
        description=description,
        to_status=to_status,
        from_statuses=from_statuses,
        apply=apply,
        refused=TransitionNotAllowed,
        done_message="{description}: {count} cobrança(s).",
        skipped_message="{count} cobrança(s) ignorada(s): o status atual não permite.",
    )


@admin.register(Charge)
class ChargeAdmin(UUIDSearchMixin, admin.ModelAdmin[Charge]):
    list_display = ("id", "account", "amount", "liquid_amount", "status", "acquirer", "created_at", "paid_at")
    list_filter = ("status", "acquirer", ("created_at", admin.DateFieldListFilter), "account")
    list_select_related = ("account", "acquirer")
    search_fields = ("=txid", "=e2e_id", "=buyer_document", "=provider_charge_id")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    inlines = [ChargeAttemptInline, ChargeTransitionInline]
    actions = [
        _transition_action("cancel", "Cancelar", ChargeStatus.CANCELED, (ChargeStatus.PENDING,)),
        _transition_action("refund", "Estornar", ChargeStatus.REFUNDED, (ChargeStatus.PAID, ChargeStatus.CHARGEBACK)),
        _transition_action(
            "mark_chargeback", "Marcar contestação (MED)", ChargeStatus.CHARGEBACK, (ChargeStatus.PAID,)
        ),
        _transition_action(
            "resolve_chargeback", "Resolver contestação a favor da conta", ChargeStatus.PAID, (ChargeStatus.CHARGEBACK,)
        ),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Charge | None = None) -> list[str]:
        # Nothing on a charge is edited by hand: status moves only through the actions.
        return [field.name for field in Charge._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Charge | None = None) -> bool:
        return False
