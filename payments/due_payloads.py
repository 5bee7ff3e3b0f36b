"""The ``data`` of a ``due_charge`` webhook: a due-date charge as it is
after a change. Its own serializer (as ``payments.payloads`` for
``transaction``): receivers store these bodies, so an API change must not
reach them unnoticed."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from payments.models import Charge, ChargeStatus


class DueChargePayloadSerializer(serializers.Serializer[Charge]):
    id = serializers.UUIDField()
    txid = serializers.CharField()
    status = serializers.ChoiceField(choices=ChargeStatus.choices)
    original_amount = serializers.IntegerField(source="due.original", help_text="Centavos: o valor nominal.")
    due_date = serializers.DateField(source="due.due_date")
    last_payable_date = serializers.DateField(source="due.last_payable_date")
    paid_amount = serializers.IntegerField(source="due.paid_amount", allow_null=True)
    paid_components = serializers.DictField(
        child=serializers.IntegerField(),
        source="due.paid_components",
        help_text="Centavos por componente do valor pago (original, multa, juros, abatimento, desconto).",
    )
    platform_tax = serializers.IntegerField()
    liquid_amount = serializers.IntegerField()
    e2e_id = serializers.CharField(allow_null=True)
    paid_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


def due_charge_payload(charge: Charge) -> dict[str, Any]:
    """The event's ``data`` for the due-date charge as it is now."""
    return dict(DueChargePayloadSerializer(charge).data)


class DueChargeEventSerializer(serializers.Serializer[Any]):
    """The body of a ``due_charge`` webhook, for the API docs."""

    id = serializers.UUIDField(help_text="The event's id: the same on every attempt (`webhook-id`).")
    event_type = serializers.ChoiceField(choices=["due_charge"])
    data = DueChargePayloadSerializer(help_text="The due-date charge as it is after the change.")  # type: ignore[assignment]
