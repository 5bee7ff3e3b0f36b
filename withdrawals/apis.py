"""Withdrawal endpoints: request, list, read, balance, the statement, and the sandbox return."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account, LedgerEntry, LedgerKind
from accounts.selectors import statement_entries, statement_record
from accounts.settlement import account_settlement, settlement_period_error
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
from api.listing import TIMESTAMP_FORMAT, date_period, filter_and_paginate
from api.listing_statements import Scope
from api.schema import PAGE_PARAMETERS, timestamp_parameter, uuid_path
from core.exceptions import ValidationFailed
from withdrawals import examples
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
    withdrawals_scope,
)
from withdrawals.serializers import (
    WITHDRAWAL_COLUMNS,
    WITHDRAWAL_DETAIL_COLUMNS,
    BalanceSerializer,
    SettlementSerializer,
    StatementEntrySerializer,
    WithdrawalCreatedSerializer,
    WithdrawalCreateSerializer,
    WithdrawalDetailSerializer,
    WithdrawalSerializer,
)
from withdrawals.services import withdrawal_request, withdrawal_transition

WITHDRAWAL_ID = uuid_path(
    "withdrawal_id",
    "Withdrawal id: the `id` that `POST /api/withdrawals` answers, or one listed by `GET /api/withdrawals`.",
)


WITHDRAWAL_FILTERS = [*LISTING_PARAMETERS, OpenApiParameter("status", str, enum=list(WithdrawalStatus.values))]


@listing_schema(
    tags=["withdrawals"],
    summary="List withdrawals",
    operation_id="withdrawals_list",
    parameters=WITHDRAWAL_FILTERS,
)
class WithdrawalsApi(ListingMixin, AccountAPIView):
    required_permission = "cashout"
    filterset_class = WithdrawalFilterSet
    item_serializer = WithdrawalDetailSerializer
    collection = "withdrawals"
    listed_message = "Saques listados com sucesso."
    schema_name = "WithdrawalListResponse"

    def listing_scope(self, request: Request, **kwargs: Any) -> Scope[Withdrawal]:
        return withdrawals_scope(request.user, WITHDRAWAL_DETAIL_COLUMNS)  # type: ignore[arg-type]

    @extend_schema(
        tags=["withdrawals"],
        summary="Request a PIX withdrawal",
        description=(
            "Checks, in order: credentials (401), permission (403), account (403), fields (422: key format "
            "per type, amount ≥ the effective minimum, something left after the fee), then 400s: per-request "
            "limit, daily limit (America/Sao_Paulo day), balance. The total is debited at once; the payout "
            "follows in the background. `Idempotency-Key` makes retries safe. With `scheduled_for` (after "
            "today, at most 60 days ahead, else 422) the payout is sent on that day and the daily limit of that "
            "day applies (docs: Scheduled withdrawals)."
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
                        "Same ownership only: a CPF/CNPJ key not the holder's": err.SAME_OWNERSHIP_ONLY,
                        "A CPF/CNPJ key that is not payee_document": err.KEY_NOT_PAYEE,
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
            payee_document=data["payee_document"],
            scheduled_for=data["scheduled_for"],
            external_id=data["external_id"],
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
            {200: success_envelope("WithdrawalResponse", WithdrawalDetailSerializer())},
            (404, not_found(err.WITHDRAWAL_NOT_FOUND)),
        ),
    )
    def get(self, request: Request, withdrawal_id: str) -> Response:
        withdrawal = withdrawal_get(
            account=request.user,  # type: ignore[arg-type]
            withdrawal_id=withdrawal_id,
            fields=WITHDRAWAL_DETAIL_COLUMNS,
        )
        return ok(WithdrawalDetailSerializer(withdrawal).data, "Saque consultado com sucesso.")


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


CSV_HEADER = ["id", "kind", "amount", "balance_after", "record_type", "record_id", "created_at"]


@csv_export_schema(
    tags=["balance"],
    summary="Statement as CSV",
    operation_id="statement_csv",
    what="The statement's entries",
    credentials="`cashout` or `all`",
    header=CSV_HEADER,
    example=examples.STATEMENT_CSV,
    filters=without(STATEMENT_FILTERS, *PERIOD),
)
class StatementCsvApi(CsvExportApi):
    required_permission = "cashout"
    filterset_class = StatementFilterSet
    header = CSV_HEADER
    filename = "extrato"
    order = ("-id",)
    period_required = "Informe o período (created_at_start e created_at_end) para exportar o extrato."
    period_too_long = "O período do extrato em CSV é de no máximo 31 dias."

    def export_queryset(self, request: Request) -> QuerySet[LedgerEntry]:
        return statement_entries(account=request.user)  # type: ignore[arg-type]

    def export_rows(self, records: Iterator[LedgerEntry]) -> Iterator[list[Any]]:
        for entry in records:
            record = statement_record(entry) or {"type": "", "id": ""}
            created_at = entry.created_at.astimezone(SAO_PAULO).strftime(TIMESTAMP_FORMAT)
            yield [entry.pk, entry.kind, entry.amount, entry.balance_after, record["type"], record["id"], created_at]


@csv_export_schema(
    tags=["withdrawals"],
    summary="Withdrawals as CSV",
    operation_id="withdrawals_csv",
    what="The withdrawals listing's records",
    credentials="`cashout` or `all`, as for the listing",
    header=WithdrawalSerializer.Meta.fields,
    example=examples.WITHDRAWALS_CSV,
    filters=without(WITHDRAWAL_FILTERS, *PERIOD, "page", "per_page"),
)
class WithdrawalsCsvApi(CsvExportApi):
    required_permission = "cashout"
    filterset_class = WithdrawalFilterSet
    item_serializer = WithdrawalSerializer
    header = WithdrawalSerializer.Meta.fields
    filename = "saques"
    period_required = "Informe o período (created_at_start e created_at_end) para exportar os saques."
    period_too_long = "O período dos saques em CSV é de no máximo 31 dias."

    def export_queryset(self, request: Request) -> QuerySet[Withdrawal]:
        return withdrawals_of(request.user).only(*WITHDRAWAL_COLUMNS)  # type: ignore[arg-type]


SETTLEMENT_PERIOD_REQUIRED = "Informe o período (date_start e date_end) do fechamento."


class SettlementApi(AccountAPIView):
    required_permission = "cashout"

    @extend_schema(
        tags=["balance"],
        summary="Settlement: credits, debits, fees and closing balance per day",
        description=(
            "One row per America/Sao_Paulo day from `date_start` to `date_end` (both required, `YYYY-MM-DD`, "
            "at most 31 days; days after today are not listed), oldest first, from the ledger (the "
            "statement's entries): `credits` and `debits` are the day's entries as they moved the balance, so "
            "each `closing_balance` is the previous one (the first day: `opening_balance`) plus `credits` minus "
            "`debits`. `fees` are the platform's fees already inside them, shown apart. "
            "Credential `cashout` or `all`, as for the balance."
        ),
        operation_id="settlements",
        parameters=[
            # An example each, so that Swagger UI's "Try it out" can send the
            # request as it stands (the days of examples.SETTLEMENT).
            OpenApiParameter(
                name,
                {"type": "string", "format": "date", "example": example},
                required=True,
                description="`YYYY-MM-DD`, inclusive; at most 31 days.",
            )
            for name, example in (("date_start", "2026-11-24"), ("date_end", "2026-11-26"))
        ],
        responses=responses(
            {
                200: OpenApiResponse(
                    success_envelope("SettlementResponse", SettlementSerializer()),
                    description="The settlement.",
                    examples=[examples.SETTLEMENT],
                )
            },
            (422, VALIDATION_ERROR),
        ),
    )
    def get(self, request: Request) -> Response:
        date_start, date_end = date_period(request.query_params, required=SETTLEMENT_PERIOD_REQUIRED)
        if problem := settlement_period_error(date_start, date_end):
            raise ValidationFailed({"date_end": [problem]})
        settlement = account_settlement(account=request.user, date_start=date_start, date_end=date_end)  # type: ignore[arg-type]
        return ok(SettlementSerializer(settlement).data, "Fechamento consultado com sucesso.")


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
            {200: success_envelope("SandboxWithdrawalResponse", WithdrawalDetailSerializer())},
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
        return ok(WithdrawalDetailSerializer(withdrawal).data, "Saque atualizado.")
