"""Back office for accounts, one module per thing administered: accounts
(``accounts``, with its form, ``account_form``, and status changes,
``account_status``), API credentials (``credentials``), account change
requests (``changes``), maker-checker money actions (``money_actions``, the
queue both share: ``decisions``), the daily settlement (``settlement``), and
balances and the ledger (``ledger``). Importing registers them."""

from accounts.admin import accounts, changes, credentials, ledger, money_actions, settlement

__all__ = ["accounts", "changes", "credentials", "ledger", "money_actions", "settlement"]
