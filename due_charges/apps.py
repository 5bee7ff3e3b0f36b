from django.apps import AppConfig


class DueChargesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "due_charges"
    verbose_name = "Cobranças com vencimento"
