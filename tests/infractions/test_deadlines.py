"""``infraction.deadline`` notices (infractions.deadlines): 48, 24 and 6 hours
before the deadline of a defence not sent, once each; a first look late
sends one; runs side by side send each once."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import Account
from acquirers.adapters.base import InfractionStatus
from acquirers.models import Acquirer
from infractions.deadlines import deadline_notices_send
from infractions.defenses import infraction_defend
from infractions.models import DeadlineNotice, Infraction
from tests.infractions.conftest import close_infraction, open_infraction, paid_charge
from webhooks.models import WebhookEvent

H = dt.timedelta(hours=1)


def notices(infraction: Infraction) -> list[int]:
    """``hours_left`` of the deadline events sent, in order."""
    events = WebhookEvent.objects.filter(event_type="infraction", record_id=infraction.pk, status="deadline")
    return [e.data["hours_left"] for e in events.order_by("created_at", "id")]


@pytest.fixture
def deadline() -> dt.datetime:
    return timezone.now() + 72 * H


@pytest.fixture
def infraction(account: Account, acquirer: Acquirer, deadline: dt.datetime) -> Infraction:
    return open_infraction(acquirer, paid_charge(account, acquirer), deadline=deadline)


@pytest.mark.django_db
def test_48_24_and_6_hours_before_once_each(infraction: Infraction, deadline: dt.datetime) -> None:
    assert deadline_notices_send(now=deadline - 50 * H) == 0
    assert deadline_notices_send(now=deadline - 47 * H) == 1
    assert deadline_notices_send(now=deadline - 46 * H) == 0
    assert deadline_notices_send(now=deadline - 24 * H) == 1
    assert deadline_notices_send(now=deadline - 23 * H) == 0
    assert deadline_notices_send(now=deadline - 5 * H) == 1
    assert deadline_notices_send(now=deadline - 1 * H) == 0
    assert deadline_notices_send(now=deadline + 1 * H) == 0
    assert notices(infraction) == [48, 24, 6]
    event = WebhookEvent.objects.filter(record_id=infraction.pk, status="deadline").latest("created_at")
    assert event.data["event"] == "infraction.deadline"
    assert event.data["id"] == str(infraction.pk)
    assert event.data["defense"] is None


@pytest.mark.django_db
def test_a_first_look_5_hours_before_sends_one_notice(infraction: Infraction, deadline: dt.datetime) -> None:
    assert deadline_notices_send(now=deadline - 5 * H) == 1
    assert notices(infraction) == [6]
    assert sorted(DeadlineNotice.objects.filter(infraction=infraction).values_list("hours", flat=True)) == [6, 24, 48]
    assert deadline_notices_send(now=deadline - 4 * H) == 0
    assert notices(infraction) == [6]


@pytest.mark.django_db
def test_a_first_look_30_hours_before_sends_the_48_hour_one_then_the_others(
    infraction: Infraction, deadline: dt.datetime
) -> None:
    assert deadline_notices_send(now=deadline - 30 * H) == 1
    assert deadline_notices_send(now=deadline - 10 * H) == 1
    assert deadline_notices_send(now=deadline - 2 * H) == 1
    assert notices(infraction) == [48, 24, 6]


@pytest.mark.django_db
@pytest.mark.parametrize("how", ["defended", "waived", "closed"])
def test_no_notice_once_defended_waived_or_closed(
    infraction: Infraction, acquirer: Acquirer, account: Account, deadline: dt.datetime, how: str
) -> None:
    if how == "defended":
        with transaction.atomic():
            infraction_defend(infraction_id=infraction.pk, text="Entregue.", by="loja", account=account)
    elif how == "waived":
        Infraction.objects.filter(pk=infraction.pk).update(defense_waived_at=timezone.now())
    else:
        close_infraction(acquirer, infraction, InfractionStatus.REJECTED)
    for hours in (47, 23, 5):
        assert deadline_notices_send(now=deadline - hours * H) == 0
    assert notices(infraction) == []
    assert not DeadlineNotice.objects.filter(infraction=infraction).exists()


@pytest.mark.django_db
def test_no_notice_without_a_deadline_or_an_account(
    account: Account, acquirer: Acquirer, infraction: Infraction, deadline: dt.datetime
) -> None:
    Infraction.objects.filter(pk=infraction.pk).update(defense_deadline=None)
    charge = paid_charge(account, acquirer)
    orphan = open_infraction(acquirer, charge, deadline=deadline)
    # A Pix that matched no charge: no account to tell.
    Infraction.objects.filter(pk=orphan.pk).update(account=None, charge=None)
    assert deadline_notices_send(now=deadline - 5 * H) == 0
    assert not DeadlineNotice.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_an_infraction_another_run_holds_is_skipped_then_noticed_once(
    infraction: Infraction, deadline: dt.datetime
) -> None:
    """Runs side by side: the one that finds the row locked skips it (no
    wait, no second event); the next run after the lock is gone sends it."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                Infraction.objects.select_for_update().get(pk=infraction.pk)
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        assert deadline_notices_send(now=deadline - 5 * H) == 0
    finally:
        release.set()
        holder.join(10)
    assert deadline_notices_send(now=deadline - 5 * H) == 1
    assert deadline_notices_send(now=deadline - 5 * H) == 0
    assert notices(infraction) == [6]


def _run_many(now: dt.datetime, runs: int) -> list[Any]:
    results: list[Any] = []
    start = threading.Barrier(runs)

    def run() -> None:
        try:
            start.wait(10)
            results.append(deadline_notices_send(now=now))
        except Exception as exc:  # noqa: BLE001 - the test shows it
            results.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_send_each_notice_once(account: Account, acquirer: Acquirer, deadline: dt.datetime) -> None:
    many = [open_infraction(acquirer, paid_charge(account, acquirer), deadline=deadline) for _ in range(5)]
    results = _run_many(deadline - 5 * H, runs=4)
    assert all(isinstance(r, int) for r in results), results
    assert sum(results) == 5
    assert [notices(i) for i in many] == [[6]] * 5
