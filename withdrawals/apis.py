"""Withdrawal endpoints: request, list, read, balance, the statement, and the sandbox return."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account, LedgerEntry, LedgerKind
from accounts.selectors import statement_entries, statement_record
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
    error_response,
    event_callbacks,
    listing_schema,
    not_found,
    ok,
    responses,
    success_envelope,
)
from api.idempotency import Claim, idempotent
from api.listing import TIMESTAMP_FORMAT, filter_and_paginate, valid_filterset
from api.schema import PAGE_PARAMETERS, TIMESTAMP_SCHEMA, timestamp_parameter, uuid_path
from core.admin_lists import csv_lines
from core.exceptions import ValidationFailed
from withdrawals import exceptions as err
from withdrawals.models import Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.payloads import WithdrawalEventSerializer
from withdrawals.selectors import (
    SAO_PAULO,
    StatementFilterSet,
    WithdrawalFilterSet,
    balance_summary,
    sandbox_withdrawal_get,
    withdrawal_get,
    withdrawals_of,
)
from withdrawals.serializers import (
    WITHDRAWAL_COLUMNS,
    BalanceSerializer,
    StatementEntrySerializer,
    WithdrawalCreatedSerializer,
    WithdrawalCreateSerializer,
    WithdrawalSerializer,
)
from withdrawals.services import withdrawal_request, withdrawal_transition

WITHDRAWAL_ID = uuid_path("withdrawal_id", "Withdrawal id.")


@listing_schema(
    tags=["withdrawals"],
    summary="List withdrawals",
    operation_id="withdrawals_list",
    parameters=[*LISTING_PARAMETERS, OpenApiParameter("status", str, enum=list(WithdrawalStatus.values))],
)
class WithdrawalsApi(ListingMixin, AccountAPIView):
    required_permission = "cashout"
    filterset_class = WithdrawalFilterSet
    item_serializer = WithdrawalSerializer
    collection = "withdrawals"
    listed_message = "Saques listados com sucesso."
    schema_name = "WithdrawalListResponse"

    def listing_queryset(self, request: Request, **kwargs: Any) -> QuerySet[Withdrawal]:
        return withdrawals_of(request.user)  # type: ignore[arg-type]

    @extend_schema(
        tags=["withdrawals"],
        summary="Request a PIX withdrawal",
        description=(
            "Checks, in order: credentials (401), permission (403), account (403), fields (422: key format "
            "per type, amount ≥ the effective minimum, something left after the fee), then 400s: per-request "
            "limit, daily limit (America/Sao_Paulo day), balance. The total is debited at once; the payout "
            "follows in the background. `Idempotency-Key` makes retries safe."
        ),
        parameters=[IDEMPOTENCY_HEADER],
        request=WithdrawalCreateSerializer,
        examples=examples.WITHDRAWAL,
        callbacks=event_callbacks("withdrawal", WithdrawalEventSerializer),
        responses=responses(
            {
                201: created(
                    "WithdrawalCreatedResponse",
                    WithdrawalCreatedSerializer(),
                    "Requested: the total is debited; the payout follows in the background.",
                    examples.WITHDRAWAL_CREATED,
                )
            },
            (
                400,
                business_errors(
                    "The body is not a JSON object, or a business rule refused the withdrawal.",
                    {
                        "Above the per-request limit": err.PER_REQUEST_LIMIT,
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
        return idempotent(self, request, "withdrawals", lambda claim: self._create(request, claim))

    def _create(self, request: Request, claim: Claim) -> Response:
        account: Account = request.user  # type: ignore[assignment]
        body = WithdrawalCreateSerializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        data = body.validated_data
        withdrawal = withdrawal_request(
            account=account,
            amount=data["amount"],
            key_type=data["key_type"],
            key_value=data["key_value"],
            discount_fee=data["discount_fee"],
            in_transaction=lambda created: claim.settle(self._created(created)),
        )
        return claim.response if claim.response is not None else self._created(withdrawal)

    @staticmethod
    def _created(withdrawal: Withdrawal) -> Response:
        return ok(WithdrawalCreatedSerializer(withdrawal).data, "Saque solicitado com sucesso.", status=201)


class WithdrawalDetailApi(AccountAPIView):
    required_permission = "cashout"

    @extend_schema(
        tags=["withdrawals"],
        summary="Read a withdrawal",
        parameters=[WITHDRAWAL_ID],
        responses=responses(
            {200: success_envelope("WithdrawalResponse", WithdrawalSerializer())},
            (404, not_found(err.WITHDRAWAL_NOT_FOUND)),
        ),
    )
    def get(self, request: Request, withdrawal_id: str) -> Response:
        withdrawal = withdrawal_get(
            account=request.user,  # type: ignore[arg-type]
            withdrawal_id=withdrawal_id,
            fields=WITHDRAWAL_COLUMNS,
        )
        return ok(WithdrawalSerializer(withdrawal).data, "Saque consultado com sucesso.")


class BalanceApi(AccountAPIView):
    required_permission = "cashout"

    @extend_schema(
        tags=["balance"],
        summary="Balance and withdrawal limits",
        responses=responses({200: success_envelope("BalanceResponse", BalanceSerializer())}),
    )
    def get(self, request: Request) -> Response:
        return ok(balance_summary(request.user), "Saldo consultado com sucesso.")  # type: ignore[arg-type]


STATEMENT_FILTERS = [
    timestamp_parameter("created_at_start", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
    timestamp_parameter("created_at_end", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
    OpenApiParameter("kind", str, enum=list(LedgerKind.values), description="Only entries of this kind."),
]
#: The CSV's longest period (created_at_end - created_at_start).
CSV_MAX_PERIOD = dt.timedelta(days=31)
CSV_PERIOD_REQUIRED = "Informe o período (created_at_start e created_at_end) para exportar o extrato."
CSV_PERIOD_TOO_LONG = "O período do extrato em CSV é de no máximo 31 dias."
CSV_HEADER = ["id", "kind", "amount", "balance_after", "record_type", "record_id", "created_at"]
CSV_CHUNK = 2000
STATEMENT_DESCRIPTION = (
    "Every movement of the account's available balance, one ledger entry each, newest first (by `id`, the "
    "order they were posted): `amount` is signed centavos and `balance_after` the balance right after it, so "
    "each entry's `balance_after` is the previous entry's plus its `amount`. `record` names the charge "
    "(`transaction`) or withdrawal the entry is for (a refund's entries name its charge). "
    "Credential `cashout` or `all`, as for the balance."
)


@listing_schema(
    tags=["balance"],
    summary="Statement: the ledger entries of the balance",
    description=STATEMENT_DESCRIPTION,
    operation_id="statement_list",
    parameters=[*STATEMENT_FILTERS, *PAGE_PARAMETERS],
    example=examples.STATEMENT,
)
class StatementApi(ListingMixin, AccountAPIView):
    required_permission = "cashout"
    filterset_class = StatementFilterSet
    item_serializer = StatementEntrySerializer
    collection = "entries"
    listed_message = "Extrato consultado com sucesso."
    schema_name = "StatementResponse"

    def listing_queryset(self, request: Request, **kwargs: Any) -> QuerySet[LedgerEntry]:
        return statement_entries(account=request.user)  # type: ignore[arg-type]

    def get(self, request: Request, **kwargs: Any) -> Response:
        items, pagination = filter_and_paginate(
            self.filterset_class, self.listing_queryset(request), request.query_params, order=("-id",)
        )
        data = self.item_serializer(items, many=True).data
        return ok({self.collection: data, "pagination": pagination}, self.listed_message)


class StatementCsvApi(AccountAPIView):
    required_permission = "cashout"

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # Any Accept (text/csv included): the CSV is not a renderer's, and
        # errors are the API's JSON envelopes.
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        tags=["balance"],
        summary="Statement as CSV",
        description=(
            "The statement's entries and filters as a streamed CSV file: `;`-separated, UTF-8, a header row "
            "(`" + ";".join(CSV_HEADER) + "`), newest first, amounts in centavos, times `YYYY-MM-DD HH:mm:ss` "
            "in America/Sao_Paulo. `created_at_start` and `created_at_end` are required and at most 31 days "
            "apart (422 otherwise). Credential `cashout` or `all`."
        ),
        operation_id="statement_csv",
        parameters=[
            OpenApiParameter(
                name,
                dict(TIMESTAMP_SCHEMA),
                required=True,
                description="`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive; at most 31 days apart.",
            )
            for name in ("created_at_start", "created_at_end")
        ]
        + [STATEMENT_FILTERS[2]],
        responses=responses(
            {(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="The CSV file, streamed.")},
            (422, VALIDATION_ERROR),
        ),
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        params = request.query_params
        filterset = valid_filterset(StatementFilterSet, statement_entries(account=request.user), params)  # type: ignore[arg-type]
        start = filterset.form.cleaned_data.get("created_at_start")
        end = filterset.form.cleaned_data.get("created_at_end")
        missing = {
            name: [CSV_PERIOD_REQUIRED]
            for name, value in (("created_at_start", start), ("created_at_end", end))
            if value is None
        }
        if missing:
            raise ValidationFailed(missing)
        if end - start > CSV_MAX_PERIOD:
            raise ValidationFailed({"created_at_end": [CSV_PERIOD_TOO_LONG]})
        entries = filterset.qs.order_by("-id").iterator(chunk_size=CSV_CHUNK)
        response = StreamingHttpResponse(
            csv_lines(CSV_HEADER, statement_rows(entries)), content_type="text/csv; charset=utf-8"
        )
        period = f"{start:%Y%m%d}-{end:%Y%m%d}"  # Sao Paulo times, as given
        response["Content-Disposition"] = f'attachment; filename="extrato-{period}.csv"'
        response["Cache-Control"] = "no-store"
        return response


def statement_rows(entries: Iterator[LedgerEntry]) -> Iterator[list[Any]]:
    for entry in entries:
        record = statement_record(entry) or {"type": "", "id": ""}
        created_at = entry.created_at.astimezone(SAO_PAULO).strftime(TIMESTAMP_FORMAT)
        yield [entry.pk, entry.kind, entry.amount, entry.balance_after, record["type"], record["id"], created_at]


class SandboxWithdrawalReturnApi(AccountAPIView):
    """The destination returned the money (decisions §8): paid → refunded;
    only withdrawals sent through a sandbox acquirer, with a credential that
    may see withdrawals."""

    required_permission = "cashout"

    @extend_schema(
        tags=["sandbox"],
        summary="Sandbox: the destination returns a paid withdrawal",
        description=(
            "Only with PIX_SANDBOX on. Paid → refunded (the liquid amount is credited back), for withdrawals "
            "sent through an acquirer using the `sandbox` adapter (any other withdrawal is a 404, like an "
            "unknown id). Credential `cashout` or `all`. A change the status does not allow is a 409; "
            "returning a withdrawal already returned is a 200 that changes nothing."
        ),
        parameters=[WITHDRAWAL_ID],
        request=None,
        responses=responses(
            {200: success_envelope("SandboxWithdrawalResponse", WithdrawalSerializer())},
            (404, not_found(err.WITHDRAWAL_NOT_FOUND)),
            (
                409,
                error_response(
                    "The withdrawal's status does not allow this change.",
                    "O saque não pode passar de Pendente para Devolvido.",
                ),
            ),
        ),
    )
    def post(self, request: Request, withdrawal_id: str) -> Response:
        withdrawal = sandbox_withdrawal_get(account=request.user, withdrawal_id=withdrawal_id)  # type: ignore[arg-type]
        withdrawal_transition(
            withdrawal_id=withdrawal.pk, to_status=WithdrawalStatus.REFUNDED, source=WithdrawalTransition.Source.SANDBOX
        )
        withdrawal.refresh_from_db()
        return ok(WithdrawalSerializer(withdrawal).data, "Saque atualizado.")
