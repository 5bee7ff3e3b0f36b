"""The sandbox's payer for due-date charges (decisions §8): ``POST
/api/sandbox/due-charges/{id}/pay`` pays a cobv held by a sandbox acquirer
on a simulated day (``{"date": "YYYY-MM-DD"}``, default today in Brasília),
at the amount due that day (:func:`payments.due_amounts.amount_due`: the
discount before the due date, fine and interest after it).

As a real payer would: the sandbox acquirer takes the Pix first
(``SandboxAdapter.due_charge_pay``: ATIVA → CONCLUIDA, recorded for
reconciliation), and its word is then applied as its notification would be
(:func:`payments.events.charge_event_apply`, strict), so the ledger credits
what was paid, with the fee on it, and a ``due_charge`` webhook goes out. A
cobv the sandbox withdrew (the charge cancelled or expired here) cannot be
paid: 409.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account
from acquirers import adapters
from acquirers.adapters.sandbox import SandboxAdapter, new_e2e_id
from api.base import (
    INVALID_BODY,
    VALIDATION_ERROR,
    AccountAPIView,
    error_response,
    not_found,
    ok,
    responses,
    success_envelope,
)
from api.schema import uuid_path
from core.exceptions import ConflictError, PixServiceError, ValidationFailed
from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from payments import exceptions as err
from payments.choices import ChargeKind
from payments.due_acquirer import due_paid_news
from payments.due_amounts import amount_due
from payments.due_payloads import DueChargePayloadSerializer, due_charge_payload
from payments.due_payments import BRT, COMPONENTS, day_in_brazil, now_in_brazil
from payments.due_terms import DueTerms
from payments.events import LATE_DETAIL, charge_event_apply
from payments.models import Charge
from payments.selectors import sandbox_charge_get

#: The simulated payment's time of day: noon in Brasília, well inside the day whatever the clock's zone.
PAID_AT = dt.time(12, 0)
NOT_PAYABLE_ON = "A cobrança não pode ser paga nessa data: o último dia de pagamento foi {last:%d/%m/%Y}."
BEFORE_CREATION = "A data não pode ser anterior à criação da cobrança ({created:%d/%m/%Y})."
PAID = "Cobrança paga."
SANDBOX_DOWN = "A adquirente sandbox não respondeu (Redis indisponível): tente de novo."


class SandboxUnavailable(PixServiceError):
    """The sandbox acquirer's state could not be reached (503): nothing changed."""

    status_code = 503
    default_message = SANDBOX_DOWN
    default_code = "sandbox_unavailable"


def sandbox_due_charge_get(*, account: Account, charge_id: Any) -> Charge:
    """A due-date charge the sandbox's payer may pay: the account's, at a
    sandbox acquirer; any other (an immediate charge included) is a 404."""
    charge = sandbox_charge_get(account=account, charge_id=charge_id)
    if charge.kind != ChargeKind.DUE:
        raise err.ChargeNotFound()
    return charge


def sandbox_due_charge_pay(*, charge: Charge, on: dt.date | None = None) -> tuple[Charge, bool]:
    """The payer pays the due-date charge on ``on`` (default today, Brasília)
    at the amount due that day; returns the charge as it is now and whether
    the Pix came late (the charge cancelled here before the withdrawal
    reached the sandbox: a late payment for staff). Paying again changes
    nothing (the sandbox keeps the first Pix)."""
    day = on or now_in_brazil()
    created = day_in_brazil(charge.created_at)
    if day < created:
        raise ValidationFailed({"date": [BEFORE_CREATION.format(created=created)]})
    owed = amount_due(DueTerms.from_api(charge.due.terms), on=day)
    if not owed.payable:
        raise ConflictError(NOT_PAYABLE_ON.format(last=owed.last_payable_day))
    sandbox = adapters.build(charge.acquirer)
    assert isinstance(sandbox, SandboxAdapter)  # sandbox_charge_get hands out sandbox acquirers' charges only
    at = dt.datetime.combine(day, PAID_AT, tzinfo=BRT)
    # componentesValor: the original and each part that applies that day.
    components = {name: getattr(owed, name) for name in COMPONENTS if name == "original" or getattr(owed, name)}
    try:
        paid = sandbox.due_charge_pay(
            charge.txid, e2e_id=new_e2e_id(at=at), amount=owed.final, components=components, at=at
        )
        # The Pix the sandbox kept (this one, or the first when paid already): its word is what we apply.
        status = sandbox.due_charge_status(charge.txid) if paid else None
    except REDIS_UNAVAILABLE as exc:
        raise SandboxUnavailable() from exc
    if status is None:
        raise err.TransitionNotAllowed(err.REMOVED_AT_ACQUIRER)  # withdrawn there: no payer can pay it
    late = False
    for news in due_paid_news(status):
        applied = charge_event_apply(acquirer=None, notification=news, source="sandbox", strict=True)
        late = late or applied.detail == LATE_DETAIL
    charge.refresh_from_db()
    return charge, late


class PaySerializer(serializers.Serializer[Any]):
    date = serializers.DateField(
        required=False, help_text="The simulated payment day (YYYY-MM-DD); default: today, America/Sao_Paulo."
    )


class SandboxDueChargePayApi(AccountAPIView):
    """Pays a due-date charge at a sandbox acquirer on a simulated day (decisions §8)."""

    required_permission = "cashin"

    @extend_schema(
        tags=["sandbox"],
        summary="Sandbox: pay a due-date charge on a given day",
        description=(
            "Only with PIX_SANDBOX on, for due-date charges held by an acquirer using the `sandbox` adapter "
            "(any other charge is a 404, like an unknown id). Credential `cashin` or `all`. The payer pays the "
            "amount due on `date` (default: today, America/Sao_Paulo): the discount before the due date, the fine and "
            "interest after it. The charge's amount becomes what was paid and the balance is credited with it, "
            "less the fee on it. A day after the last payable day, or a charge withdrawn at the sandbox (cancelled "
            "or expired here), is a 409; a day before the charge was created is a 422. Paying again is a 200 that "
            "changes nothing. A payment of a charge cancelled here before the sandbox withdrew it is recorded for "
            "staff (200, the charge stays cancelled)."
        ),
        parameters=[uuid_path("charge_id", "Due-date charge id.")],
        request=PaySerializer,
        responses=responses(
            {200: success_envelope("SandboxDueChargeResponse", DueChargePayloadSerializer())},
            (400, INVALID_BODY),
            (404, not_found(err.CHARGE_NOT_FOUND)),
            (409, error_response("Not payable on that day, or withdrawn at the sandbox.", err.REMOVED_AT_ACQUIRER)),
            (422, VALIDATION_ERROR),
            (503, error_response("The sandbox's state could not be reached.", SANDBOX_DOWN)),
        ),
    )
    def post(self, request: Request, charge_id: str) -> Response:
        charge = sandbox_due_charge_get(account=request.user, charge_id=charge_id)  # type: ignore[arg-type]
        body = PaySerializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        paid, late = sandbox_due_charge_pay(charge=charge, on=body.validated_data.get("date"))
        return ok(due_charge_payload(paid), err.LATE_PAYMENT_RECORDED if late else PAID)
