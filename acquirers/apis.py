"""Acquirer selection: the account API over the account's cash-in acquirers.
The acquirers' own callbacks are in :mod:`acquirers.callbacks`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account
from accounts.permissions import AcquirerSelectionEnabled
from acquirers import examples, selectors, services
from acquirers import exceptions as err
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.serializers import AcquirerListSerializer, AcquirerSelectionSerializer, ActiveAcquirersDataSerializer
from api.base import (
    INVALID_BODY,
    VALIDATION_ERROR,
    AccountAPIView,
    ok,
    responses,
    success_envelope,
)
from core.exceptions import ValidationFailed


class AcquirerSelectionApi(AccountAPIView):
    """The account's cash-in acquirers. Needs the acquirer selection feature."""

    required_permission = "cashin"
    permission_classes = [*AccountAPIView.permission_classes, AcquirerSelectionEnabled]  # type: ignore[misc]
    validation_message = err.ACQUIRER_RULES_MESSAGE

    @extend_schema(
        tags=["acquirers"],
        summary="List acquirers available for selection",
        responses=responses({200: success_envelope("AcquirerListResponse", AcquirerListSerializer())}),
    )
    def get(self, request: Request) -> Response:
        account: Account = request.user  # type: ignore[assignment]
        current = selectors.slots(account, AcquirerSlot.Purpose.CASHIN)
        active = {a.pk: p for p, a in current.items()}
        entries = [
            {
                "nominal": a.nominal,
                "acquirer_key": a.key,
                "acquirer_name": a.name,
                "max_ticket": a.max_ticket,
                # Staff's value, else the measured one, else 0 (Acquirer.conversion_percent).
                "conversion_percent": float(a.conversion_percent),
                "is_new": a.is_new,
                "active_priority": active.get(a.pk),
            }
            for a in selectors.available_acquirers(account)
        ]
        data = {"acquirers": entries, "active_acquirers": selectors.active_snapshot(account, current)}
        return ok(data, "Adquirentes listadas com sucesso.")

    @extend_schema(
        tags=["acquirers"],
        summary="Set the account's default acquirers",
        description=(
            "Array form `{acquirers: [{acquirer_key, priority}]}` replaces every slot (priorities not sent "
            "are cleared). Single form `{acquirer_key, priority=1}` sets that slot only; the other slots "
            "keep their acquirers, and the acquirer leaves any other slot it held. Unavailable acquirers are "
            "refused (422, strict)."
        ),
        request=AcquirerSelectionSerializer,
        examples=examples.ACQUIRER_SELECTION,
        responses=responses(
            {200: success_envelope("ActiveAcquirersResponse", ActiveAcquirersDataSerializer())},
            (400, INVALID_BODY),
            (422, VALIDATION_ERROR),
        ),
    )
    def put(self, request: Request) -> Response:
        account: Account = request.user  # type: ignore[assignment]
        body = AcquirerSelectionSerializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if "acquirers" in data and "acquirer_key" in data:
            raise err.AcquirerRuleViolation(err.BOTH_OVERRIDE_FORMS)
        if "acquirers" not in data and "acquirer_key" not in data:
            raise ValidationFailed({"acquirers": ["Este campo é obrigatório."]}, message=err.ACQUIRER_RULES_MESSAGE)

        items = data.get("acquirers") or [{"acquirer_key": data["acquirer_key"], "priority": data.get("priority", 1)}]
        by_key = self._selectable(account, items)
        if "acquirers" in data:
            services.account_active_acquirers_replace(
                account=account, slots={item["priority"]: by_key[item["acquirer_key"]] for item in items}
            )
        else:
            services.account_active_acquirer_put(
                account=account, priority=items[0]["priority"], acquirer=by_key[items[0]["acquirer_key"]]
            )
        return ok({"active_acquirers": selectors.active_snapshot(account)}, "Adquirentes atualizadas com sucesso.")

    @staticmethod
    def _selectable(account: Account, items: list[dict[str, Any]]) -> dict[str, Acquirer]:
        keys = [item["acquirer_key"] for item in items]
        err.reject_repeats(priorities=[item["priority"] for item in items], keys=keys)
        by_key = {a.key: a for a in selectors.selectable_acquirers(account).filter(key__in=keys)}
        if len(by_key) != len(keys):
            raise err.AcquirerRuleViolation(err.ACQUIRER_UNAVAILABLE)
        return by_key
