"""/api/recurrences: Pix Automático for the merchant. Create a recurrence
(the payer authorises it at their bank), list, read and cancel it, list its
cycles and set a variable cycle's amount. Built as /api/due-charges is: the
same credentials, idempotency, listing envelope and error handler; each view
validates, calls one service and answers :mod:`recurrences.payloads`' shape."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account
from api.base import (
    IDEMPOTENCY_HEADER,
    IDEMPOTENCY_RESPONSES,
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
from api.idempotency import Claim, idempotent
from api.listing import filter_and_paginate
from api.schema import PAGE_PARAMETERS, TEXT_FILTER, uuid_path
from payments import exceptions as payment_err
from payments.due_payments import now_in_brazil
from recurrences import examples
from recurrences import exceptions as err
from recurrences.cycles import cycle_amount_set
from recurrences.models import CancelledBy, Recurrence, RecurrenceStatus
from recurrences.payloads import cycle_data
from recurrences.selectors import (
    CycleFilterSet,
    RecurrenceFilterSet,
    cycle_get,
    cycles_of,
    recurrence_get,
    recurrences_of,
)
from recurrences.serializers import (
    CycleAmountSerializer,
    CycleEventSerializer,
    CycleSerializer,
    RecurrenceCreateSerializer,
    RecurrenceEventSerializer,
    RecurrenceSerializer,
    recurrence_terms_build,
)
from recurrences.services import PayerBank, recurrence_cancel, recurrence_create

RECURRENCE_ID = uuid_path(
    "recurrence_id",
    "Recurrence id: the `id` that `POST /api/recurrences` answers, or one listed by `GET /api/recurrences`.",
)
CYCLE_INDEX = OpenApiParameter(
    "index",
    {"type": "integer", "minimum": 0},
    OpenApiParameter.PATH,
    description="The cycle's index: 0 is `first_due_date`'s, 1 the next period's...",
)
RECURRENCE_FILTERS = [
    OpenApiParameter("status", str, enum=list(RecurrenceStatus.values)),
    OpenApiParameter("contract", {**TEXT_FILTER, "maxLength": 35}, description="Exact `contract`."),
    OpenApiParameter("debtor_document", {**TEXT_FILTER, "maxLength": 20}, description="The debtor's CPF or CNPJ."),
    *PAGE_PARAMETERS,
]
CREATE_REFUSALS = (
    400,
    business_errors(
        "The body is not a JSON object, or a business rule refused the recurrence.",
        {
            "Method not enabled": payment_err.METHOD_NOT_ENABLED,
            "Amount above the maximum": payment_err.AMOUNT_ABOVE_MAX,
            "Net of fees below the minimum": payment_err.NET_BELOW_MIN,
            "Every acquirer failed": payment_err.ALL_ACQUIRERS_FAILED,
        },
    ),
)
ENDED = error_response("The recurrence ended (rejected, expired).", err.ALREADY_ENDED.format(status="rejeitada"))


@listing_schema(
    tags=["recurrences"],
    summary="List recurrences",
    operation_id="recurrences_list",
    parameters=RECURRENCE_FILTERS,
)
class RecurrencesApi(ListingMixin, AccountAPIView):
    required_permission = "cashin"
    internal_error_messages = {"POST": payment_err.CREATE_INTERNAL_ERROR}
    filterset_class = RecurrenceFilterSet
    item_serializer = RecurrenceSerializer
    collection = "recurrences"
    listed_message = err.LISTED
    schema_name = "RecurrenceListResponse"

    def listing_queryset(self, request: Request, **kwargs: Any) -> QuerySet[Recurrence]:
        return recurrences_of(request.user)  # type: ignore[arg-type]

    @extend_schema(
        tags=["recurrences"],
        summary="Create a recurrence (automatic Pix)",
        description=(
            "The payer's standing authorisation (API Pix `rec`): once they approve it at their bank, each cycle "
            "is charged on its due date without them acting. `journey` `qr`: the answer carries the recurrence's "
            "QR Code (`qr_code.emv`) for the payer to scan; `push`: the request goes to the payer's bank "
            "(`payer_bank`). Checks, in order: credentials (401), permission (403), account approved and not "
            "blocked (403), fields and terms (422, every one before any acquirer is called), payment method "
            "enabled (400), amount or `max_amount` ≤ 300000 (400), a fixed amount's net of fees ≥ 10 (400), one "
            "live recurrence per debtor and `contract` (409), then the acquirers that hold recurrences (400 when "
            "every one fails). The acquirer that creates it holds it for good: every cycle is charged there "
            "(docs/api/recurrences.md, Routing). Every status change is a `recurrence` webhook, every cycle's a "
            "`recurrence_cycle` webhook."
        ),
        parameters=[IDEMPOTENCY_HEADER],
        request=RecurrenceCreateSerializer,
        examples=examples.RECURRENCE,
        callbacks=[
            *event_callbacks("recurrence", RecurrenceEventSerializer, postback=True),
            *event_callbacks("recurrence_cycle", CycleEventSerializer, postback=True),
        ],
        responses=responses(
            {
                201: created(
                    "RecurrenceCreatedResponse",
                    RecurrenceSerializer(),
                    "Created, awaiting the payer's authorisation (`created`).",
                    examples.RECURRENCE_CREATED,
                )
            },
            CREATE_REFUSALS,
            (409, error_examples("A live recurrence for this debtor and contract exists.", {"Live": err.LIVE_EXISTS})),
            (422, VALIDATION_ERROR),
            *IDEMPOTENCY_RESPONSES,
        ),
    )
    def post(self, request: Request) -> Response:
        return idempotent(self, request, "recurrences", lambda claim: self._create(request, claim))

    def _create(self, request: Request, claim: Claim) -> Response:
        account: Account = request.user  # type: ignore[assignment]
        body = RecurrenceCreateSerializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        data = body.validated_data
        bank = data.get("payer_bank")
        recurrence = recurrence_create(
            account=account,
            terms=recurrence_terms_build(data),
            journey=data["journey"],
            payer_bank=PayerBank(ispb=bank["ispb"], account=bank["account"], branch=bank.get("branch", ""))
            if bank
            else None,
            postback_url=data.get("postback_url", ""),
            metadata=data.get("metadata"),
            in_transaction=(lambda made: claim.settle(self._created(made))) if claim.record_id is not None else None,
        )
        return claim.response if claim.response is not None else self._created(recurrence)

    @staticmethod
    def _created(recurrence: Recurrence) -> Response:
        return ok(RecurrenceSerializer(recurrence).data, err.CREATED, status=201)


class RecurrenceDetailApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["recurrences"],
        summary="Read a recurrence",
        parameters=[RECURRENCE_ID],
        responses=responses(
            {200: success_envelope("RecurrenceResponse", RecurrenceSerializer())},
            (404, not_found(err.RECURRENCE_NOT_FOUND)),
        ),
    )
    def get(self, request: Request, recurrence_id: str) -> Response:
        recurrence = recurrence_get(account=request.user, recurrence_id=recurrence_id)  # type: ignore[arg-type]
        return ok(RecurrenceSerializer(recurrence).data, err.READ)


class RecurrenceCancelApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["recurrences"],
        summary="Cancel a recurrence",
        description=(
            "Awaiting authorisation or authorised: `cancelled` at once (a `recurrence` webhook), no cycle is "
            "charged after it, its open cycles are cancelled, and its acquirer is asked to cancel it too until "
            "it answers. Repeating the cancel is a 200 that changes nothing; a recurrence that ended otherwise "
            "(rejected, expired) is a 409."
        ),
        parameters=[RECURRENCE_ID],
        request=None,
        responses=responses(
            {200: success_envelope("RecurrenceCancelledResponse", RecurrenceSerializer())},
            (404, not_found(err.RECURRENCE_NOT_FOUND)),
            (409, ENDED),
        ),
    )
    def post(self, request: Request, recurrence_id: str) -> Response:
        recurrence = recurrence_get(account=request.user, recurrence_id=recurrence_id)  # type: ignore[arg-type]
        already = recurrence.status == RecurrenceStatus.CANCELLED
        cancelled = recurrence_cancel(recurrence=recurrence, by=CancelledBy.MERCHANT)
        return ok(RecurrenceSerializer(cancelled).data, err.ALREADY_CANCELLED if already else err.CANCELLED)


@listing_schema(
    tags=["recurrences"],
    summary="List a recurrence's cycles",
    description=(
        "The cycles opened so far, the latest first (highest `index`), each with its charge's money once the "
        "acquirer holds its cobr (`transaction_id`, `platform_tax`, `liquid_amount`, `e2e_id`, `paid_at`)."
    ),
    operation_id="recurrence_cycles_list",
    parameters=[RECURRENCE_ID, *PAGE_PARAMETERS],
    extra_responses=[(404, not_found(err.RECURRENCE_NOT_FOUND))],
)
class RecurrenceCyclesApi(ListingMixin, AccountAPIView):
    required_permission = "cashin"
    filterset_class = CycleFilterSet
    item_serializer = CycleSerializer
    collection = "cycles"
    listed_message = err.CYCLES_LISTED
    schema_name = "CycleListResponse"

    def get(self, request: Request, **kwargs: Any) -> Response:
        recurrence = recurrence_get(account=request.user, recurrence_id=kwargs["recurrence_id"])  # type: ignore[arg-type]
        # By index, the latest cycle first: the schedule's order, not the rows' insertion.
        items, pagination = filter_and_paginate(
            self.filterset_class, cycles_of(recurrence), request.query_params, order=("-index",)
        )
        return ok({self.collection: [cycle_data(c) for c in items], "pagination": pagination}, self.listed_message)


class RecurrenceCycleApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["recurrences"],
        summary="Read a cycle",
        parameters=[RECURRENCE_ID, CYCLE_INDEX],
        responses=responses(
            {200: success_envelope("CycleResponse", CycleSerializer())},
            (
                404,
                error_examples(
                    "Unknown recurrence (or another account's), or a cycle not opened yet.",
                    {"Recurrence": err.RECURRENCE_NOT_FOUND, "Cycle": err.CYCLE_NOT_FOUND},
                ),
            ),
        ),
    )
    def get(self, request: Request, recurrence_id: str, index: str) -> Response:
        recurrence = recurrence_get(account=request.user, recurrence_id=recurrence_id)  # type: ignore[arg-type]
        return ok(CycleSerializer(cycle_get(recurrence=recurrence, index=index)).data, err.CYCLE_READ)


class RecurrenceCycleAmountApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["recurrences"],
        summary="Set a variable cycle's amount",
        description=(
            "For a recurrence with `max_amount`: the amount cycle `index` charges, at most `max_amount`, before "
            "its cobr is sent (up to 2 days before its due date, America/Sao_Paulo). A cycle whose window is "
            "open is sent at once; a later one waits for its window. Setting it again before the send replaces "
            "it. A cycle without an amount when its window closes is `missed`."
        ),
        parameters=[RECURRENCE_ID, CYCLE_INDEX],
        request=CycleAmountSerializer,
        examples=examples.CYCLE_AMOUNT,
        responses=responses(
            {200: success_envelope("CycleAmountResponse", CycleSerializer())},
            (
                400,
                business_errors(
                    "The body is not a JSON object, or the recurrence does not take this amount now.",
                    {
                        "Fixed amount": err.FIXED_AMOUNT,
                        "Above the maximum": err.AMOUNT_ABOVE_MAX,
                        "Net of fees below the minimum": payment_err.NET_BELOW_MIN,
                        "Too late": err.AMOUNT_TOO_LATE,
                        "Not a cycle": err.NOT_A_CYCLE,
                    },
                ),
            ),
            (404, not_found(err.RECURRENCE_NOT_FOUND)),
            (409, error_response("The recurrence ended.", "A recorrência já está encerrada.")),
            (422, VALIDATION_ERROR),
        ),
    )
    def put(self, request: Request, recurrence_id: str, index: str) -> Response:
        recurrence = recurrence_get(account=request.user, recurrence_id=recurrence_id)  # type: ignore[arg-type]
        number = _index(index)
        body = CycleAmountSerializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        cycle = cycle_amount_set(
            recurrence=recurrence, index=number, amount=body.validated_data["amount"], today=now_in_brazil()
        )
        return ok(CycleSerializer(cycle).data, err.AMOUNT_SET)


#: cycle_txid's room: three base-36 digits.
MAX_INDEX = 36**3 - 1


def _index(raw: str) -> int:
    """The path's cycle index; anything but 0..MAX_INDEX in ASCII digits is an unknown cycle (404)."""
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_INDEX:
        raise err.CycleNotFound()
    return int(raw)
