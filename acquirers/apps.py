from django.apps import AppConfig


class AcquirersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "acquirers"
    verbose_name = "Adquirentes"

    def ready(self) -> None:
        from acquirers import checks  # noqa: F401 - registers the system checks
        from acquirers.models import Acquirer, AcquirerGrant, AcquirerSlot
        from core.snapshots import watch

        watch(Acquirer, AcquirerGrant, AcquirerSlot)
