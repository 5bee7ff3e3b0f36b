from django.apps import AppConfig


class InfractionsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "infractions"
    verbose_name = "Infrações (MED)"

    def ready(self) -> None:
        from acquirers import inbound
        from infractions import statement
        from infractions.inbound import infraction_changed

        # acquirers hands the infraction events it receives (a wake-up) to this app.
        inbound.register("infraction", infraction_changed)

        # The statement (GET /api/statement) shows MED entries as their charge's.
        statement.register()
