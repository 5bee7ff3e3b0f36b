"""The scheduled withdrawals' endpoint: cancel one not yet sent (docs/api/scheduled-withdrawals.md)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import AccountAPIView, error_response, not_found, ok, responses, success_envelope
from withdrawals import exceptions as err
from withdrawals.apis import WITHDRAWAL_ID
from withdrawals.models import WithdrawalTransition
from withdrawals.schedule import withdrawal_cancel_scheduled
from withdrawals.serializers import WithdrawalDetailSerializer


class WithdrawalCancelApi(AccountAPIView):
    required_permission = "cashout"

    @extend_schema(
        tags=["withdrawals"],
        summary="Cancel a scheduled withdrawal",
        description=(
            "A withdrawal requested with `scheduled_for` and not sent yet becomes `canceled`: its total debit is "
            "credited back to the balance and a `withdrawal` webhook is sent. Any other withdrawal (not "
            "scheduled, already sent, paid, failed or canceled) is a 409 that changes nothing. Credential "
            "`cashout` or `all`."
        ),
        parameters=[WITHDRAWAL_ID],
        request=None,
        responses=responses(
            {200: success_envelope("WithdrawalCancelResponse", WithdrawalDetailSerializer())},
            (404, not_found(err.WITHDRAWAL_NOT_FOUND)),
            (409, error_response("Not a scheduled withdrawal waiting to be sent.", err.SCHEDULED_CANCEL_REFUSED)),
        ),
    )
    def post(self, request: Request, withdrawal_id: str) -> Response:
        withdrawal = withdrawal_cancel_scheduled(
            account=request.user,  # type: ignore[arg-type]
            withdrawal_id=withdrawal_id,
            source=WithdrawalTransition.Source.SYSTEM,
            actor="api",
        )
        return ok(WithdrawalDetailSerializer(withdrawal).data, "Saque agendado cancelado.")
