"""Withdrawal endpoints: request, list, read, balance, and the sandbox return."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account
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
from api.schema import uuid_path
from withdrawals import exceptions as err
from withdrawals.models import Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.payloads import WithdrawalEventSerializer
from withdrawals.selectors import (
    WithdrawalFilterSet,
    balance_summary,
    sandbox_withdrawal_get,
    withdrawal_get,
    withdrawals_of,
)
from withdrawals.serializers import (
    WITHDRAWAL_COLUMNS,
    BalanceSerializer,
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
