from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    # The label the idempotency records were created under: their table and
    # migration history stay as they are.
    label = "pix_service"
    verbose_name = "API"

    def ready(self) -> None:
        from django.core import checks

        from core.middleware import check_site_middleware

        checks.register(check_site_middleware)
