from django.apps import AppConfig


class WithdrawalsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "withdrawals"
    verbose_name = "Saques"

    def ready(self) -> None:
        from accounts.services import account_on_reactivated
        from accounts.settlement import settlement_fee_register
        from acquirers import inbound
        from withdrawals import approvals
        from withdrawals.events import payout_event_apply
        from withdrawals.polling import withdrawals_resume_held
        from withdrawals.selectors import SETTLEMENT_WITHDRAWAL_FEES

        # accounts carries out maker-checker actions through this registry.
        approvals.register()

        # Payouts held because of their account go out as soon as it may cash out again.
        account_on_reactivated(withdrawals_resume_held)

        # acquirers hands the payout events it receives to this app.
        inbound.register("payout", payout_event_apply)

        # The settlement (accounts.settlement) shows the fees inside withdrawals' debits and reversals.
        for fee in SETTLEMENT_WITHDRAWAL_FEES:
            settlement_fee_register(fee)
