"""/api/withdrawals/batches: post a batch of payouts (201), list batches,
read a batch's progress, page its items, and its results as CSV."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account
from api.base import (
    IDEMPOTENCY_HEADER,
    IDEMPOTENCY_RESPONSES,
    VALIDATION_ERROR,
    AccountAPIView,
    business_errors,
    event_callbacks,
    listing_envelope,
    not_found,
    ok,
    responses,
    success_envelope,
)
from api.examples import CPF
from api.exports import FileDownloadApi
from api.idempotency import Claim, idempotent
from api.listing import TIMESTAMP_FORMAT, filter_and_paginate
from api.schema import PAGE_PARAMETERS, uuid_path
from core.exceptions import NotFoundError
from core.exports import csv_lines
from core.selectors import get_by_uuid
from withdrawals import exceptions as err
from withdrawals.batch_progress import batch_answer, batches_progress
from withdrawals.batch_serializers import PayoutBatchCreateSerializer, PayoutBatchEventSerializer, PayoutBatchSerializer
from withdrawals.batches import ITEM_RULE, payout_batch_create
from withdrawals.models import PayoutBatch, Withdrawal, WithdrawalStatus
from withdrawals.payloads import WithdrawalEventSerializer
from withdrawals.selectors import SAO_PAULO
from withdrawals.serializers import WITHDRAWAL_DETAIL_COLUMNS, WithdrawalDetailSerializer

BATCH_NOT_FOUND = "Lote de saques não encontrado."
BATCH_CREATED = "Lote de saques recebido."
CSV_HEADER = [
    "batch_index",
    "external_id",
    "id",
    "amount",
    "fee",
    "liquid_amount",
    "pix_type",
    "pix_key",
    "status",
    "e2e_id",
    "failure_reason",
    "paid_at",
]
BATCH_ID = uuid_path("batch_id", "Batch id: the `id` that `POST /api/withdrawals/batches` answers.")


class BatchNotFound(NotFoundError):
    default_message = BATCH_NOT_FOUND


def batch_get(*, account: Account, batch_id: Any) -> PayoutBatch:
    """The account's batch; 404 for unknown, malformed or someone else's ids alike."""
    return get_by_uuid(PayoutBatch.objects.filter(account=account), batch_id, BatchNotFound)


class BatchFilterSet(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=PayoutBatch.Status.choices)

    class Meta:
        model = PayoutBatch
        fields = ["status"]


class BatchItemFilterSet(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=WithdrawalStatus.choices)

    class Meta:
        model = Withdrawal
        fields = ["status"]


EXAMPLE = OpenApiExample(
    "Two payouts",
    request_only=True,
    value={
        "description": "Comissões de novembro",
        "items": [
            {"amount": 1500, "key_type": "cpf", "key_value": CPF, "external_id": "comissao-001"},
            {
                "amount": 2500,
                "key_type": "email",
                "key_value": "financeiro@loja.example.com",
                "discount_fee": False,
                "external_id": "comissao-002",
            },
        ],
    },
)


class PayoutBatchesApi(AccountAPIView):
    required_permission = "cashout"

    @extend_schema(
        tags=["withdrawals"],
        summary="Request a batch of PIX withdrawals",
        description=(
            "Up to 1,000 payouts, each the body of `POST /api/withdrawals` (without `scheduled_for`). All or "
            "nothing: any invalid item is a 422 with its errors under `items.<index>.<field>` (every item's at "
            "once), any business rule a 400 (an item above the per-request limit names its index; the total "
            "above the daily limit or the balance), and nothing is stored. An accepted batch is debited at once, "
            "each item a withdrawal of its own (`withdrawal` webhooks); when the account needs approval the "
            "batch waits for one staff approval (`awaiting_approval`), else it is `processing`. One "
            "`payout_batch` webhook is sent when every item is final. `Idempotency-Key` makes retries safe."
        ),
        parameters=[IDEMPOTENCY_HEADER],
        request=PayoutBatchCreateSerializer,
        examples=[EXAMPLE],
        callbacks=[
            *event_callbacks("payout_batch", PayoutBatchEventSerializer),
            *event_callbacks("withdrawal", WithdrawalEventSerializer),
        ],
        responses=responses(
            {201: success_envelope("PayoutBatchCreatedResponse", PayoutBatchSerializer())},
            (
                400,
                business_errors(
                    "The body is not a JSON object, or a business rule refused the batch.",
                    {
                        "An item above the per-request limit": ITEM_RULE.format(index=0, message=err.PER_REQUEST_LIMIT),
                        "Above the daily limit": err.DAILY_LIMIT,
                        "Insufficient balance": err.INSUFFICIENT_BALANCE,
                    },
                ),
            ),
            (422, VALIDATION_ERROR),
            *IDEMPOTENCY_RESPONSES,
        ),
    )
    def post(self, request: Request) -> Response:
        return idempotent(self, request, "withdrawal_batches", lambda claim: self._create(request, claim))

    def _create(self, request: Request, claim: Claim) -> Response:
        account: Account = request.user  # type: ignore[assignment]
        body = PayoutBatchCreateSerializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        data = body.validated_data
        batch = payout_batch_create(
            account=account,
            items=data["items"],
            description=data["description"],
            in_transaction=lambda created: claim.settle(self._created(created)),
        )
        return claim.response if claim.response is not None else self._created(batch)

    @staticmethod
    def _created(batch: PayoutBatch) -> Response:
        return ok(batch_answer(batch), BATCH_CREATED, status=201)

    @extend_schema(
        tags=["withdrawals"],
        summary="List batches of withdrawals",
        operation_id="withdrawal_batches_list",
        description="Newest first, each with its progress; `status` filters.",
        parameters=[OpenApiParameter("status", str, enum=list(PayoutBatch.Status.values)), *PAGE_PARAMETERS],
        responses=responses(
            {200: listing_envelope("PayoutBatchListResponse", "batches", PayoutBatchSerializer(many=True))},
            (422, VALIDATION_ERROR),
        ),
    )
    def get(self, request: Request) -> Response:
        batches, pagination = filter_and_paginate(
            BatchFilterSet,
            PayoutBatch.objects.filter(account=request.user),  # type: ignore[misc]  # the Account (ApiKeyAuthentication)
            request.query_params,
            order=("-created_at", "-id"),
        )
        page = list(batches)
        progress = batches_progress([b.pk for b in page])
        data = [PayoutBatchSerializer(b, context={"progress": progress[b.pk]}).data for b in page]
        return ok({"batches": data, "pagination": pagination}, "Lotes de saques listados com sucesso.")


class PayoutBatchDetailApi(AccountAPIView):
    required_permission = "cashout"

    @extend_schema(
        tags=["withdrawals"],
        summary="Read a batch of withdrawals: its progress",
        parameters=[BATCH_ID],
        responses=responses(
            {200: success_envelope("PayoutBatchResponse", PayoutBatchSerializer())}, (404, not_found(BATCH_NOT_FOUND))
        ),
    )
    def get(self, request: Request, batch_id: str) -> Response:
        batch = batch_get(account=request.user, batch_id=batch_id)  # type: ignore[arg-type]
        return ok(batch_answer(batch), "Lote de saques consultado com sucesso.")


class PayoutBatchItemsApi(AccountAPIView):
    required_permission = "cashout"

    @extend_schema(
        tags=["withdrawals"],
        summary="List a batch's withdrawals",
        description="In the order they were sent (`batch_index`, from 0), each as `GET /api/withdrawals/{id}`.",
        parameters=[BATCH_ID, OpenApiParameter("status", str, enum=list(WithdrawalStatus.values)), *PAGE_PARAMETERS],
        responses=responses(
            {
                200: listing_envelope(
                    "PayoutBatchItemListResponse", "withdrawals", WithdrawalDetailSerializer(many=True)
                )
            },
            (404, not_found(BATCH_NOT_FOUND)),
            (422, VALIDATION_ERROR),
        ),
    )
    def get(self, request: Request, batch_id: str) -> Response:
        batch = batch_get(account=request.user, batch_id=batch_id)  # type: ignore[arg-type]
        items: QuerySet[Withdrawal] = Withdrawal.objects.filter(batch=batch).only(*WITHDRAWAL_DETAIL_COLUMNS)
        page, pagination = filter_and_paginate(BatchItemFilterSet, items, request.query_params, order=("batch_index",))
        data = WithdrawalDetailSerializer(page, many=True).data
        return ok({"withdrawals": data, "pagination": pagination}, "Saques do lote listados com sucesso.")


class PayoutBatchCsvApi(FileDownloadApi):
    required_permission = "cashout"

    @extend_schema(
        tags=["withdrawals"],
        summary="A batch's results as CSV",
        description=(
            "One row per item, in the order sent, as it stands now (amounts in centavos, `paid_at` in "
            "America/Sao_Paulo). Columns: " + ", ".join(CSV_HEADER) + "."
        ),
        parameters=[BATCH_ID],
        responses=responses(
            {(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="The items, UTF-8 with a header.")},
            (404, not_found(BATCH_NOT_FOUND)),
        ),
    )
    def get(self, request: Request, batch_id: str) -> HttpResponse:
        batch = batch_get(account=request.user, batch_id=batch_id)  # type: ignore[arg-type]
        items = Withdrawal.objects.filter(batch=batch).order_by("batch_index").only(*CSV_COLUMNS)
        rows = (_csv_row(item) for item in items.iterator(chunk_size=500))
        response = HttpResponse("".join(csv_lines(CSV_HEADER, rows, bom=True)), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="lote-saques-{batch.pk}.csv"'
        return response


CSV_COLUMNS = [
    "id",
    "batch_index",
    "external_id",
    "amount",
    "fee",
    "liquid_amount",
    "pix_key_type",
    "pix_key",
    "status",
    "e2e_id",
    "failure_reason",
    "paid_at",
]


def _csv_row(item: Withdrawal) -> list[Any]:
    paid_at = item.paid_at.astimezone(SAO_PAULO).strftime(TIMESTAMP_FORMAT) if item.paid_at else ""
    return [
        item.batch_index,
        item.external_id,
        str(item.pk),
        item.amount,
        item.fee,
        item.liquid_amount,
        item.pix_key_type,
        item.pix_key,
        item.status,
        item.e2e_id or "",
        err.merchant_failure_reason(item.status, item.failure_reason),
        paid_at,
    ]
