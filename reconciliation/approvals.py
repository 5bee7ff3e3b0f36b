"""The reconciliation item's money action that waits for a second staff
member (``accounts.approvals``): the redébito of a refund the acquirer made
after a chargeback had returned the money (:mod:`reconciliation.redebits`).
The payout's redébito names its withdrawal and is withdrawals' own."""

from __future__ import annotations

from accounts import approvals
from accounts.models import MoneyActionRequest
from reconciliation.redebits import charge_refund_redebit, refund_redebit_quote


def _quote_refund_redebit(target_id: str) -> approvals.Quote:
    # What the payer got beyond the Pix, pro rata to the liquid amount (reconciliation.redebits).
    quote = refund_redebit_quote(item_id=target_id)
    return approvals.Quote(account_id=quote.account_id, amount=quote.amount)


def _refund_redebit(target_id: str, actor: str, reason: str) -> None:
    charge_refund_redebit(item_id=target_id, actor=actor, reason=reason)


def register() -> None:
    # The acquirer made a refund after a chargeback had returned the money
    # (the day's run, or the check of the released refund): what the payer
    # got twice is debited only once a second staff member approves. The
    # request names the item whose evidence measures it.
    approvals.register(
        approvals.MoneyAction(
            action=MoneyActionRequest.Action.REDEBIT_REFUND_AFTER_CHARGEBACK,
            target_type="reconciliation.reconciliationitem",
            approve_permission="accounts.approve_refund_after_chargeback_redebit",
            quote=_quote_refund_redebit,
            perform=_refund_redebit,
        )
    )
