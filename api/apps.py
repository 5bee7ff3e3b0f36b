from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    # The label the idempotency records were created under: their table and
    # migration history stay as they are.
    label = "pix_service"
    verbose_name = "API"
