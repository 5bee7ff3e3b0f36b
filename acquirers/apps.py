from django.apps import AppConfig


class AcquirersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "acquirers"
