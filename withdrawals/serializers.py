from typing import Any

from rest_framework import serializers


class BalanceLimitsSerializer(serializers.Serializer[Any]):
    per_request = serializers.IntegerField(help_text="Maximum per withdrawal request, centavos.")
    per_day_total = serializers.IntegerField(help_text="Maximum total per America/Sao_Paulo day, centavos.")


class BalanceSerializer(serializers.Serializer[Any]):
    available_balance = serializers.IntegerField(help_text="Balance available for withdrawal, centavos.")
    daily_limit_remaining = serializers.IntegerField(help_text="max(0, per_day_total - today's withdrawals).")
    minimum_withdrawal = serializers.IntegerField(help_text="Effective minimum: max(1000, account minimum).")
    limits = BalanceLimitsSerializer()
