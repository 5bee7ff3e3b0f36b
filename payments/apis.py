"""Charge endpoints: create, list, read, QR code, and the sandbox drivers."""

from __future__ import annotations

import io
from typing import Any

import segno
from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account
from acquirers.adapters.base import Notification, NotificationEvent
from acquirers.adapters.sandbox import new_e2e_id
from api import examples
from api.base import (
    IDEMPOTENCY_HEADER,
    IDEMPOTENCY_RESPONSES,
    LISTING_PARAMETERS,
    VALIDATION_ERROR,
    AccountAPIView,
    ListingMixin,
    business_errors,
    created,
    error_examples,
    error_response,
    event_callbacks,
    listing_schema,
    not_found,
    ok,
    responses,
    success_envelope,
)
from api.idempotency import IN_FLIGHT, Claim, idempotent
from api.schema import uuid_path
from core.exceptions import ValidationFailed
from payments import exceptions as err
from payments.events import charge_event_apply
from payments.models import Charge, ChargeRefund, ChargeStatus
from payments.payloads import TransactionEventSerializer
from payments.refunds import charge_refund_request
from payments.selectors import ChargeFilterSet, charge_get, charge_refund_get, charges_of, sandbox_charge_get
from payments.serializers import (
    ChargeCreatedSerializer,
    ChargeCreateSerializer,
    ChargeSerializer,
    RefundCreateSerializer,
    RefundSerializer,
)
from payments.services import Buyer, OverrideItem, charge_create

BUYER_ADDRESS_FIELDS = (
    "buyer_city",
    "buyer_state",
    "buyer_zipcode",
    "buyer_neighborhood",
    "buyer_number",
    "buyer_complement",
)


def override_items(data: dict[str, Any]) -> list[OverrideItem] | None:
    """The two override forms of decisions §4, mutually exclusive."""
    if "acquirers" in data and "acquirer_key" in data:
        raise err.AcquirerRuleViolation(err.BOTH_OVERRIDE_FORMS)
    if "acquirer_key" in data:
        return [OverrideItem(acquirer_key=data["acquirer_key"], priority=1)]
    if "acquirers" in data:
        return [OverrideItem(acquirer_key=i["acquirer_key"], priority=i["priority"]) for i in data["acquirers"]]
    return None


CHARGE_ID = uuid_path("charge_id", "Transaction id.")


@listing_schema(
    tags=["transactions"],
    summary="List charges",
    operation_id="transactions_list",
    parameters=[*LISTING_PARAMETERS, OpenApiParameter("status", str, enum=list(ChargeStatus.values))],
)
class ChargesApi(ListingMixin, AccountAPIView):
    required_permission = "cashin"
    internal_error_messages = {"POST": err.CREATE_INTERNAL_ERROR}
    filterset_class = ChargeFilterSet
    item_serializer = ChargeSerializer
    collection = "transactions"
    listed_message = "Transações listadas com sucesso."
    schema_name = "ChargeListResponse"

    def listing_queryset(self, request: Request, **kwargs: Any) -> QuerySet[Charge]:
        return charges_of(request.user)  # type: ignore[arg-type]

    @extend_schema(
        tags=["transactions"],
        summary="Create a PIX charge",
        description=(
            "Checks, in order: credentials (401), permission (403), account approved and not blocked (403), "
            "fields (422), payment method enabled (400), amount ≤ 300000 (400), net of fees ≥ 10 (400), "
            "then the acquirer chain (400 when every acquirer fails). Override with `acquirers` "
            "(1-3 items, `priority` required) or a single `acquirer_key`, not both."
        ),
        parameters=[IDEMPOTENCY_HEADER],
        request=ChargeCreateSerializer,
        examples=examples.CHARGE,
        callbacks=event_callbacks("transaction", TransactionEventSerializer, postback=True),
        responses=responses(
            {
                201: created(
                    "ChargeCreatedResponse",
                    ChargeCreatedSerializer(),
                    "Created: `data.pix.emv` is the code the payer pastes (or scans as a QR code).",
                    examples.CHARGE_CREATED,
                )
            },
            (
                400,
                business_errors(
                    "The body is not a JSON object, or a business rule refused the charge.",
                    {
                        "Method not enabled": err.METHOD_NOT_ENABLED,
                        "Amount above the maximum": err.AMOUNT_ABOVE_MAX,
                        "Net of fees below the minimum": err.NET_BELOW_MIN,
                        "Every acquirer failed": err.ALL_ACQUIRERS_FAILED,
                    },
                ),
            ),
            (422, VALIDATION_ERROR),
            *IDEMPOTENCY_RESPONSES,
        ),
    )
    def post(self, request: Request) -> Response:
        return idempotent(self, request, "transactions", lambda claim: self._create(request, claim))

    def _create(self, request: Request, claim: Claim) -> Response:
        account: Account = request.user  # type: ignore[assignment]
        body = ChargeCreateSerializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        data = body.validated_data
        buyer = data["buyer"]
        charge = charge_create(
            account=account,
            amount=data["amount"],
            payment_method=data["payment_method"],
            buyer=Buyer(
                name=buyer["buyer_name"],
                document=buyer["buyer_document"],
                phone=buyer["buyer_phone"],
                address={k: buyer[k] for k in BUYER_ADDRESS_FIELDS if buyer.get(k)},
            ),
            override=override_items(data),
            postback_url=data.get("postback_url", ""),
            metadata=data.get("metadata"),
            # Without a key nothing commits with the charge: its insert needs no transaction.
            in_transaction=(lambda created: claim.settle(self._created(created)))
            if claim.record_id is not None
            else None,
        )
        return claim.response if claim.response is not None else self._created(charge)

    @staticmethod
    def _created(charge: Charge) -> Response:
        return ok(ChargeCreatedSerializer(charge).data, "Transação criada com sucesso.", status=201)


class ChargeDetailApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["transactions"],
        summary="Read a charge",
        parameters=[CHARGE_ID],
        responses=responses(
            {200: success_envelope("ChargeResponse", ChargeSerializer())}, (404, not_found(err.CHARGE_NOT_FOUND))
        ),
    )
    def get(self, request: Request, charge_id: str) -> Response:
        charge = charge_get(account=request.user, charge_id=charge_id, fields=ChargeSerializer.Meta.fields)  # type: ignore[arg-type]
        return ok(ChargeSerializer(charge).data, "Transação consultada com sucesso.")


class ChargeQrCodeApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["transactions"],
        summary="QR code image of a charge",
        parameters=[CHARGE_ID, OpenApiParameter("format", str, enum=["png", "svg"], description="Default png.")],
        responses=responses(
            {
                (200, "image/png"): OpenApiResponse(OpenApiTypes.BINARY, description="PNG image of the BR Code."),
                (200, "image/svg+xml"): OpenApiResponse(OpenApiTypes.STR, description="SVG image of the BR Code."),
            },
            (404, not_found(err.CHARGE_NOT_FOUND)),
            (422, VALIDATION_ERROR),
        ),
    )
    def get(self, request: Request, charge_id: str) -> HttpResponse:
        image_format = request.query_params.get("format", "png")
        if image_format not in ("png", "svg"):
            raise ValidationFailed({"format": ["Use png ou svg."]})
        charge = charge_get(account=request.user, charge_id=charge_id)  # type: ignore[arg-type]
        buffer = io.BytesIO()
        segno.make(charge.emv, error="m").save(buffer, kind=image_format, scale=8, border=4)
        content_type = "image/png" if image_format == "png" else "image/svg+xml"
        response = HttpResponse(buffer.getvalue(), content_type=content_type)
        response["Cache-Control"] = "private, max-age=300"
        return response


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
            "read it with `GET /transactions/{id}` (`refund`). `Idempotency-Key` makes retries safe "
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


SANDBOX_EVENTS = {
    "pay": NotificationEvent.CHARGE_PAID,
    "fail": NotificationEvent.CHARGE_FAILED,
    "refund": NotificationEvent.CHARGE_REFUNDED,
    "chargeback": NotificationEvent.CHARGE_CHARGEBACK,
}


class SandboxChargeApi(AccountAPIView):
    """Drives a charge as an acquirer's notification would (decisions §8);
    only charges at sandbox acquirers, with a credential that may see charges."""

    required_permission = "cashin"

    @extend_schema(
        tags=["sandbox"],
        summary="Sandbox: pay, fail, refund or charge back a charge",
        description=(
            "Only with PIX_SANDBOX on. Drives the same code path as an acquirer's notification, for charges "
            "held by an acquirer using the `sandbox` adapter (any other charge is a 404, like an unknown id). "
            "Credential `cashin` or `all`. A change the charge's status does not allow is a 409; repeating "
            "the change that put it in its status is a 200 that changes nothing."
        ),
        parameters=[CHARGE_ID, OpenApiParameter("action", str, OpenApiParameter.PATH, enum=list(SANDBOX_EVENTS))],
        request=None,
        responses=responses(
            {200: success_envelope("SandboxChargeResponse", ChargeSerializer())},
            (404, not_found(err.CHARGE_NOT_FOUND)),
            (
                409,
                error_response(
                    "The charge's status does not allow this change.",
                    "A transação não pode passar de Falhou para Paga.",
                ),
            ),
        ),
    )
    def post(self, request: Request, charge_id: str, action: str) -> Response:
        charge = sandbox_charge_get(account=request.user, charge_id=charge_id)  # type: ignore[arg-type]
        notification = Notification(
            event=SANDBOX_EVENTS[action],
            reference=charge.txid,
            e2e_id=new_e2e_id() if action == "pay" else None,
        )
        charge_event_apply(acquirer=None, notification=notification, source="sandbox", strict=True)
        charge.refresh_from_db()
        return ok(ChargeSerializer(charge).data, "Transação atualizada.")
