"""Creating a due-date charge (API Pix ``cobv``) through the acquirer chain.

The same rules and chain as an immediate charge (``payments.services``):
the override's rules (422), the account's method and the limits on the
original amount (400, the spec's messages), then one guarded call per
acquirer that can hold a cobv, first taker wins. The charge row, its terms
and every attempt are written together once an acquirer took it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from accounts.fees import cashin_fee
from accounts.models import Account, PaymentMethod
from acquirers.adapters.base import DueChargeRequest, DueChargeResult
from acquirers.chain import ChainResult, run_due_charge_chain
from acquirers.selectors import due_chain
from core.exceptions import ValidationFailed
from payments import exceptions as err
from payments.choices import ChargeKind
from payments.due_amounts import amount_due, last_payable_day
from payments.due_models import DueCharge
from payments.due_payments import BRT, now_in_brazil
from payments.due_terms import DueTerms, InvalidDueTerms, centavos_to_api
from payments.models import Charge
from payments.services import (
    CANCEL_DUE_CHARGE,
    MAX_AMOUNT,
    MIN_NET_AMOUNT,
    Buyer,
    OverrideItem,
    charge_store,
    resolve_override,
)

#: Our request's names for the terms → API Pix's (the inner objects are API Pix's own).
TERM_FIELDS = {"fine": "multa", "interest": "juros", "rebate": "abatimento", "discount": "desconto"}
#: API Pix's JSON paths (InvalidDueTerms.field) → our request's field names.
_FIELD_NAMES = {
    "calendario.dataDeVencimento": "due_date",
    "calendario.validadeAposVencimento": "days_after_due",
    "valor.original": "amount",
    **{f"valor.{api}": ours for ours, api in TERM_FIELDS.items()},
}
NOT_PAYABLE = "A cobrança já não poderia ser paga: o vencimento mais os dias após o vencimento já passaram."


def _our_field(path: str) -> str:
    for api, ours in sorted(_FIELD_NAMES.items(), key=lambda item: -len(item[0])):
        if path == api or path.startswith(api + "."):
            return ours + path[len(api) :]
    return path


def due_terms_build(
    *, amount: int, due_date: dt.date, days_after_due: int, terms: Mapping[str, Mapping[str, Any] | None]
) -> DueTerms:
    """The terms of a request in API Pix's shapes (``fine`` → ``multa``...),
    validated as API Pix validates a cobv; a violation is a 422 under our
    field's name. ``terms``: our names → API Pix's inner objects."""
    valor: dict[str, Any] = {"original": centavos_to_api(amount)}
    for ours, api in TERM_FIELDS.items():
        if terms.get(ours) is not None:
            valor[api] = terms[ours]
    body = {
        "calendario": {"dataDeVencimento": due_date.isoformat(), "validadeAposVencimento": days_after_due},
        "valor": valor,
    }
    try:
        return DueTerms.from_api(body)
    except InvalidDueTerms as exc:
        raise ValidationFailed({_our_field(exc.field): [exc.message]}) from exc


#: How long after its last payable day a due-date charge waits before the
#: expiry sweep cancels it: a Pix paid at 23:59 of that day is the payer's
#: right, and its notification (or the status poll, every few minutes) must
#: find the charge pending, not cancelled (a late payment for staff).
DUE_EXPIRY_GRACE = dt.timedelta(hours=1)


def expires_at_of(last_day: dt.date) -> dt.datetime:
    """When the expiry sweep cancels the charge (and asks the acquirer to
    withdraw it): the end of the last payable day, Brasília time, plus
    :data:`DUE_EXPIRY_GRACE`."""
    return dt.datetime.combine(last_day + dt.timedelta(days=1), dt.time.min, tzinfo=BRT) + DUE_EXPIRY_GRACE


def due_charge_check(*, account: Account, terms: DueTerms) -> int:
    """Every rule that can refuse the charge before an acquirer is called;
    returns the platform's fee on the original amount."""
    today = now_in_brazil()
    if last_payable_day(terms) < today:
        raise ValidationFailed({"due_date": [NOT_PAYABLE]})
    if PaymentMethod.PIX not in account.payment_methods:
        raise err.BusinessRuleError(err.METHOD_NOT_ENABLED)
    if terms.original > MAX_AMOUNT:
        raise err.BusinessRuleError(err.AMOUNT_ABOVE_MAX)
    # The spec's floor on what is left after the fee holds for the lowest
    # amount the payer could pay (the largest rebate and discount), not only the original.
    lowest = lowest_amount(terms, today)
    if lowest - cashin_fee(account, lowest) < MIN_NET_AMOUNT:
        raise err.BusinessRuleError(err.NET_BELOW_MIN)
    return cashin_fee(account, terms.original)


def lowest_amount(terms: DueTerms, today: dt.date) -> int:
    """The least a payer could pay from ``today``: discounts only shrink
    with time (per-day ones are largest today, a fixed date's until it
    passes), so the least is today, on a fixed discount date or on the due date."""
    days = {today, terms.data_de_vencimento}
    if terms.desconto is not None:
        days |= {tier.data for tier in terms.desconto.datas_fixas}
    return min(amount_due(terms, on=day).final for day in days if day >= today)


def due_charge_request(
    *, charge_id: uuid.UUID, terms: DueTerms, debtor: Buyer, email: str = "", description: str = ""
) -> DueChargeRequest:
    """The cobv an acquirer is asked for: its txid is the charge's id, so a
    request repeated after a lost answer asks for the same cobv."""
    address = debtor.address
    return DueChargeRequest(
        charge_id=charge_id,
        txid=charge_id.hex,
        due_date=terms.data_de_vencimento,
        validity_after_due=terms.validade_apos_vencimento,
        debtor_name=debtor.name,
        debtor_document=debtor.document,
        valor=terms.to_api()["valor"],
        description=description,
        logradouro=address.get("street", ""),
        cidade=address.get("city", ""),
        uf=address.get("state", ""),
        cep=address.get("zip_code", ""),
        email=email,
    )


def due_charge_rows(
    *,
    account: Account,
    request: DueChargeRequest,
    outcome: ChainResult[DueChargeResult],
    terms: DueTerms,
    debtor: Buyer,
    platform_tax: int,
    email: str = "",
    description: str = "",
    postback_url: str = "",
    metadata: Mapping[str, Any] | None = None,
) -> tuple[Charge, DueCharge] | None:
    """The charge and its terms as stored once an acquirer took ``request``
    (None when none did), for :func:`payments.services.charge_store`."""
    if outcome.result is None or outcome.acquirer is None:
        return None
    last_day = last_payable_day(terms)
    charge = Charge(
        id=request.charge_id,
        account=account,
        kind=ChargeKind.DUE,
        payment_method=PaymentMethod.PIX,
        amount=terms.original,
        platform_tax=platform_tax,
        liquid_amount=terms.original - platform_tax,
        txid=request.txid,
        emv=outcome.result.emv,
        acquirer=outcome.acquirer,
        provider_charge_id=outcome.result.provider_charge_id,
        buyer_name=debtor.name,
        buyer_document=debtor.document,
        buyer_phone=debtor.phone,
        buyer_address=dict(debtor.address),
        postback_url=postback_url,
        metadata=dict(metadata or {}),
        expires_at=expires_at_of(last_day),
    )
    due = DueCharge(
        charge=charge,
        terms=terms.to_api(),
        original=terms.original,
        due_date=terms.data_de_vencimento,
        last_payable_date=last_day,
        description=description,
        debtor_email=email,
    )
    return charge, due


def due_charge_create(
    *,
    account: Account,
    terms: DueTerms,
    debtor: Buyer,
    email: str = "",
    description: str = "",
    override: Sequence[OverrideItem] | None = None,
    postback_url: str = "",
    metadata: Mapping[str, Any] | None = None,
    in_transaction: Callable[[Charge], None] | None = None,
    charge_id: uuid.UUID | None = None,
    hold_unclear: bool = False,
) -> Charge:
    """Create a due-date charge; ``charge_id`` given by a batch (its item's
    id: a retried item asks the acquirer for the same txid, never a second
    charge). Raises as ``payments.services.charge_create`` does.
    ``hold_unclear`` (a batch item, tried again later with the same txid):
    when no acquirer took it, one that may hold the cobv is not asked to
    withdraw it: the next try may take that very cobv, and the item
    withdraws it itself if it is given up or stored elsewhere."""
    chosen = resolve_override(account=account, items=override) if override else None
    platform_tax = due_charge_check(account=account, terms=terms)
    request = due_charge_request(
        charge_id=charge_id or uuid.uuid4(), terms=terms, debtor=debtor, email=email, description=description
    )
    outcome = run_due_charge_chain(due_chain(account, terms.original, chosen), request)
    if hold_unclear and outcome.acquirer is None:
        outcome.to_cancel = []
    rows = due_charge_rows(
        account=account,
        request=request,
        outcome=outcome,
        terms=terms,
        debtor=debtor,
        platform_tax=platform_tax,
        email=email,
        description=description,
        postback_url=postback_url,
        metadata=metadata,
    )
    return charge_store(
        charge=rows[0] if rows else None,
        account=account,
        outcome=outcome,
        txid=request.txid,
        in_transaction=in_transaction,
        also=rows[1:] if rows else [],
        cancel=CANCEL_DUE_CHARGE,
    )
