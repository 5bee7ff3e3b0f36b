"""/api/due-charges/batches: create a batch (202), read its progress, page
its items, and its results as CSV."""

from __future__ import annotations

import datetime as dt
from typing import Any

import django_filters
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account
from api.base import (
    IDEMPOTENCY_HEADER,
    IDEMPOTENCY_RESPONSES,
    INVALID_BODY,
    VALIDATION_ERROR,
    AccountAPIView,
    error_response,
    event_callbacks,
    listing_envelope,
    not_found,
    ok,
    responses,
    success_envelope,
)
from api.exports import FileDownloadApi
from api.idempotency import Claim, idempotent
from api.listing import filter_and_paginate
from api.schema import PAGE_PARAMETERS, uuid_path
from core.exceptions import BODY_TOO_LARGE_MESSAGE, NotFoundError
from core.exports import csv_lines
from core.selectors import get_by_uuid
from due_charges.batch_serializers import (
    BatchCreateSerializer,
    BatchEventSerializer,
    BatchItemSerializer,
    BatchSerializer,
)
from due_charges.batches import batch_counts, batch_create
from due_charges.models import DueChargeBatch, DueChargeBatchItem, ItemStatus
from payments.models import Charge

BATCH_NOT_FOUND = "Lote não encontrado."
BATCH_ACCEPTED = "Lote recebido: as cobranças estão sendo criadas."
CSV_HEADER = ["position", "status", "charge_id", "txid", "emv", "amount", "due_date", "debtor_document", "errors"]

# "Try it out" must succeed whenever it is tried: a fixed date would stop
# being payable a month after it (the date the example shows moves with the day).
EXAMPLE_DUE_DATE = (dt.date.today() + dt.timedelta(days=30)).isoformat()

BATCH_ID = uuid_path("batch_id", "Batch id: the `id` that `POST /api/due-charges/batches` answers.")


class BatchNotFound(NotFoundError):
    default_message = BATCH_NOT_FOUND


def batch_get(*, account: Account, batch_id: Any) -> DueChargeBatch:
    """The account's batch; 404 for unknown, malformed or someone else's ids alike."""
    return get_by_uuid(DueChargeBatch.objects.filter(account=account), batch_id, BatchNotFound)


def batch_answer(batch: DueChargeBatch) -> dict[str, Any]:
    return dict(BatchSerializer(batch, context={"counts": batch_counts(batch.pk)}).data)


class BatchItemFilterSet(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=ItemStatus.choices)

    class Meta:
        model = DueChargeBatchItem
        fields = ["status"]


class BatchesApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["due-charges"],
        summary="Create a batch of due-date charges",
        description=(
            "Up to 1,000 items, each the body of `POST /api/due-charges`. Request-level problems (no `items`, "
            "not a list, empty, more than 1,000, a body above 2 MB) are a 422 (413) and nothing is stored. "
            "Each item is validated alone: one that fails is stored `failed` with its errors by field, the "
            "others are created by workers after the answer (202). Follow the progress with "
            "`GET /api/due-charges/batches/{id}`; a `due_charge_batch` webhook is sent when every item settled."
        ),
        parameters=[IDEMPOTENCY_HEADER],
        request=BatchCreateSerializer,
        callbacks=event_callbacks("due_charge_batch", BatchEventSerializer, postback=True),
        responses=responses(
            {202: success_envelope("DueChargeBatchAccepted", BatchSerializer())},
            (400, INVALID_BODY),
            (413, error_response("The body is larger than 2 MB.", BODY_TOO_LARGE_MESSAGE)),
            (422, VALIDATION_ERROR),
            *IDEMPOTENCY_RESPONSES,
        ),
        examples=[
            OpenApiExample(
                "Two charges",
                request_only=True,
                value={
                    "description": "Mensalidades de dezembro",
                    "items": [
                        {
                            "amount": 15000,
                            "due_date": EXAMPLE_DUE_DATE,
                            "days_after_due": 30,
                            "debtor": {"name": "Maria Souza", "document": "12345678909"},
                            "fine": {"modalidade": 2, "valorPerc": "2.00"},
                            "interest": {"modalidade": 2, "valorPerc": "0.03"},
                        },
                        {
                            "amount": 15000,
                            "due_date": EXAMPLE_DUE_DATE,
                            "debtor": {"name": "João Lima", "document": "11144477735"},
                        },
                    ],
                },
            )
        ],
    )
    def post(self, request: Request) -> Response:
        return idempotent(self, request, "due_charge_batches", lambda claim: self._create(request, claim))

    def _create(self, request: Request, claim: Claim) -> Response:
        account: Account = request.user  # type: ignore[assignment]
        body = BatchCreateSerializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        data = body.validated_data
        batch = batch_create(
            account=account,
            items=data["items"],
            description=data.get("description", ""),
            postback_url=data.get("postback_url", ""),
            in_transaction=lambda created: claim.settle(self._accepted(created)),
        )
        return claim.response if claim.response is not None else self._accepted(batch)

    @staticmethod
    def _accepted(batch: DueChargeBatch) -> Response:
        return ok(batch_answer(batch), BATCH_ACCEPTED, status=202)


class BatchDetailApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["due-charges"],
        summary="Read a batch's progress",
        parameters=[BATCH_ID],
        responses=responses(
            {200: success_envelope("DueChargeBatchResponse", BatchSerializer())}, (404, not_found(BATCH_NOT_FOUND))
        ),
    )
    def get(self, request: Request, batch_id: str) -> Response:
        batch = batch_get(account=request.user, batch_id=batch_id)  # type: ignore[arg-type]
        return ok(batch_answer(batch), "Lote consultado com sucesso.")


class BatchItemsApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["due-charges"],
        summary="List a batch's items",
        description="In the order they were sent (`position`, from 0); `status` filters.",
        parameters=[
            BATCH_ID,
            OpenApiParameter("status", str, enum=list(ItemStatus.values)),
            *PAGE_PARAMETERS,
        ],
        responses=responses(
            {200: listing_envelope("DueChargeBatchItemListResponse", "items", BatchItemSerializer(many=True))},
            (404, not_found(BATCH_NOT_FOUND)),
            (422, VALIDATION_ERROR),
        ),
    )
    def get(self, request: Request, batch_id: str) -> Response:
        batch = batch_get(account=request.user, batch_id=batch_id)  # type: ignore[arg-type]
        items, pagination = filter_and_paginate(
            BatchItemFilterSet, batch.items.all(), request.query_params, order=("position",)
        )
        data = BatchItemSerializer(items, many=True).data
        return ok({"items": data, "pagination": pagination}, "Itens do lote listados com sucesso.")


class BatchCsvApi(FileDownloadApi):
    required_permission = "cashin"

    @extend_schema(
        tags=["due-charges"],
        summary="A batch's results as CSV",
        description=(
            "One row per item, in the order sent: the created charge's id, txid and Pix copia e cola, or the "
            "item's errors (`field: message`, separated by ` | `). Columns: " + ", ".join(CSV_HEADER) + "."
        ),
        parameters=[BATCH_ID],
        responses=responses(
            {(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="The items, UTF-8 with a header.")},
            (404, not_found(BATCH_NOT_FOUND)),
        ),
    )
    def get(self, request: Request, batch_id: str) -> HttpResponse:
        batch = batch_get(account=request.user, batch_id=batch_id)  # type: ignore[arg-type]
        items = list(batch.items.order_by("position"))
        charges = {
            c.pk: c
            for c in Charge.objects.filter(pk__in=[i.charge_id for i in items if i.status == ItemStatus.CREATED]).only(
                "txid", "emv"
            )
        }
        rows = (_csv_row(item, charges.get(item.charge_id)) for item in items)
        response = HttpResponse("".join(csv_lines(CSV_HEADER, rows, bom=True)), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="lote-{batch.pk}.csv"'
        return response


def _csv_row(item: DueChargeBatchItem, charge: Charge | None) -> list[Any]:
    request = item.request
    errors = " | ".join(f"{field}: {message}" for field, messages in item.errors.items() for message in messages)
    return [
        item.position,
        item.status,
        str(item.charge_id) if charge is not None else "",
        charge.txid if charge is not None else "",
        charge.emv if charge is not None else "",
        request.get("amount", ""),
        request.get("due_date", ""),
        request.get("debtor", {}).get("document", ""),
        errors,
    ]
