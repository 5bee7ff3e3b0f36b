"""What the Pix Automático service tests share: an account with fees, a
sandbox acquirer of its own (the sandbox keeps state in Redis across
tests), terms built as the API builds them, a simulated clock (noon in
Brasília of a given day), and the sandbox's payer's bank driven by hand."""

from __future__ import annotations

import datetime as dt
import uuid

from accounts.models import Account
from accounts.selectors import available_balance, ledger_sum
from acquirers import adapters
from acquirers.adapters.sandbox import SandboxAdapter, new_e2e_id
from acquirers.models import Acquirer
from payments.due_payments import BRT
from payments.recurrence_terms import (
    Calendario,
    Devedor,
    Periodicidade,
    PoliticaRetentativa,
    RecurrenceTerms,
    ValorRecorrencia,
    Vinculo,
)
from recurrences.models import Cycle, Recurrence
from recurrences.outcomes import cycle_apply
from recurrences.services import recurrence_apply
from tests.factories import AccountFactory, AcquirerFactory

FEE_FIXED, FEE_BPS = 30, 150
AMOUNT = 4990
PAYER_ISPB = "60746948"


def fee(amount: int) -> int:
    return min(FEE_FIXED + (amount * FEE_BPS + 5000) // 10000, amount)


def make_account() -> Account:
    return AccountFactory(cashin_fee_fixed=FEE_FIXED, cashin_fee_bps=FEE_BPS)


def make_acquirer(**options: str) -> Acquirer:
    return AcquirerFactory(
        key=f"sbx_rec_{uuid.uuid4().hex[:10]}",
        default_priority=1,
        options={"charge": "ok", "payout": "ok", **options},
    )


def noon(day: dt.date, hour: int = 12) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(hour, 0), tzinfo=BRT)


def terms(
    *,
    first_due: dt.date,
    cycles: int | None = 12,
    amount: int | None = AMOUNT,
    max_amount: int | None = None,
    retries: bool = True,
    contract: str = "ASSINATURA-1",
    document: str = "52998224725",
) -> RecurrenceTerms:
    """Monthly terms from ``first_due``, ``cycles`` of them (None: open-ended)."""
    last = None
    if cycles is not None:
        month = first_due.month - 1 + cycles - 1
        last = first_due.replace(year=first_due.year + month // 12, month=month % 12 + 1)
    return RecurrenceTerms(
        vinculo=Vinculo(contrato=contract, devedor=Devedor(nome="Maria da Silva", cpf=document), objeto="Plano Pro"),
        calendario=Calendario(data_inicial=first_due, periodicidade=Periodicidade.MENSAL, data_final=last),
        politica_retentativa=PoliticaRetentativa.PERMITE_3R_7D if retries else PoliticaRetentativa.NAO_PERMITE,
        valor=ValorRecorrencia(valor_rec=amount, valor_minimo_recebedor=max_amount),
    )


def sandbox(acquirer: Acquirer) -> SandboxAdapter:
    adapter = adapters.build(acquirer)
    assert isinstance(adapter, SandboxAdapter)
    return adapter


def approve(recurrence: Recurrence, *, at: dt.datetime) -> None:
    """The payer authorises it at their bank, and the service hears of it."""
    state = sandbox(recurrence.acquirer).recurrence_approve(recurrence.id_rec, payer_ispb=PAYER_ISPB)
    recurrence_apply(recurrence_id=recurrence.pk, state=state, now=at)


def scheduled_on(cycle: Cycle) -> dt.date | None:
    """The day of the cobr's attempt the payer's bank is to settle, if any."""
    state = sandbox(cycle.recurrence.acquirer).cycle_charge_status(cycle.txid)
    days = [a.settles_on for a in state.attempts if a.status == "AGENDADA"]
    return days[-1] if days else None


def settle(cycle: Cycle, *, on: dt.date, paid: bool) -> None:
    """The payer's bank settles (or refuses) the attempt of ``on``; the service
    learns of it on its next read (the beat), not here."""
    adapter = sandbox(cycle.recurrence.acquirer)
    if paid:
        assert adapter.cycle_settle(cycle.txid, on=on, e2e_id=new_e2e_id(at=noon(on)), at=noon(on)) is not None
    else:
        assert adapter.cycle_fail(cycle.txid, on=on) is not None


def apply_now(cycle: Cycle, today: dt.date) -> None:
    """Apply what the sandbox holds of the cycle's cobr at once (a notification would)."""
    cycle_apply(
        cycle_id=cycle.pk, state=sandbox(cycle.recurrence.acquirer).cycle_charge_status(cycle.txid), today=today
    )


def assert_ledger_is_balance(account: Account) -> None:
    assert ledger_sum(account) == available_balance(account)
