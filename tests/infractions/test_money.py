"""What a MED infraction does to a merchant's money, through
``infractions.services.infraction_apply`` (the acquirer's record of it):
the cautionary block (charge ``paid → chargeback``, a ``med_hold`` entry,
``AccountBalance.held``), its release on a rejection or cancellation, the
merchant's share of a return (``min(returned, liquid_amount)``, partial and
later ones), a block the balance cannot cover (kept back, never overdrawn),
an infraction without a block (the charge marked, refunds refused), a
refund reserved before the infraction, two infractions on one charge, and
the records nothing matches. After every path the books are exact: the ledger
sums to the balance, ``held`` and ``hold_uncovered`` are the open
infractions' blocks and their uncovered parts (``books``)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.services import ledger_post
from acquirers.adapters.base import InfractionStatus as Rec
from acquirers.models import Acquirer
from infractions.models import Infraction
from infractions.services import infraction_apply
from payments import exceptions as payment_err
from payments.models import Charge, ChargeRefund, ChargeStatus, ChargeTransition
from payments.refunds import charge_refund, charge_refund_pursue
from payments.services import charge_transition
from tests.factories import AccountFactory
from tests.helpers import admin_action, admin_messages
from tests.infractions.conftest import AMOUNT, LIQUID, Books, books, kinds, paid_charge_of, record
from webhooks.models import EventType, WebhookEvent
from withdrawals.exceptions import BusinessRuleError
from withdrawals.services import withdrawal_request

pytestmark = pytest.mark.django_db

CPF = "52998224725"
INSUFFICIENT = "Saldo insuficiente para realizar o saque."
CHARGES = reverse("admin:payments_charge_changelist")


@pytest.fixture
def account(db: Any) -> Account:
    # Fees, so that the merchant's share (liquid_amount) differs from the amount in every assertion.
    return AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150)


def apply(acquirer: Acquirer, rec: Any) -> Infraction:
    infraction = infraction_apply(acquirer=acquirer, record=rec)
    infraction.refresh_from_db()
    return infraction


def status_of(charge: Charge) -> tuple[str, bool]:
    charge.refresh_from_db()
    return charge.status, charge.med_open


def events(account: Account) -> list[tuple[str, str]]:
    """The account's webhook events (type, status), oldest first."""
    return list(WebhookEvent.objects.filter(account=account).order_by("created_at").values_list("event_type", "status"))


def infraction_events(account: Account) -> list[dict[str, Any]]:
    rows = WebhookEvent.objects.filter(account=account, event_type=EventType.INFRACTION).order_by("created_at")
    return [e.data for e in rows]


def withdraw(account: Account, amount: int) -> Any:
    return withdrawal_request(account=account, amount=amount, key_type="cpf", key_value=CPF)


def state(account: Account) -> tuple[Any, ...]:
    """Everything a repeated record or a refusal must leave alone."""
    return (
        books(account),
        list(LedgerEntry.objects.filter(account=account).order_by("id").values_list("id", "kind", "amount")),
        list(Charge.objects.filter(account=account).order_by("pk").values_list("pk", "status", "med_open", "version")),
        list(Infraction.objects.order_by("pk").values_list("pk", "status", "hold", "hold_covered", "debited_amount")),
        WebhookEvent.objects.count(),
        ChargeRefund.objects.count(),
    )


# --------------------------------------------------------------------------- opened with a block


def test_a_block_charges_back_the_charge_and_holds_its_liquid_amount(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    assert books(account) == Books(available=LIQUID, held=0, hold_uncovered=0)

    infraction = apply(acquirer, record(charge))

    # The block is min(blocked, liquid_amount): the platform's fee was never the merchant's.
    assert (infraction.status, infraction.hold, infraction.hold_covered) == ("open", LIQUID, LIQUID)
    assert (infraction.account_id, infraction.charge_id, infraction.holds_charge) == (account.pk, charge.pk, True)
    assert status_of(charge) == (ChargeStatus.CHARGEBACK, True)
    assert kinds(account) == [("charge_paid", LIQUID), ("med_hold", -LIQUID)]
    assert books(account) == Books(available=0, held=LIQUID, hold_uncovered=0)
    # The charge's own event, then the infraction's.
    assert events(account)[1:] == [("transaction", "chargeback"), ("infraction", "opened")]
    opened = infraction_events(account)[0]
    assert opened["event"] == "infraction.opened"
    assert (opened["id"], opened["transaction_id"], opened["e2e_id"]) == (
        str(infraction.pk),
        str(charge.pk),
        charge.e2e_id,
    )
    assert (opened["status"], opened["amount"], opened["blocked_amount"]) == ("open", AMOUNT, LIQUID)
    assert (opened["returned_amount"], opened["debited_amount"], opened["defense"]) == (0, 0, None)


def test_a_partial_block_holds_only_what_the_acquirer_blocked(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    infraction = apply(acquirer, record(charge, blocked=2_500))

    assert (infraction.hold, infraction.hold_covered) == (2_500, 2_500)
    assert status_of(charge) == (ChargeStatus.CHARGEBACK, True)
    assert books(account) == Books(available=LIQUID - 2_500, held=2_500, hold_uncovered=0)


def test_the_same_record_again_changes_nothing(acquirer: Acquirer, account: Account, charge: Charge) -> None:
    first = apply(acquirer, record(charge))
    before = state(account)

    again = apply(acquirer, record(charge))

    assert again.pk == first.pk
    assert state(account) == before
    assert Infraction.objects.count() == 1


def test_in_defense_and_a_new_deadline_follow_the_acquirer_and_move_no_money(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    apply(acquirer, record(charge))
    money = books(account), kinds(account)
    later = record(charge, Rec.IN_DEFENSE).opened_at

    infraction = apply(acquirer, record(charge, Rec.IN_DEFENSE, deadline=later))

    assert (infraction.status, infraction.defense_deadline) == ("in_defense", later)
    assert (books(account), kinds(account)) == money
    assert status_of(charge) == (ChargeStatus.CHARGEBACK, True)


def test_while_blocked_no_other_change_moves_the_charge(acquirer: Acquirer, account: Account, charge: Charge) -> None:
    """A staff refund or a chargeback resolution would count the blocked money twice."""
    apply(acquirer, record(charge))
    before = state(account)

    with pytest.raises(payment_err.TransitionNotAllowed) as resolved:
        charge_transition(
            charge_id=charge.pk, to_status=ChargeStatus.PAID, source=ChargeTransition.Source.STAFF, strict=True
        )
    assert resolved.value.message == payment_err.MED_OPEN
    with pytest.raises(payment_err.TransitionNotAllowed) as refunded:
        charge_refund(charge_id=charge.pk, actor="financeiro")
    assert refunded.value.message == payment_err.REFUND_MED_OPEN
    # The acquirer's late news of the charge is a no-op, not an error.
    assert not charge_transition(charge_id=charge.pk, to_status=ChargeStatus.PAID, source="acquirer")

    assert state(account) == before


# --------------------------------------------------------------------------- closed


@pytest.mark.parametrize("closing", [Rec.REJECTED, Rec.CANCELED])
def test_a_rejection_or_cancellation_releases_the_block(
    acquirer: Acquirer, account: Account, charge: Charge, closing: Rec
) -> None:
    apply(acquirer, record(charge))

    infraction = apply(acquirer, record(charge, closing))

    assert infraction.status == closing.value
    assert infraction.closed_at is not None
    assert infraction.hold_released
    assert (infraction.returned_amount, infraction.debited_amount) == (0, 0)
    assert status_of(charge) == (ChargeStatus.PAID, False)
    assert kinds(account) == [("charge_paid", LIQUID), ("med_hold", -LIQUID), ("med_hold_release", LIQUID)]
    assert books(account) == Books(available=LIQUID, held=0, hold_uncovered=0)
    assert events(account)[1:] == [
        ("transaction", "chargeback"),
        ("infraction", "opened"),
        ("transaction", "paid"),
        ("infraction", "closed"),
    ]
    closed = infraction_events(account)[-1]
    assert (closed["event"], closed["status"]) == ("infraction.closed", closing.value)

    # Closed is closed: the record again, or another status, changes nothing.
    before = state(account)
    apply(acquirer, record(charge, closing))
    apply(acquirer, record(charge, Rec.OPEN))
    assert state(account) == before


def test_a_full_return_debits_the_liquid_amount_not_the_amount(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    apply(acquirer, record(charge))

    infraction = apply(acquirer, record(charge, Rec.ACCEPTED, returned=AMOUNT))

    assert (infraction.status, infraction.returned_amount, infraction.debited_amount) == ("accepted", AMOUNT, LIQUID)
    assert status_of(charge) == (ChargeStatus.REFUNDED, False)
    assert kinds(account) == [
        ("charge_paid", LIQUID),
        ("med_hold", -LIQUID),
        ("med_hold_release", LIQUID),
        ("med_return", -LIQUID),
    ]
    assert books(account) == Books(available=0, held=0, hold_uncovered=0)
    assert events(account)[-2:] == [("transaction", "refunded"), ("infraction", "closed")]
    closed = infraction_events(account)[-1]
    assert (closed["returned_amount"], closed["debited_amount"], closed["status"]) == (AMOUNT, LIQUID, "accepted")


def test_a_partial_return_debits_only_what_went_back(acquirer: Acquirer, account: Account, charge: Charge) -> None:
    apply(acquirer, record(charge))

    infraction = apply(acquirer, record(charge, Rec.ACCEPTED, returned=3_000))

    assert (infraction.returned_amount, infraction.debited_amount) == (3_000, 3_000)
    assert status_of(charge) == (ChargeStatus.REFUNDED, False)
    assert kinds(account, since=3) == [("med_return", -3_000)]
    assert books(account) == Books(available=LIQUID - 3_000, held=0, hold_uncovered=0)


def test_a_later_bigger_return_debits_only_the_difference(acquirer: Acquirer, account: Account, charge: Charge) -> None:
    """MED 2.0 follows the money: more may go back after the close."""
    apply(acquirer, record(charge))
    apply(acquirer, record(charge, Rec.ACCEPTED, returned=3_000))

    infraction = apply(acquirer, record(charge, Rec.ACCEPTED, returned=7_000))
    assert (infraction.returned_amount, infraction.debited_amount) == (7_000, 7_000)
    assert kinds(account, since=3) == [("med_return", -3_000), ("med_return", -4_000)]
    assert books(account) == Books(available=LIQUID - 7_000, held=0, hold_uncovered=0)
    returned = infraction_events(account)[-1]
    assert (returned["event"], returned["returned_amount"], returned["debited_amount"]) == (
        "infraction.returned",
        7_000,
        7_000,
    )

    # Past the liquid amount the merchant's share stops: the fee is the platform's.
    infraction = apply(acquirer, record(charge, Rec.ACCEPTED, returned=AMOUNT))
    assert (infraction.returned_amount, infraction.debited_amount) == (AMOUNT, LIQUID)
    assert kinds(account, since=5) == [("med_return", -(LIQUID - 7_000))]
    assert books(account) == Books(available=0, held=0, hold_uncovered=0)

    # The same report, or a smaller (older) one, moves nothing.
    before = state(account)
    apply(acquirer, record(charge, Rec.ACCEPTED, returned=AMOUNT))
    apply(acquirer, record(charge, Rec.ACCEPTED, returned=5_000))
    assert state(account) == before
    assert status_of(charge) == (ChargeStatus.REFUNDED, False)


def test_accepted_with_nothing_returned_yet_then_a_return_refunds_the_charge(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    """Accepted before the money went back: the block is released and the
    charge paid again; the return reported later takes its share and the
    charge with it, so the merchant cannot refund it a second time."""
    apply(acquirer, record(charge))
    apply(acquirer, record(charge, Rec.ACCEPTED, returned=0))
    assert status_of(charge) == (ChargeStatus.PAID, False)
    assert books(account) == Books(available=LIQUID, held=0, hold_uncovered=0)

    infraction = apply(acquirer, record(charge, Rec.ACCEPTED, returned=4_000))

    assert infraction.debited_amount == 4_000
    assert status_of(charge) == (ChargeStatus.REFUNDED, False)
    assert kinds(account, since=3) == [("med_return", -4_000)]
    assert books(account) == Books(available=LIQUID - 4_000, held=0, hold_uncovered=0)
    assert events(account)[-2:] == [("transaction", "refunded"), ("infraction", "returned")]


def test_first_seen_closed_blocks_and_settles_at_once(acquirer: Acquirer, account: Account, charge: Charge) -> None:
    infraction = apply(acquirer, record(charge, Rec.ACCEPTED, returned=5_000))

    assert (infraction.status, infraction.debited_amount) == ("accepted", 5_000)
    assert status_of(charge) == (ChargeStatus.REFUNDED, False)
    assert books(account) == Books(available=LIQUID - 5_000, held=0, hold_uncovered=0)
    assert [s for t, s in events(account) if t == "infraction"] == ["opened", "closed"]


# --------------------------------------------------------------------------- a block the balance cannot cover


def test_a_block_larger_than_the_balance_debits_what_is_there_and_keeps_the_rest_back(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    withdraw(account, 9_000)  # the merchant moved the money on
    assert books(account).available == LIQUID - 9_000

    infraction = apply(acquirer, record(charge))

    assert (infraction.hold, infraction.hold_covered, infraction.hold_uncovered) == (LIQUID, 820, 9_000)
    assert kinds(account, since=2) == [("med_hold", -820)]
    assert books(account) == Books(available=0, held=LIQUID, hold_uncovered=9_000)
    assert not LedgerEntry.objects.filter(account=account, balance_after__lt=0).exists()

    # A return: the block is released and the share debited, below zero as a chargeback may.
    apply(acquirer, record(charge, Rec.ACCEPTED, returned=AMOUNT))
    assert kinds(account, since=3) == [("med_hold_release", 820), ("med_return", -LIQUID)]
    assert books(account) == Books(available=-9_000, held=0, hold_uncovered=0)
    assert status_of(charge) == (ChargeStatus.REFUNDED, False)


def test_what_is_kept_back_refuses_withdrawals_and_refunds_of_other_charges(
    acquirer: Acquirer, account: Account, charge: Charge, api: APIClient
) -> None:
    withdraw(account, 9_000)
    apply(acquirer, record(charge))
    other = paid_charge_of(account, acquirer)  # money comes in again
    assert books(account) == Books(available=LIQUID, held=LIQUID, hold_uncovered=9_000)
    before = state(account)

    with pytest.raises(BusinessRuleError) as refused:
        withdraw(account, 1_000)
    assert refused.value.message == INSUFFICIENT
    response = api.post(f"/api/transactions/{other.pk}/refund", format="json", headers={"Idempotency-Key": "k1"})
    assert response.status_code == 400, response.content
    assert response.json()["message"] == payment_err.REFUND_INSUFFICIENT_BALANCE
    assert state(account) == before

    # Rejected: nothing is kept back any more; the whole balance is the merchant's again.
    apply(acquirer, record(charge, Rec.REJECTED))
    assert books(account) == Books(available=LIQUID + 820, held=0, hold_uncovered=0)
    withdraw(account, LIQUID + 820)
    assert books(account) == Books(available=0, held=0, hold_uncovered=0)


def test_a_block_on_a_balance_already_below_zero_debits_nothing(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    other = paid_charge_of(account, acquirer)
    withdraw(account, 2 * LIQUID)
    # A chargeback of the other charge takes the balance below zero (decisions §4).
    charge_transition(charge_id=other.pk, to_status=ChargeStatus.CHARGEBACK, source="acquirer")
    assert books(account).available == -LIQUID

    infraction = apply(acquirer, record(charge))

    assert (infraction.hold, infraction.hold_covered) == (LIQUID, 0)
    assert books(account) == Books(available=-LIQUID, held=LIQUID, hold_uncovered=LIQUID)
    apply(acquirer, record(charge, Rec.REJECTED))
    assert books(account) == Books(available=-LIQUID, held=0, hold_uncovered=0)
    assert status_of(charge) == (ChargeStatus.PAID, False)


# --------------------------------------------------------------------------- no block


def test_an_infraction_without_a_block_marks_the_charge_and_refuses_its_refund(
    acquirer: Acquirer, account: Account, charge: Charge, api: APIClient, admin_client: Client
) -> None:
    infraction = apply(acquirer, record(charge, blocked=0))

    assert (infraction.hold, infraction.holds_charge) == (0, True)
    assert status_of(charge) == (ChargeStatus.PAID, True)
    assert kinds(account) == [("charge_paid", LIQUID)]
    assert books(account) == Books(available=LIQUID, held=0, hold_uncovered=0)
    assert [t for t, _ in events(account)] == ["transaction", "infraction"]
    before = state(account)

    response = api.post(f"/api/transactions/{charge.pk}/refund", format="json", headers={"Idempotency-Key": "k1"})
    assert response.status_code == 409, response.content
    assert response.json() == {"success": False, "message": payment_err.REFUND_MED_OPEN, "data": None}
    page = admin_action(admin_client, CHARGES, "mark_chargeback", [charge.pk], reason="MED pelo telefone")
    # Staff are told why; the wording is the back office tests' concern.
    assert len(admin_messages(page)) == 1
    assert state(account) == before

    # Rejected: the mark goes, and with it the refusal.
    apply(acquirer, record(charge, Rec.REJECTED, blocked=0))
    assert status_of(charge) == (ChargeStatus.PAID, False)
    assert books(account) == Books(available=LIQUID, held=0, hold_uncovered=0)


def test_a_return_without_a_block_refunds_the_charge_and_debits_the_share(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    apply(acquirer, record(charge, blocked=0))

    infraction = apply(acquirer, record(charge, Rec.ACCEPTED, blocked=0, returned=AMOUNT))

    assert infraction.debited_amount == LIQUID
    assert status_of(charge) == (ChargeStatus.REFUNDED, False)
    assert kinds(account) == [("charge_paid", LIQUID), ("med_return", -LIQUID)]
    assert books(account) == Books(available=0, held=0, hold_uncovered=0)


# --------------------------------------------------------------------------- nothing to block


def test_an_infraction_on_an_unknown_pix_moves_nothing_and_tells_no_one(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    before = state(account)
    e2e_id = f"E{uuid.uuid4().hex[:31]}"

    infraction = apply(acquirer, record(e2e_id))

    assert (infraction.account_id, infraction.charge_id, infraction.hold) == (None, None, 0)
    assert "não corresponde a nenhuma cobrança" in infraction.note
    closed = apply(acquirer, record(e2e_id, Rec.ACCEPTED, returned=AMOUNT))
    assert (closed.status, closed.debited_amount) == ("accepted", 0)
    assert state(account)[:3] == before[:3]
    assert WebhookEvent.objects.count() == before[4]


def test_an_infraction_on_a_refunded_charge_blocks_nothing(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    charge_transition(charge_id=charge.pk, to_status=ChargeStatus.REFUNDED, source="staff")
    assert books(account).available == 0

    infraction = apply(acquirer, record(charge))

    assert (infraction.hold, infraction.holds_charge) == (0, False)
    assert "estava estornada" in infraction.note.lower(), infraction.note
    assert status_of(charge) == (ChargeStatus.REFUNDED, False)
    assert books(account) == Books(available=0, held=0, hold_uncovered=0)

    # Its return was the refund already: not debited twice.
    closed = apply(acquirer, record(charge, Rec.ACCEPTED, returned=AMOUNT))
    assert closed.debited_amount == 0
    assert closed.note
    assert books(account) == Books(available=0, held=0, hold_uncovered=0)


def test_a_second_infraction_on_a_held_charge_blocks_nothing_more(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    apply(acquirer, record(charge))

    second = apply(acquirer, record(charge, external_id="inf-2"))

    assert (second.hold, second.holds_charge) == (0, False)
    assert "Outra infração" in second.note
    assert books(account) == Books(available=0, held=LIQUID, hold_uncovered=0)
    # Its close does not move the charge the first one holds.
    apply(acquirer, record(charge, Rec.REJECTED, external_id="inf-2"))
    assert status_of(charge) == (ChargeStatus.CHARGEBACK, True)
    assert books(account) == Books(available=0, held=LIQUID, hold_uncovered=0)


def test_an_unusable_record_is_refused(acquirer: Acquirer, account: Account, charge: Charge) -> None:
    before = state(account)
    for bad in (record(charge, amount=0), record(charge, external_id=""), record("")):
        with pytest.raises(ValueError, match="unusable"):
            infraction_apply(acquirer=acquirer, record=bad)
    assert state(account) == before


def test_other_accounts_money_is_untouched(acquirer: Acquirer, account: Account, charge: Charge) -> None:
    neighbour = AccountFactory()
    with transaction.atomic():
        ledger_post(account_id=neighbour.pk, amount=5_000, kind="charge_paid", reference="seed:neighbour")

    apply(acquirer, record(charge))
    apply(acquirer, record(charge, Rec.ACCEPTED, returned=AMOUNT))

    assert books(neighbour) == Books(available=5_000, held=0, hold_uncovered=0)
    assert not WebhookEvent.objects.filter(account=neighbour).exists()


def test_a_refund_in_flight_when_an_infraction_opens_goes_on_as_it_would(
    acquirer: Acquirer, account: Account, charge: Charge, api: APIClient
) -> None:
    """The refund's reservation already keeps the money back and the acquirer
    may be making it: the infraction blocks nothing and does not hold the
    charge (releasing the reservation for a block would leave a devolução
    made meanwhile with nothing to debit); the refund ends as it would."""
    response = api.post(f"/api/transactions/{charge.pk}/refund", format="json", headers={"Idempotency-Key": "k1"})
    assert response.status_code == 202, response.content
    refund = ChargeRefund.objects.get(charge=charge)

    infraction = apply(acquirer, record(charge))
    assert (infraction.holds_charge, infraction.hold) == (False, 0)
    assert "Estorno em processamento" in infraction.note
    assert status_of(charge) == (ChargeStatus.PAID, False)
    assert books(account) == Books(available=0, held=0, hold_uncovered=0)

    charge_refund_pursue(refund_id=refund.pk)  # the acquirer made it

    assert status_of(charge) == (ChargeStatus.REFUNDED, False)
    assert ChargeRefund.objects.get(pk=refund.pk).status == ChargeRefund.Status.DONE
    assert kinds(account) == [
        ("charge_paid", LIQUID),
        ("refund_hold", -LIQUID),
        ("refund_release", LIQUID),
        ("charge_refund", -LIQUID),
    ]
    assert books(account) == Books(available=0, held=0, hold_uncovered=0)


def test_a_return_on_top_of_a_refund_in_flight_is_left_to_staff(
    acquirer: Acquirer, account: Account, charge: Charge, api: APIClient
) -> None:
    """The payer's bank returned the Pix while the merchant's refund was in
    flight: the merchant is debited once (by its refund), never a second time
    by the MED; the infraction says so for staff."""
    response = api.post(f"/api/transactions/{charge.pk}/refund", format="json", headers={"Idempotency-Key": "k1"})
    assert response.status_code == 202, response.content
    apply(acquirer, record(charge))

    closed = apply(acquirer, record(charge, Rec.ACCEPTED, returned=AMOUNT))

    assert (closed.returned_amount, closed.debited_amount) == (AMOUNT, 0)
    assert "a equipe decide" in closed.note
    assert status_of(charge) == (ChargeStatus.PAID, False)
    assert ChargeRefund.objects.get(charge=charge).status == ChargeRefund.Status.PROCESSING
    assert kinds(account) == [("charge_paid", LIQUID), ("refund_hold", -LIQUID)]
    assert books(account) == Books(available=0, held=0, hold_uncovered=0)


def test_a_later_return_leaves_a_charge_another_infraction_holds_to_that_one(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    """Accepted with nothing returned, the charge is paid again and a second
    infraction (no block) holds it; the first one's later return is debited
    but does not move the charge, which the second one closes."""
    apply(acquirer, record(charge))
    apply(acquirer, record(charge, Rec.ACCEPTED, returned=0))
    apply(acquirer, record(charge, external_id="inf-2", blocked=0))

    apply(acquirer, record(charge, Rec.ACCEPTED, returned=3_000))
    assert status_of(charge) == (ChargeStatus.PAID, True)
    assert books(account) == Books(available=LIQUID - 3_000, held=0, hold_uncovered=0)

    second = apply(acquirer, record(charge, Rec.ACCEPTED, external_id="inf-2", blocked=0, returned=5_000))
    assert second.debited_amount == 5_000
    assert status_of(charge) == (ChargeStatus.REFUNDED, False)
    assert kinds(account, since=3) == [("med_return", -3_000), ("med_return", -5_000)]
    assert books(account) == Books(available=LIQUID - 8_000, held=0, hold_uncovered=0)


def test_returns_of_several_infractions_on_one_pix_take_its_liquid_amount_once_in_all(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    """Two infractions on the same Pix, each reporting it all returned: the
    merchant was credited the charge's liquid amount once, and is debited it
    once (the acquirer's overlap is staff's to take up, not the merchant's)."""
    apply(acquirer, record(charge))
    apply(acquirer, record(charge, Rec.ACCEPTED, returned=0))
    apply(acquirer, record(charge, external_id="inf-2", blocked=0))
    apply(acquirer, record(charge, Rec.ACCEPTED, returned=AMOUNT))
    second = apply(acquirer, record(charge, Rec.ACCEPTED, external_id="inf-2", blocked=0, returned=AMOUNT))

    assert second.debited_amount == 0
    assert status_of(charge) == (ChargeStatus.REFUNDED, False)
    assert kinds(account, since=3) == [("med_return", -LIQUID)]
    assert books(account) == Books(available=0, held=0, hold_uncovered=0)


def test_an_infraction_seen_before_its_pix_was_recorded_here_is_linked_once_it_is(
    acquirer: Acquirer, account: Account, charge: Charge
) -> None:
    """The charge's "paid" notification was lost: the acquirer's listing brings
    the infraction first, matching no charge. Once reconciliation records the
    payment, the next sight of the infraction links it and blocks the money,
    and the merchant is told (it can see it and defend it)."""
    late_e2e = "E" + "7" * 31
    unmatched = apply(acquirer, record(late_e2e, amount=AMOUNT))
    assert (unmatched.account_id, unmatched.charge_id, unmatched.hold) == (None, None, 0)
    Charge.objects.filter(pk=charge.pk).update(e2e_id=late_e2e)  # the payment, as reconciliation records it

    linked = apply(acquirer, record(late_e2e, amount=AMOUNT))

    assert (linked.pk, linked.account_id, linked.charge_id, linked.hold) == (
        unmatched.pk,
        account.pk,
        charge.pk,
        LIQUID,
    )
    assert status_of(charge) == (ChargeStatus.CHARGEBACK, True)
    assert books(account) == Books(available=0, held=LIQUID, hold_uncovered=0)
    assert (
        WebhookEvent.objects.filter(event_type=EventType.INFRACTION, record_id=linked.pk, status="opened").count() == 1
    )
