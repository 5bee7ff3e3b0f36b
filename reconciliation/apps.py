from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "reconciliation"
    verbose_name = "Conciliação"

    def ready(self) -> None:
        from payments.reports import reports_register
        from reconciliation import approvals
        from reconciliation.reports import late_returned_store, refund_made_store

        # accounts carries out maker-checker actions through this registry.
        approvals.register()

        # What payments learns outside a daily run becomes an item for staff here.
        reports_register(late_returned=late_returned_store, refund_made=refund_made_store)
