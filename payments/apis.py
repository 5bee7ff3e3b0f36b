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
from api.base import (
    IDEMPOTENCY_HEADER,
    IDEMPOTENCY_RESPONSES,
    LISTING_PARAMETERS,
    VALIDATION_ERROR,
    AccountAPIView,
    ListingMixin,
    business_errors,
    created,
    error_response,
    event_callbacks,
    listing_schema,
    not_found,
    ok,
    responses,
    success_envelope,
)
from api.exports import PERIOD, CsvExportApi, csv_export_schema, without
from api.idempotency import Claim, idempotent
from api.listing_statements import Scope
from api.schema import uuid_path
from core.exceptions import ValidationFailed
from payments import examples
from payments import exceptions as err
from payments.models import Charge, ChargeStatus
from payments.payloads import TransactionEventSerializer
from payments.sandbox import SANDBOX_EVENTS, sandbox_charge_drive
from payments.selectors import ChargeFilterSet, charge_get, charges_of, charges_scope, sandbox_charge_get
from payments.serializers import (
    CHARGE_READ_COLUMNS,
    ChargeCreatedSerializer,
    ChargeCreateSerializer,
    ChargeReadSerializer,
    ChargeSerializer,
)
from payments.services import Buyer, charge_create, override_items

BUYER_ADDRESS_FIELDS = (
    "buyer_city",
    "buyer_state",
    "buyer_zipcode",
    "buyer_neighborhood",
    "buyer_number",
    "buyer_complement",
)


#: The 400s of a charge's creation, immediate or with a due date (due_charges.apis).
CHARGE_REFUSALS = (
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
)


# Swagger UI cannot fill a record's id in advance: the description says where one comes from.
CHARGE_ID = uuid_path(
    "charge_id",
    "Transaction id: the `id` that `POST /api/transactions` answers, or one listed by `GET /api/transactions` "
    "(the demo of `make run` lists its paid sandbox charge there).",
)


CHARGE_FILTERS = [*LISTING_PARAMETERS, OpenApiParameter("status", str, enum=list(ChargeStatus.values))]


@listing_schema(
    tags=["transactions"],
    summary="List charges",
    operation_id="transactions_list",
    parameters=CHARGE_FILTERS,
)
class ChargesApi(ListingMixin, AccountAPIView):
    required_permission = "cashin"
    internal_error_messages = {"POST": err.CREATE_INTERNAL_ERROR}
    filterset_class = ChargeFilterSet
    item_serializer = ChargeReadSerializer
    collection = "transactions"
    listed_message = "Transações listadas com sucesso."
    schema_name = "ChargeListResponse"

    def listing_scope(self, request: Request, **kwargs: Any) -> Scope[Charge]:
        return charges_scope(request.user, CHARGE_READ_COLUMNS)  # type: ignore[arg-type]

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
            CHARGE_REFUSALS,
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


@csv_export_schema(
    tags=["transactions"],
    summary="Charges as CSV",
    operation_id="transactions_csv",
    what="The charges listing's records",
    credentials="`cashin` or `all`, as for the listing",
    header=ChargeSerializer.Meta.fields,
    example=examples.TRANSACTIONS_CSV,
    filters=without(CHARGE_FILTERS, *PERIOD, "page", "per_page"),
)
class ChargesCsvApi(CsvExportApi):
    required_permission = "cashin"
    filterset_class = ChargeFilterSet
    item_serializer = ChargeSerializer
    header = ChargeSerializer.Meta.fields
    filename = "transacoes"
    period_required = "Informe o período (created_at_start e created_at_end) para exportar as transações."
    period_too_long = "O período das transações em CSV é de no máximo 31 dias."

    def export_queryset(self, request: Request) -> QuerySet[Charge]:
        return charges_of(request.user).only(*ChargeSerializer.Meta.fields)  # type: ignore[arg-type]


class ChargeDetailApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["transactions"],
        summary="Read a charge",
        parameters=[CHARGE_ID],
        responses=responses(
            {200: success_envelope("ChargeResponse", ChargeReadSerializer())}, (404, not_found(err.CHARGE_NOT_FOUND))
        ),
    )
    def get(self, request: Request, charge_id: str) -> Response:
        charge = charge_get(account=request.user, charge_id=charge_id, fields=CHARGE_READ_COLUMNS)  # type: ignore[arg-type]
        return ok(ChargeReadSerializer(charge).data, "Transação consultada com sucesso.")


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
            (
                404,
                error_response(
                    "Unknown id, malformed id, another account's record, or an automatic Pix cycle (no code).",
                    err.CHARGE_NOT_FOUND,
                ),
            ),
            (422, VALIDATION_ERROR),
        ),
    )
    def get(self, request: Request, charge_id: str) -> HttpResponse:
        image_format = request.query_params.get("format", "png")
        if image_format not in ("png", "svg"):
            raise ValidationFailed({"format": ["Use png ou svg."]})
        charge = charge_get(account=request.user, charge_id=charge_id)  # type: ignore[arg-type]
        if not charge.emv:  # a Pix Automático cycle: its payer's bank settles it, no code to scan
            raise err.ChargeNotFound(err.NO_QR_CODE)
        buffer = io.BytesIO()
        segno.make(charge.emv, error="m").save(buffer, kind=image_format, scale=8, border=4)
        content_type = "image/png" if image_format == "png" else "image/svg+xml"
        response = HttpResponse(buffer.getvalue(), content_type=content_type)
        response["Cache-Control"] = "private, max-age=300"
        return response


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
            "the change that put it in its status is a 200 that changes nothing. `pay` on a charge cancelled "
            "(or failed) here is a payment that came late: recorded for staff, the charge stays as it is (200), "
            "until the cancel has reached the sandbox; then the payer cannot pay (409)."
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
        outcome = sandbox_charge_drive(charge=charge, action=action)
        message = err.LATE_PAYMENT_RECORDED if outcome.late else "Transação atualizada."
        return ok(ChargeSerializer(outcome.charge).data, message)
