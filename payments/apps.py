from django.apps import AppConfig


class PaymentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "payments"

    def ready(self) -> None:
        from payments import approvals

        # accounts carries out maker-checker actions through this registry.
        approvals.register()
