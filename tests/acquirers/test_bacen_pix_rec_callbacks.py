"""Pix Automático's callbacks at ``bacen_pix`` (``{webhookUrl}/rec`` and
``{webhookUrl}/cobr``) through our real routes with the URL's token, the
service's rows made by its own services, the PSP the validating fake on
loopback (every request, answer and callback body checked against Banco
Central's OpenAPI 2.9.0).

A callback is a wake-up: the recurrence or the cycle it names is read at
the PSP (``GET /rec``, ``GET /cobr``) and the PSP's answer applied; the
body's own word (a status, a Pix) moves nothing.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from accounts.selectors import available_balance, ledger_sum
from acquirers.adapters.apipix.bacen import DEFAULT_SCOPES, MAX_PIX_PER_NOTIFICATION
from acquirers.adapters.apipix.rec_records import REC_SCOPES
from acquirers.exceptions import UnknownNotificationRecord
from acquirers.models import Acquirer, InboundNotification
from payments.choices import ChargeStatus
from payments.due_payments import now_in_brazil
from recurrences.cycles import cycle_send, cycles_open
from recurrences.models import Cycle, CycleStatus, Journey, Recurrence, RecurrenceStatus
from recurrences.services import recurrence_create
from tests.acquirers.conftest import NOTIFY_TOKEN, bacen_options
from tests.acquirers.fake_psp import FakePsp
from tests.acquirers.fake_psp_rec import (
    PAYER_ISPB,
    approve_rec,
    checked_callback,
    cobr_callback_body,
    pay_cobr,
    rec_callback_body,
    schedule_cobr,
)
from tests.recurrences.support import fee, terms
from webhooks.models import EventType, WebhookEvent

pytestmark = pytest.mark.django_db
SCOPES = [*DEFAULT_SCOPES, *REC_SCOPES]
ACCOUNT = {"receiver_account": "012682", "receiver_account_type": "CORRENTE", "receiver_branch": "9708"}
AMOUNT = 4990
Status = InboundNotification.Status


@pytest.fixture
def bacen(make_bacen_acquirer: Callable[..., Acquirer], fake_psp: FakePsp) -> Acquirer:
    return make_bacen_acquirer(default_priority=1, options=bacen_options(fake_psp, scopes=SCOPES, **ACCOUNT))


@pytest.fixture
def other_bacen(make_bacen_acquirer: Callable[..., Acquirer], fake_psp: FakePsp) -> Acquirer:
    """A second API Pix acquirer (same PSP here, same token variable): its URL must not wake the first's records."""
    return make_bacen_acquirer("bacen_other", options=bacen_options(fake_psp, scopes=SCOPES, **ACCOUNT))


def callback(acquirer: Acquirer, suffix: str, payload: dict[str, Any], *, token: str = NOTIFY_TOKEN) -> Any:
    """POST the body as the PSP would, to ``{registered URL}/{suffix}``."""
    url = f"/api/acquirers/{acquirer.key}/notifications/{token}/{suffix}"
    return APIClient().post(url, data=json.dumps(payload), content_type="application/json")


def processed(response: Any, count: int) -> None:
    assert response.status_code == 200, response.content
    assert response.json()["data"] == {"processed": count}


def last_inbound() -> InboundNotification:
    return InboundNotification.objects.latest("id")


def created(account: Account, acquirer: Acquirer, *, contract: str = "ASSINATURA-1") -> Recurrence:
    """A QR-journey recurrence at ``acquirer`` (``POST /locrec``, ``POST /rec``), first due in 5 days."""
    return recurrence_create(
        account=account,
        terms=terms(first_due=now_in_brazil() + dt.timedelta(days=5), contract=contract, amount=AMOUNT),
        journey=Journey.QR,
        override=[acquirer],
    )


def approved(psp: FakePsp, account: Account, acquirer: Acquirer) -> Recurrence:
    """Created, approved at the payer's PSP, and heard of through the /rec callback."""
    recurrence = created(account, acquirer)
    approve_rec(psp, recurrence.id_rec)
    processed(callback(acquirer, "rec", rec_callback_body(psp, [recurrence.id_rec])), 1)
    recurrence.refresh_from_db()
    assert recurrence.status == RecurrenceStatus.APPROVED
    return recurrence


def sent_cycle(recurrence: Recurrence) -> Cycle:
    """The first cycle opened and its cobr sent (``PUT /cobr/{txid}``)."""
    today = now_in_brazil()
    (cycle_id,) = cycles_open(recurrence_id=recurrence.pk, today=today)
    assert cycle_send(cycle_id=cycle_id, today=today) == CycleStatus.ACTIVE
    return Cycle.objects.select_related("charge").get(pk=cycle_id)


def credits(account: Account) -> int:
    return LedgerEntry.objects.filter(account=account, kind=LedgerEntry.Kind.CHARGE_PAID).count()


# --------------------------------------------------------------------------- /rec


def test_a_rec_callback_reads_the_recurrence_and_applies_the_psps_approval(
    fake_psp: FakePsp, bacen: Acquirer, account: Account
) -> None:
    recurrence = created(account, bacen)
    approve_rec(fake_psp, recurrence.id_rec)
    fake_psp.calls.clear()

    response = callback(bacen, "rec", rec_callback_body(fake_psp, [recurrence.id_rec]))

    processed(response, 1)
    assert [c.operation for c in fake_psp.calls if c.operation != "token"] == ["rec.get"]
    recurrence.refresh_from_db()
    assert (recurrence.status, recurrence.payer_ispb) == (RecurrenceStatus.APPROVED, PAYER_ISPB)
    assert WebhookEvent.objects.filter(
        event_type=EventType.RECURRENCE, record_id=recurrence.pk, status=RecurrenceStatus.APPROVED
    ).exists()
    assert (last_inbound().status, last_inbound().error) == (Status.PROCESSED, "")

    # The PSP repeats it (or a replay): read again, nothing changes, no second event.
    events = WebhookEvent.objects.filter(event_type=EventType.RECURRENCE, record_id=recurrence.pk).count()
    processed(callback(bacen, "rec", rec_callback_body(fake_psp, [recurrence.id_rec])), 0)
    assert WebhookEvent.objects.filter(event_type=EventType.RECURRENCE, record_id=recurrence.pk).count() == events


def test_a_rec_callback_claiming_approval_the_psp_has_not_given_approves_nothing(
    fake_psp: FakePsp, bacen: Acquirer, account: Account
) -> None:
    recurrence = created(account, bacen)
    forged = rec_callback_body(fake_psp, [recurrence.id_rec])
    entry = forged["recs"][0]
    entry["status"] = "APROVADA"
    entry["atualizacao"].append({"status": "APROVADA", "data": "2030-01-01T12:00:00.000Z"})
    entry["ativacao"] = {"tipoJornada": "JORNADA_2"}

    processed(callback(bacen, "rec", checked_callback(fake_psp, forged)), 0)

    recurrence.refresh_from_db()
    assert recurrence.status == RecurrenceStatus.CREATED
    assert last_inbound().status == Status.PROCESSED


def test_a_rec_callback_naming_another_acquirers_recurrence_is_failed_and_changes_nothing(
    fake_psp: FakePsp, bacen: Acquirer, other_bacen: Acquirer, account: Account
) -> None:
    recurrence = created(account, bacen)
    approve_rec(fake_psp, recurrence.id_rec)
    fake_psp.calls.clear()

    response = callback(other_bacen, "rec", rec_callback_body(fake_psp, [recurrence.id_rec]))

    processed(response, 0)
    inbound = last_inbound()
    assert (inbound.acquirer_id, inbound.status) == (other_bacen.pk, Status.FAILED)
    assert inbound.error == f"recurrence.changed {recurrence.id_rec}: {UnknownNotificationRecord.default_message}"
    assert [c.operation for c in fake_psp.calls if c.operation != "token"] == []
    recurrence.refresh_from_db()
    assert recurrence.status == RecurrenceStatus.CREATED


def test_a_malformed_id_rec_is_unreadable_and_an_empty_body_changes_nothing(
    fake_psp: FakePsp, bacen: Acquirer, account: Account
) -> None:
    response = callback(bacen, "rec", {"recs": [{"idRec": "../rec/x", "status": "APROVADA", "atualizacao": []}]})
    assert response.status_code == 400, response.content
    assert last_inbound().status == Status.REJECTED
    # The test call a PSP may make when the webhook is registered: nothing to read.
    processed(callback(bacen, "rec", {}), 0)
    assert last_inbound().status == Status.PROCESSED


def test_a_record_named_twice_is_read_once_and_a_body_past_the_bound_is_refused_unread(
    fake_psp: FakePsp, bacen: Acquirer, account: Account
) -> None:
    recurrence = created(account, bacen)
    approve_rec(fake_psp, recurrence.id_rec)
    fake_psp.calls.clear()

    processed(callback(bacen, "rec", rec_callback_body(fake_psp, [recurrence.id_rec] * 3)), 1)
    assert [c.operation for c in fake_psp.calls if c.operation != "token"] == ["rec.get"]

    fake_psp.calls.clear()
    entry = rec_callback_body(fake_psp, [recurrence.id_rec])["recs"][0]
    response = callback(bacen, "rec", {"recs": [entry] * (MAX_PIX_PER_NOTIFICATION + 1)})
    assert response.status_code == 400, response.content
    assert last_inbound().status == Status.REJECTED
    assert [c.operation for c in fake_psp.calls if c.operation != "token"] == []


def test_a_callback_with_the_wrong_token_is_rejected_before_anything_is_read(
    fake_psp: FakePsp, bacen: Acquirer, account: Account
) -> None:
    recurrence = created(account, bacen)
    approve_rec(fake_psp, recurrence.id_rec)
    fake_psp.calls.clear()

    for suffix in ("rec", "cobr"):
        response = callback(bacen, suffix, rec_callback_body(fake_psp, [recurrence.id_rec]), token="wrong-token")
        assert response.status_code == 401, response.content
        assert last_inbound().status == Status.REJECTED

    assert [c.operation for c in fake_psp.calls if c.operation != "token"] == []
    recurrence.refresh_from_db()
    assert recurrence.status == RecurrenceStatus.CREATED


# --------------------------------------------------------------------------- /cobr


def test_a_cobr_callback_after_the_psp_settled_pays_the_cycle_once(
    fake_psp: FakePsp, bacen: Acquirer, account: Account
) -> None:
    cycle = sent_cycle(approved(fake_psp, account, bacen))
    schedule_cobr(fake_psp, cycle.txid)
    e2e_id = pay_cobr(fake_psp, cycle.txid)
    fake_psp.calls.clear()

    response = callback(bacen, "cobr", cobr_callback_body(fake_psp, [cycle.txid]))

    processed(response, 1)
    assert [c.operation for c in fake_psp.calls if c.operation != "token"] == ["cobr.get"]
    cycle.refresh_from_db()
    assert cycle.charge is not None
    cycle.charge.refresh_from_db()
    assert cycle.status == CycleStatus.PAID
    assert (cycle.charge.status, cycle.charge.e2e_id) == (ChargeStatus.PAID, e2e_id)
    assert credits(account) == 1
    assert available_balance(account) == AMOUNT - fee(AMOUNT) == ledger_sum(account)
    assert last_inbound().status == Status.PROCESSED

    # Repeated (the PSP retries, or a replay): nothing changes, nothing credited twice.
    processed(callback(bacen, "cobr", cobr_callback_body(fake_psp, [cycle.txid])), 0)
    assert credits(account) == 1
    assert available_balance(account) == AMOUNT - fee(AMOUNT) == ledger_sum(account)
    assert last_inbound().status == Status.PROCESSED


def test_a_forged_cobr_callback_claiming_payment_credits_nothing(
    fake_psp: FakePsp, bacen: Acquirer, account: Account
) -> None:
    cycle = sent_cycle(approved(fake_psp, account, bacen))
    schedule_cobr(fake_psp, cycle.txid)  # ATIVA at the PSP, its attempt AGENDADA: not paid
    forged = cobr_callback_body(fake_psp, [cycle.txid])
    entry = forged["cobsr"][0]
    attempt = entry["tentativas"][-1]
    entry["status"] = "CONCLUIDA"
    entry["atualizacao"].append({"status": "CONCLUIDA", "data": "2030-01-01T12:00:00.000Z"})
    attempt["status"] = "PAGA"
    entry["pix"] = [
        {"endToEndId": attempt["endToEndId"], "txid": cycle.txid, "valor": "49.90", "horario": "2030-01-01T12:00:00Z"}
    ]

    processed(callback(bacen, "cobr", checked_callback(fake_psp, forged)), 0)

    cycle.refresh_from_db()
    assert cycle.charge is not None
    cycle.charge.refresh_from_db()
    assert (cycle.status, cycle.charge.status) == (CycleStatus.ACTIVE, ChargeStatus.PENDING)
    assert credits(account) == 0 == available_balance(account) == ledger_sum(account)
    assert fake_psp.cobrs[cycle.txid]["status"] == "ATIVA"


def test_a_cobr_callback_naming_an_unknown_or_foreign_txid_is_failed_and_changes_nothing(
    fake_psp: FakePsp, bacen: Acquirer, other_bacen: Acquirer, account: Account
) -> None:
    cycle = sent_cycle(approved(fake_psp, account, bacen))
    schedule_cobr(fake_psp, cycle.txid)
    pay_cobr(fake_psp, cycle.txid)
    body = cobr_callback_body(fake_psp, [cycle.txid])

    # At another acquirer's URL: that acquirer holds no such cycle.
    processed(callback(other_bacen, "cobr", body), 0)
    inbound = last_inbound()
    assert (inbound.acquirer_id, inbound.status) == (other_bacen.pk, Status.FAILED)
    assert inbound.error == f"recurrence.cycle_changed {cycle.txid}: {UnknownNotificationRecord.default_message}"

    # A txid of no cycle of ours.
    unknown = dict(body["cobsr"][0], txid="f" * 32)
    processed(callback(bacen, "cobr", checked_callback(fake_psp, {"cobsr": [unknown]})), 0)
    assert last_inbound().status == Status.FAILED
    assert last_inbound().error == f"recurrence.cycle_changed {'f' * 32}: {UnknownNotificationRecord.default_message}"

    cycle.refresh_from_db()
    assert cycle.status == CycleStatus.ACTIVE
    assert credits(account) == 0 == available_balance(account)


# --------------------------------------------------------------------------- over HTTP, no test transaction


@pytest.mark.django_db(transaction=True)
def test_over_http_the_psp_wakes_the_recurrence_then_its_cycle_with_nothing_held_across_the_reads(
    live_server: Any, fake_psp: FakePsp, bacen: Acquirer, account: Account
) -> None:
    """The PSP posts to the URL staff registered (``PUT /webhookrec``, ``PUT
    /webhookcobr``); no test transaction wraps the request, so a read at the
    PSP made inside a transaction would raise (``DB_RELEASE_STRICT``)."""
    fake_psp.webhook_url = f"{live_server.url}/api/acquirers/{bacen.key}/notifications/{NOTIFY_TOKEN}"
    recurrence = created(account, bacen)
    approve_rec(fake_psp, recurrence.id_rec)

    assert fake_psp.post_callback(rec_callback_body(fake_psp, [recurrence.id_rec]), suffix="/rec") == 200
    recurrence.refresh_from_db()
    assert recurrence.status == RecurrenceStatus.APPROVED

    cycle = sent_cycle(recurrence)
    schedule_cobr(fake_psp, cycle.txid)
    e2e_id = pay_cobr(fake_psp, cycle.txid)
    for _ in range(2):  # the PSP retries: credited once
        assert fake_psp.post_callback(cobr_callback_body(fake_psp, [cycle.txid]), suffix="/cobr") == 200
    cycle.refresh_from_db()
    assert cycle.charge is not None
    cycle.charge.refresh_from_db()
    assert (cycle.status, cycle.charge.status, cycle.charge.e2e_id) == (CycleStatus.PAID, ChargeStatus.PAID, e2e_id)
    assert credits(account) == 1
    assert available_balance(account) == AMOUNT - fee(AMOUNT) == ledger_sum(account)
    assert set(InboundNotification.objects.values_list("status", flat=True)) == {Status.PROCESSED}
