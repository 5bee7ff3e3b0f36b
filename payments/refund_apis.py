"""The refund endpoint of a charge (docs/api/refunds.md): request it, read
it. The refund itself is payments.refunds'."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import (
    IDEMPOTENCY_HEADER,
    VALIDATION_ERROR,
    AccountAPIView,
    business_errors,
    created,
    error_examples,
    not_found,
    ok,
    responses,
    success_envelope,
)
from api.idempotency import IN_FLIGHT, Claim, idempotent
from payments import examples
from payments import exceptions as err
from payments.apis import CHARGE_ID
from payments.models import ChargeRefund, ChargeStatus
from payments.refunds import charge_refund_request
from payments.selectors import charge_get, charge_refund_get
from payments.serializers import RefundCreateSerializer, RefundSerializer


class ChargeRefundApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["transactions"],
        summary="Refund a paid charge",
        description=(
            "Returns the whole charge to the payer (partial refunds are not offered). Checks, in order: "
            "credentials (401), permission `cashin` or `all` (403), account (403), the charge (404, as for "
            "`GET /transactions/{id}`), fields (422: `reason` at most 140 characters; the body may be empty), "
            "the charge's state (409: not paid, a refund in progress, a refund the acquirer already refused), "
            "then 400s: the acquirer cannot refund it, the available balance does not cover its "
            "`liquid_amount`. On 202 the `liquid_amount` is reserved from the balance at once; the acquirer is "
            "asked in the background. The refund ends `refunded` (the charge becomes `refunded` and its "
            "`transaction` event is sent), or `failed` (the reservation is back, the charge stays `paid`); "
            "read it with `GET /transactions/{id}/refund`. `Idempotency-Key` makes retries safe "
            "(per charge)."
        ),
        parameters=[CHARGE_ID, IDEMPOTENCY_HEADER],
        request=RefundCreateSerializer,
        examples=examples.REFUND,
        responses=responses(
            {
                202: created(
                    "RefundRequestedResponse",
                    RefundSerializer(),
                    "Requested: `liquid_amount` is reserved from the balance; the acquirer is asked in the background.",
                    examples.REFUND_REQUESTED,
                )
            },
            (
                400,
                business_errors(
                    "The body is not a JSON object, or a business rule refused the refund.",
                    {
                        "Refund not available": err.REFUND_UNAVAILABLE,
                        "Insufficient balance": err.REFUND_INSUFFICIENT_BALANCE,
                    },
                ),
            ),
            (404, not_found(err.CHARGE_NOT_FOUND)),
            (
                409,
                error_examples(
                    "The charge's state refuses the refund, or a request with this Idempotency-Key is still "
                    "running. Nothing changed.",
                    {
                        "Not paid": err.REFUND_NOT_PAID.format(status=ChargeStatus.PENDING.label.lower()),
                        "Refund in progress": err.REFUND_IN_PROGRESS,
                        "Refused before": err.REFUND_ALREADY_FAILED,
                        "Key in flight": IN_FLIGHT,
                    },
                ),
            ),
            (422, VALIDATION_ERROR),
        ),
    )
    def post(self, request: Request, charge_id: str) -> Response:
        # 404 before a key is claimed; keys are per charge (the body alone
        # does not say which charge a repeat is for).
        charge = charge_get(account=request.user, charge_id=charge_id, fields=["id"])  # type: ignore[arg-type]
        endpoint = f"transactions/{charge.pk}/refund"
        return idempotent(self, request, endpoint, lambda claim: self._refund(request, charge.pk, claim))

    def _refund(self, request: Request, charge_id: Any, claim: Claim) -> Response:
        # No field is required: an empty body asks for the refund as well.
        body = RefundCreateSerializer(data=self.json_body(request) if request.body.strip() else {})
        body.is_valid(raise_exception=True)
        refund = charge_refund_request(
            account=request.user,  # type: ignore[arg-type]
            charge_id=charge_id,
            reason=body.validated_data.get("reason", ""),
            in_transaction=lambda requested: claim.settle(self._requested(requested)),
        )
        return claim.response if claim.response is not None else self._requested(refund)

    @extend_schema(
        tags=["transactions"],
        summary="Read a charge's refund",
        description=(
            "The charge's latest refund, whoever asked for it (this API or staff): `processing`, `refunded`, "
            "`failed` (with the acquirer's `failure_reason`) or `canceled`. 404 when the charge is unknown "
            "or was never refunded through a reservation."
        ),
        parameters=[CHARGE_ID],
        responses=responses(
            {200: success_envelope("RefundResponse", RefundSerializer())},
            (
                404,
                error_examples(
                    "Unknown, malformed or another account's charge; or a charge without a refund.",
                    {"Unknown charge": err.CHARGE_NOT_FOUND, "No refund": err.REFUND_NOT_FOUND},
                ),
            ),
        ),
    )
    def get(self, request: Request, charge_id: str) -> Response:
        refund = charge_refund_get(account=request.user, charge_id=charge_id)  # type: ignore[arg-type]
        return ok(RefundSerializer(refund).data, "Estorno consultado com sucesso.")

    @staticmethod
    def _requested(refund: ChargeRefund) -> Response:
        return ok(RefundSerializer(refund).data, err.REFUND_REQUESTED, status=202)
