from django.apps import AppConfig


class PaymentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "payments"
    verbose_name = "Cobranças"

    def ready(self) -> None:
        from accounts.selectors import statement_detail_register, statement_reference_register
        from accounts.settlement import settlement_fee_register
        from acquirers import inbound
        from payments import approvals
        from payments.events import charge_event_apply
        from payments.selectors import (
            SETTLEMENT_CHARGE_FEE,
            STATEMENT_DUE_COMPONENTS,
            STATEMENT_LATE_PAYMENT,
            STATEMENT_REFUND,
        )

        # accounts carries out maker-checker actions through this registry.
        approvals.register()

        # acquirers hands the charge events it receives to this app.
        inbound.register("charge", charge_event_apply)

        # The statement (GET /api/statement) shows a refund's entries as its charge's.
        statement_reference_register(STATEMENT_REFUND)
        # ...and a late payment's credit as the charge's that received the Pix.
        statement_reference_register(STATEMENT_LATE_PAYMENT)
        # ...and a due-date charge's credit with what was paid, by component.
        statement_detail_register(STATEMENT_DUE_COMPONENTS)

        # The settlement (accounts.settlement) shows the fee netted out of a paid charge's credit.
        settlement_fee_register(SETTLEMENT_CHARGE_FEE)
