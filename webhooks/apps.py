from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "webhooks"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        from celery.signals import worker_init

        from webhooks import capacity, checks  # noqa: F401 - checks registers the system checks

        # An account's share of the delivery capacity is of the threads the
        # worker really runs (capacity.account_cap).
        worker_init.connect(capacity.worker_started, weak=False)
