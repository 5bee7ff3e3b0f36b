from django.apps import AppConfig


class PaymentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "payments"
    verbose_name = "Cobranças"

    def ready(self) -> None:
        from acquirers import inbound
        from payments import approvals
        from payments.events import charge_event_apply

        # accounts carries out maker-checker actions through this registry.
        approvals.register()

        # acquirers hands the charge events it receives to this app.
        inbound.register("charge", charge_event_apply)
