from django.apps import AppConfig


class RecurrencesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "recurrences"
    verbose_name = "Pix Automático"

    def ready(self) -> None:
        # A cycle's charge is a payments.Charge of kind "recurring": payments
        # learns from here how its webhook reads (payments sits below us).
        from recurrences import payloads

        payloads.register()
