from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from pix_service.api import AccountAPIView, ok, responses, success_envelope
from withdrawals.selectors import balance_summary
from withdrawals.serializers import BalanceSerializer


class BalanceApi(AccountAPIView):
    required_permission = "cashout"

    @extend_schema(
        tags=["withdrawals"],
        summary="Balance and withdrawal limits",
        responses=responses({200: success_envelope("BalanceResponse", BalanceSerializer())}),
    )
    def get(self, request: Request) -> Response:
        return ok(balance_summary(request.user), "Saldo consultado com sucesso.")  # type: ignore[arg-type]
