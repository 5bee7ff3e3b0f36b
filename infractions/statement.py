"""What infractions add to the account's statement, registered from the app's
``AppConfig.ready`` (accounts cannot import this app)."""

from __future__ import annotations


def register() -> None:
    """The statement (``GET /api/statement`` and its CSV) shows a MED block,
    its release and a return as entries of the disputed charge, as it shows a
    refund's: ``record`` is that ``transaction``."""
    from accounts.selectors import statement_reference_register
    from infractions.selectors import STATEMENT_INFRACTION

    statement_reference_register(STATEMENT_INFRACTION)
