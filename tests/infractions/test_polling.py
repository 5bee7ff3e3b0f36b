"""Reading acquirers' infractions (infractions.polling) and delivering
defences (infractions.defense_delivery): the same infraction seen twice is
one infraction and one hold; the cursor moves only after a whole listing;
one bad record never stops the others; a defence is delivered once."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account, LedgerEntry
from acquirers import adapters
from acquirers.adapters import register
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerDeclined,
    AcquirerTimeout,
    InfractionDefense,
    InfractionPage,
    InfractionRecord,
    InfractionStatus,
    InvalidNotification,
    Notification,
)
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer, InboundNotification
from core import dispatch
from infractions import polling
from infractions.defense_delivery import Delivery, defense_send, defenses_sweep
from infractions.defenses import infraction_defend
from infractions.models import Infraction
from infractions.tasks import poll_infractions
from payments.models import Charge
from tests.acquirers.sandbox_notify import notify
from tests.factories import AcquirerFactory
from tests.realworld import run_concurrently

CPF = "52998224725"
SECRET = "sandbox-notification-secret-0123"
CHARGE = {
    "payment_method": "pix",
    "amount": 10000,
    "buyer": {"buyer_name": "Fulano", "buyer_document": CPF, "buyer_phone": "11999998888"},
}


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """What would go to the broker, recorded instead."""
    sent: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(dispatch, "enqueue", lambda task, *args, **kwargs: sent.append((task, args)))
    return sent


def sandbox_with_infraction(api: APIClient) -> tuple[Acquirer, Charge, str]:
    """A sandbox acquirer, a charge it received, and an infraction it
    recorded on it that the service has not read yet."""
    acquirer = AcquirerFactory(
        key=f"sbx_{uuid.uuid4().hex[:8]}", options={"notification_secret": SECRET}, default_priority=1
    )
    charge_id = api.post("/api/transactions", CHARGE, format="json").json()["data"]["id"]
    assert api.post(f"/api/sandbox/transactions/{charge_id}/pay").status_code == 200
    charge = Charge.objects.get(pk=charge_id)
    sandbox = adapters.build(acquirer)
    assert isinstance(sandbox, SandboxAdapter)
    data = sandbox.infraction_open(
        e2e_id=str(charge.e2e_id), amount=charge.amount, blocked_amount=charge.amount, reason="golpe", defense_hours=72
    )
    return acquirer, charge, str(data["external_id"])


def holds(account: Account) -> list[tuple[str, int]]:
    return list(LedgerEntry.objects.filter(account=account, kind="med_hold").values_list("kind", "amount"))


# --------------------------------------------------------------------------- seen twice


@pytest.mark.django_db
def test_a_notification_schedules_a_poll_and_the_two_polls_open_one_infraction(
    api: APIClient, account: Account, enqueued: list[tuple[str, tuple[Any, ...]]]
) -> None:
    acquirer, charge, external_id = sandbox_with_infraction(api)

    response = notify(
        {"event": "infraction.changed", "reference": external_id},
        url=f"/api/acquirers/{acquirer.key}/notifications",
    )

    assert response.status_code == 200, response.content
    assert InboundNotification.objects.latest("id").status == InboundNotification.Status.PROCESSED
    # Only a wake-up: nothing moved yet, a poll of that acquirer is scheduled.
    assert Infraction.objects.count() == 0
    assert ("infractions.tasks.poll_infractions", (acquirer.pk,)) in enqueued

    assert poll_infractions(acquirer.pk) == 1  # the notification's poll
    assert poll_infractions() >= 1  # beat's, every acquirer: the same record again

    infraction = Infraction.objects.get()
    assert (infraction.external_id, infraction.charge_id, infraction.status) == (external_id, charge.pk, "open")
    assert holds(account) == [("med_hold", -charge.liquid_amount)]


@pytest.mark.django_db
def test_a_burst_of_notifications_shares_one_poll_run_after_it(
    api: APIClient, account: Account, enqueued: list[tuple[str, tuple[Any, ...]]]
) -> None:
    """Each poll may read a month of pages (Efí): notifications within the
    window share one, scheduled for when the window closes, so it reads what
    every one of them announced."""
    acquirer, _, external_id = sandbox_with_infraction(api)

    for _ in range(3):
        response = notify(
            {"event": "infraction.changed", "reference": external_id},
            url=f"/api/acquirers/{acquirer.key}/notifications",
        )
        assert response.status_code == 200, response.content

    assert enqueued.count(("infractions.tasks.poll_infractions", (acquirer.pk,))) == 1


@pytest.mark.django_db(transaction=True)
def test_two_polls_at_once_open_one_infraction_and_one_hold(api: APIClient, account: Account) -> None:
    acquirer, charge, _ = sandbox_with_infraction(api)

    outcomes = run_concurrently([lambda: polling.infractions_poll(acquirer=acquirer)] * 2)

    assert outcomes == [1, 1], outcomes
    assert Infraction.objects.count() == 1
    assert holds(account) == [("med_hold", -charge.liquid_amount)]


# --------------------------------------------------------------------------- the cursor


@register
class PagedInfractions(AcquirerAdapter):
    """Infractions listed in pages from :attr:`script` (a test's), each
    ``since`` asked recorded in :attr:`asked`; a page that is an exception is raised."""

    name = "test_paged_infractions"
    supports_charge = False
    supports_payout = False
    supports_infractions = True
    script: ClassVar[list[Any]] = []
    asked: ClassVar[list[tuple[dt.datetime, str | None]]] = []
    defended: ClassVar[list[Any]] = []

    def list_infractions(self, since: dt.datetime, page: str | None = None) -> InfractionPage:
        self.asked.append((since, page))
        number = int(page or 0)
        answer = self.script[number]
        if isinstance(answer, Exception):
            raise answer
        more = str(number + 1) if number + 1 < len(self.script) else None
        return InfractionPage(records=tuple(answer), next_page=more)

    def defend_infraction(self, defense: InfractionDefense) -> None:
        answer = self.defended.pop(0)
        if isinstance(answer, Exception):
            raise answer

    def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
        raise InvalidNotification("none")


def record(external_id: str, e2e_id: str, amount: int = 500, **fields: Any) -> InfractionRecord:
    return InfractionRecord(
        external_id=external_id, e2e_id=e2e_id, status=InfractionStatus.OPEN, amount=amount, **fields
    )


@pytest.fixture
def paged(db: Any) -> Acquirer:
    PagedInfractions.script, PagedInfractions.asked, PagedInfractions.defended = [], [], []
    return AcquirerFactory(key=f"paged_{uuid.uuid4().hex[:8]}", adapter="test_paged_infractions", options={})


@pytest.mark.django_db
def test_the_cursor_moves_only_after_a_whole_listing(paged: Acquirer) -> None:
    PagedInfractions.script = [[record("a", "E" + "1" * 31)], AcquirerTimeout("page 2 lost")]
    before = timezone.now()

    with pytest.raises(polling.ListingFailed, match="página 1"):
        polling.infractions_poll(acquirer=paged)

    # First time: a week back; the failed listing applied nothing and left no cursor.
    week = dt.timedelta(days=7)
    (first_since, _), (_, second_page) = PagedInfractions.asked
    assert before - week - dt.timedelta(seconds=5) <= first_since <= before - week + dt.timedelta(seconds=5)
    assert second_page == "1"
    assert polling.cursor_get(paged) is None
    assert Infraction.objects.count() == 0

    PagedInfractions.script = [[record("a", "E" + "1" * 31)], [record("b", "E" + "2" * 31)]]
    PagedInfractions.asked.clear()
    started = timezone.now()
    assert polling.infractions_poll(acquirer=paged) == 2
    cursor = polling.cursor_get(paged)
    assert cursor is not None
    assert started <= cursor <= timezone.now()
    # Still a week back (no cursor then), the same ``since`` for every page.
    assert len({since for since, _ in PagedInfractions.asked}) == 1
    assert PagedInfractions.asked[0][0] <= started - week + dt.timedelta(seconds=5)
    # Pix that match no charge: recorded for staff, nothing blocked.
    assert sorted(Infraction.objects.values_list("external_id", "hold")) == [("a", 0), ("b", 0)]

    PagedInfractions.asked.clear()
    polling.infractions_poll(acquirer=paged)
    # Next time: from the last listing's start, less the overlap.
    assert {since for since, _ in PagedInfractions.asked} == {cursor - polling.CURSOR_OVERLAP}


@pytest.mark.django_db
def test_one_bad_record_is_skipped_and_the_others_applied(paged: Acquirer, caplog: pytest.LogCaptureFixture) -> None:
    PagedInfractions.script = [[record("bad", "E" + "1" * 31, amount=0), record("good", "E" + "2" * 31)]]

    assert polling.infractions_poll(acquirer=paged) == 1

    assert list(Infraction.objects.values_list("external_id", flat=True)) == ["good"]
    assert "infraction 'bad' not applied" in caplog.text
    assert polling.cursor_get(paged) is not None


def test_a_record_the_database_refused_keeps_the_cursor_where_it_was(
    paged: Acquirer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deadlock or a lost connection may pass: the next poll must list the
    record again, so the cursor does not move past it (the others apply)."""
    from django.db import OperationalError

    real = polling.infraction_apply  # type: ignore[attr-defined]

    def flaky(*, acquirer: Acquirer, record: Any) -> Infraction:
        if record.external_id == "unlucky":
            raise OperationalError("deadlock detected")
        return real(acquirer=acquirer, record=record)

    monkeypatch.setattr(polling, "infraction_apply", flaky)
    PagedInfractions.script = [[record("unlucky", "E" + "1" * 31), record("good", "E" + "2" * 31)]]

    assert polling.infractions_poll(acquirer=paged) == 1

    assert list(Infraction.objects.values_list("external_id", flat=True)) == ["good"]
    assert polling.cursor_get(paged) is None


# --------------------------------------------------------------------------- defences


def defended(infraction: Infraction) -> Infraction:
    infraction_defend(infraction_id=infraction.pk, text="O cliente recebeu o produto.", by="loja@example.com")
    infraction.refresh_from_db()
    return infraction


@pytest.mark.django_db
def test_a_defence_is_delivered_to_the_sandbox_once(api: APIClient, account: Account) -> None:
    acquirer, _, external_id = sandbox_with_infraction(api)
    polling.infractions_poll(acquirer=acquirer)
    infraction = defended(Infraction.objects.get())

    assert defense_send(infraction_id=infraction.pk) is Delivery.SENT

    infraction.refresh_from_db()
    assert infraction.defense_sent_at is not None
    assert (infraction.status, infraction.defense_error) == ("in_defense", "")
    sandbox = adapters.build(acquirer)
    assert isinstance(sandbox, SandboxAdapter)
    held = sandbox.infraction_get(external_id)
    assert held is not None
    assert (held["status"], held["defense"]["text"]) == ("in_defense", "O cliente recebeu o produto.")
    # Delivered: asked again, nothing is sent.
    assert defense_send(infraction_id=infraction.pk) is Delivery.SKIPPED


@pytest.mark.django_db
def test_a_refused_defence_is_kept_and_an_unclear_one_asked_again(
    paged: Acquirer, enqueued: list[tuple[str, tuple[Any, ...]]]
) -> None:
    PagedInfractions.script = [[record("x", "E" + "1" * 31), record("y", "E" + "2" * 31)]]
    polling.infractions_poll(acquirer=paged)
    refused, unclear = (defended(Infraction.objects.get(external_id=i)) for i in ("x", "y"))
    PagedInfractions.defended = [AcquirerDeclined("prazo de defesa encerrado"), AcquirerTimeout("no answer")]

    assert defense_send(infraction_id=refused.pk) is Delivery.DECLINED
    assert defense_send(infraction_id=unclear.pk) is Delivery.UNKNOWN

    refused.refresh_from_db()
    assert refused.defense_sent_at is None
    assert refused.defense_error == "A adquirente recusou a defesa: prazo de defesa encerrado"
    assert defense_send(infraction_id=refused.pk) is Delivery.SKIPPED  # final
    unclear.refresh_from_db()
    assert (unclear.defense_sent_at, unclear.defense_error, unclear.status) == (None, "", "open")

    # Beat's sweep hands the unclear one (submitted over 2 minutes ago) to a worker again.
    Infraction.objects.filter(pk=unclear.pk).update(defense_submitted_at=timezone.now() - dt.timedelta(minutes=3))
    assert defenses_sweep() == 1
    assert ("infractions.tasks.send_defense", (str(unclear.pk),)) in enqueued
    PagedInfractions.defended = [None]
    assert defense_send(infraction_id=unclear.pk) is Delivery.SENT
    unclear.refresh_from_db()
    assert unclear.status == "in_defense"
    assert defenses_sweep() == 0


def test_beat_polls_sweeps_and_sends_deadline_notices() -> None:
    beat = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert beat["infractions.tasks.poll_infractions"] == 300.0
    assert beat["infractions.tasks.notify_deadlines"] == 600.0
    assert beat["infractions.tasks.sweep_defenses"] == 120.0


@pytest.mark.django_db
def test_an_acquirer_that_cannot_be_read_does_not_stop_the_others(
    api: APIClient, account: Account, paged: Acquirer, caplog: pytest.LogCaptureFixture
) -> None:
    PagedInfractions.script = [AcquirerTimeout("no answer")]
    acquirer, _, external_id = sandbox_with_infraction(api)

    assert poll_infractions() >= 1

    assert Infraction.objects.get().external_id == external_id
    assert polling.cursor_get(paged) is None
    assert polling.cursor_get(acquirer) is not None
    assert f"{paged.key}: infrações, primeira página: AcquirerTimeout" in caplog.text
