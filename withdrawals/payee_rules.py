"""The payee check's rules, with no I/O (docs/api/payee-check.md): which
document a withdrawal's key must belong to, what refuses a request before
any lookup, and when the owner the DICT disclosed matches.

Imported by the request (:mod:`withdrawals.services`) and by the check
itself (:mod:`withdrawals.payees`)."""

from __future__ import annotations

from accounts.models import Account
from core.documents import mask_document, normalize_document
from core.exceptions import BusinessRuleError
from withdrawals import exceptions as err
from withdrawals.models import PixKeyType

#: Keys that are a document: their owner is that document, no lookup needed to refuse.
DOCUMENT_KEYS = (PixKeyType.CPF, PixKeyType.CNPJ)


def expected_document(*, account: Account, payee_document: str) -> str:
    """The document the key must belong to ("" when no check is due): the
    account holder's own when the account pays out to itself only, else the
    one the withdrawal gave."""
    if account.payouts_same_ownership_only:
        return account.document or "-"  # none registered: nothing can match
    return payee_document


def refuse_at_request(*, account: Account, key_type: str, key_value: str, payee_document: str) -> None:
    """400 before anything else, without a lookup: a CPF/CNPJ key is owned
    by that document, so one that is not the expected document never will be."""
    if account.payouts_same_ownership_only:
        own = account.document
        if not own or (payee_document and payee_document != own):
            raise BusinessRuleError(err.SAME_OWNERSHIP_ONLY)
        if key_type in DOCUMENT_KEYS and (normalize_document(key_value) or key_value) != own:
            raise BusinessRuleError(err.SAME_OWNERSHIP_ONLY)
    if payee_document and key_type in DOCUMENT_KEYS and (normalize_document(key_value) or key_value) != payee_document:
        raise BusinessRuleError(err.KEY_NOT_PAYEE)


def matches(expected: str, disclosed: str) -> bool:
    """Whether the owner the DICT disclosed has the expected document: the
    same length, and every character it shows equal (``*`` hides one: a
    natural person's CPF comes as ``***456789**``, the six middle digits)."""
    disclosed = disclosed.upper()
    if not expected or len(expected) != len(disclosed) or disclosed.count("*") == len(disclosed):
        return False
    return all(shown == "*" or shown == wanted for shown, wanted in zip(disclosed, expected.upper(), strict=True))


def shown(disclosed: str) -> str:
    """The owner's document as staff and the API see it: a CPF always
    masked to the DICT's six middle digits (even if a PSP disclosed more),
    formatted; a CNPJ (a company's, public) formatted in full."""
    return mask_document(disclosed, cnpj_in_full=True)[:18]
