from django.apps import AppConfig


class RecurrencesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "recurrences"
    verbose_name = "Pix Automático"

    def ready(self) -> None:
        # A cycle's charge is a payments.Charge of kind "recurring": payments
        # learns from here how its webhook reads (payments sits below us).
        from acquirers import inbound
        from recurrences import payloads
        from recurrences.inbound import recurrence_changed

        payloads.register()
        # acquirers hands the recurrence and cycle events it receives (wake-ups) to this app.
        inbound.register("recurrence", recurrence_changed)
