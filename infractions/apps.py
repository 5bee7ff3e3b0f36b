from django.apps import AppConfig


class InfractionsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "infractions"
    verbose_name = "Infrações (MED)"
