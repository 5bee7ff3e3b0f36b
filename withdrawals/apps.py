from django.apps import AppConfig


class WithdrawalsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "withdrawals"
