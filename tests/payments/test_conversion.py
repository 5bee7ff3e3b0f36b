"""The acquirer listing's conversion_percent, measured from charges
(payments.conversion): what counts, the minimum sample, staff's override,
the beat that keeps it fresh, and the back office that shows all three."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account
from acquirers.models import Acquirer
from acquirers.services import acquirer_grants_set
from core.redis import client as redis_client
from core.snapshots import GENERATION_KEY
from payments.conversion import acquirers_conversion_measure, conversion_counts
from payments.models import Charge, ChargeStatus
from payments.tasks import measure_acquirer_conversion
from tests.factories import AcquirerFactory, ChargeFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 11, 20, 15, 0, tzinfo=dt.UTC)
URL = "/api/pix-cash-in/acquirers"


@pytest.fixture(autouse=True)
def _window(settings: Any) -> None:
    settings.PIX_CONVERSION_WINDOW_DAYS = 7
    settings.PIX_CONVERSION_MIN_SAMPLE = 4


def charges(
    acquirer: Acquirer,
    count: int,
    *,
    paid: bool = False,
    status: str | None = None,
    age: dt.timedelta = dt.timedelta(days=1),
    expiry: dt.timedelta = dt.timedelta(hours=1),
    account: Account | None = None,
) -> list[Charge]:
    """``count`` charges created ``age`` before NOW, expiring ``expiry`` after creation."""
    created = NOW - age
    extra: dict[str, Any] = {"account": account} if account is not None else {}
    made: list[Charge] = []
    for _ in range(count):
        charge = ChargeFactory(
            acquirer=acquirer,
            status=status or (ChargeStatus.PAID if paid else ChargeStatus.CANCELED),
            paid_at=created + dt.timedelta(minutes=1) if paid else None,
            expires_at=created + expiry,
            created_at=created,
            **extra,
        )
        made.append(charge)
    return made


def stored(acquirer: Acquirer) -> tuple[Decimal | None, int, dt.datetime | None]:
    acquirer.refresh_from_db()
    return acquirer.conversion_measured_percent, acquirer.conversion_sample, acquirer.conversion_measured_at


# --------------------------------------------------------------------------- what counts


def test_one_query_counts_every_acquirer_inside_the_window(django_assert_num_queries: Any) -> None:
    alpha, beta, idle = AcquirerFactory(key="alpha"), AcquirerFactory(key="beta"), AcquirerFactory(key="idle")
    charges(alpha, 3, paid=True)
    charges(alpha, 1)
    charges(beta, 1, paid=True, age=dt.timedelta(days=7) - dt.timedelta(seconds=1))  # just inside
    charges(beta, 1, paid=True, age=dt.timedelta(days=7) + dt.timedelta(seconds=1))  # just outside
    charges(beta, 2, age=dt.timedelta(days=6))

    with django_assert_num_queries(1):
        counts = conversion_counts(now=NOW, window_days=7)

    assert counts == {alpha.pk: (4, 3), beta.pk: (3, 1)}
    assert idle.pk not in counts


def test_a_charge_still_inside_its_expiry_is_not_counted_yet_paid_or_not() -> None:
    acquirer = AcquirerFactory()
    # Created 30 min ago with 1 h to pay: no outcome yet, whatever its status.
    charges(acquirer, 2, status=ChargeStatus.PENDING, age=dt.timedelta(minutes=30))
    charges(acquirer, 1, paid=True, age=dt.timedelta(minutes=30))
    # Expired just now: counted (still pending = not paid, the expiry beat is a minute behind).
    charges(acquirer, 1, status=ChargeStatus.PENDING, age=dt.timedelta(hours=1))
    charges(acquirer, 1, paid=True, age=dt.timedelta(hours=1))

    assert conversion_counts(now=NOW, window_days=7) == {acquirer.pk: (2, 1)}


def test_a_charge_paid_once_counts_as_converted_after_a_refund_or_a_chargeback() -> None:
    acquirer = AcquirerFactory()
    for status in (ChargeStatus.PAID, ChargeStatus.REFUNDED, ChargeStatus.CHARGEBACK):
        [charge] = charges(acquirer, 1, paid=True)
        Charge.objects.filter(pk=charge.pk).update(status=status)
    charges(acquirer, 1, status=ChargeStatus.FAILED)
    charges(acquirer, 1, status=ChargeStatus.CANCELED)

    assert conversion_counts(now=NOW, window_days=7) == {acquirer.pk: (5, 3)}


def test_the_window_is_configurable(settings: Any) -> None:
    acquirer = AcquirerFactory()
    charges(acquirer, 4, paid=True, age=dt.timedelta(days=2))
    charges(acquirer, 4, age=dt.timedelta(days=5))
    settings.PIX_CONVERSION_WINDOW_DAYS = 3

    acquirers_conversion_measure(now=NOW)

    assert stored(acquirer) == (Decimal("100.00"), 4, NOW)


# --------------------------------------------------------------------------- stored values


def test_measured_value_sample_and_time_are_stored_rounded_half_up(settings: Any) -> None:
    acquirer = AcquirerFactory()
    charges(acquirer, 2, paid=True)
    charges(acquirer, 1)  # 2 of 3: 66.666…

    settings.PIX_CONVERSION_MIN_SAMPLE = 3
    assert acquirers_conversion_measure(now=NOW) == 1

    assert stored(acquirer) == (Decimal("66.67"), 3, NOW)
    assert acquirer.conversion_percent == Decimal("66.67")
    assert acquirer.conversion_source == "measured"


def test_below_the_minimum_sample_there_is_no_measurement() -> None:
    acquirer = AcquirerFactory()
    charges(acquirer, 3, paid=True)  # minimum 4

    acquirers_conversion_measure(now=NOW)

    assert stored(acquirer) == (None, 3, NOW)
    assert (acquirer.conversion_percent, acquirer.conversion_source) == (Decimal("0"), "default")


def test_a_measurement_whose_sample_shrinks_below_the_minimum_is_dropped() -> None:
    acquirer = AcquirerFactory()
    charges(acquirer, 4, paid=True, age=dt.timedelta(days=6))
    acquirers_conversion_measure(now=NOW)
    assert stored(acquirer)[:2] == (Decimal("100.00"), 4)

    # Two days later those charges left the window.
    later = NOW + dt.timedelta(days=2)
    acquirers_conversion_measure(now=later)

    assert stored(acquirer) == (None, 0, later)


def test_staff_override_wins_over_the_measurement() -> None:
    acquirer = AcquirerFactory(conversion_percent_override=Decimal("95.00"))
    charges(acquirer, 4)  # measured 0 %

    acquirers_conversion_measure(now=NOW)

    assert stored(acquirer) == (Decimal("0.00"), 4, NOW)
    assert (acquirer.conversion_percent, acquirer.conversion_source) == (Decimal("95.00"), "override")


def test_repeated_runs_change_nothing_and_never_drop_the_snapshots() -> None:
    """Idempotent, and cheap for the API: the measured fields are not read
    from snapshots, so the beat must not bump their generation (every
    process would reload every credential and chain every 10 minutes)."""
    alpha, beta = AcquirerFactory(), AcquirerFactory()
    charges(alpha, 4, paid=True)
    redis = redis_client(settings.REDIS_URL, timeout=1)
    generation = redis.get(GENERATION_KEY)
    updated_at = {a.pk: a.updated_at for a in Acquirer.objects.all()}

    assert acquirers_conversion_measure(now=NOW) == 1  # alpha; beta stays "nothing measured"
    later = NOW + dt.timedelta(minutes=10)
    assert acquirers_conversion_measure(now=later) == 0

    assert redis.get(GENERATION_KEY) == generation
    # Same values; when they were last measured moves on.
    assert stored(alpha) == (Decimal("100.00"), 4, later)
    assert stored(beta) == (None, 0, later)
    # The configuration's updated_at does not.
    assert {a.pk: a.updated_at for a in Acquirer.objects.all()} == updated_at


def test_the_beat_runs_the_measurement_every_ten_minutes() -> None:
    [entry] = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == measure_acquirer_conversion.name]
    assert float(entry["schedule"]) == 600  # type: ignore[arg-type]
    acquirer = AcquirerFactory()
    now = timezone.now()
    for _ in range(4):
        ChargeFactory(
            acquirer=acquirer,
            status=ChargeStatus.PAID,
            paid_at=now - dt.timedelta(hours=2),
            expires_at=now - dt.timedelta(hours=1),
            created_at=now - dt.timedelta(hours=2),
        )

    measure_acquirer_conversion.apply().get()

    assert stored(acquirer)[:2] == (Decimal("100.00"), 4)


# --------------------------------------------------------------------------- the API listing


def test_the_listing_shows_override_else_measured_else_zero_as_a_number(api: APIClient, account: Account) -> None:
    account.can_select_pix_cash_in_acquirer = True
    account.save(update_fields=["can_select_pix_cash_in_acquirer"])
    measured = AcquirerFactory(key="measured")
    overridden = AcquirerFactory(key="overridden", conversion_percent_override=Decimal("12.50"))
    unmeasured = AcquirerFactory(key="unmeasured")
    acquirer_grants_set(account=account, acquirers=[measured, overridden, unmeasured])
    charges(measured, 3, paid=True, account=account)
    charges(measured, 5, account=account)  # 3 of 8: 37.5 %
    charges(overridden, 8, paid=True, account=account)  # measured 100 %, overridden
    charges(unmeasured, 2, paid=True, account=account)  # below the minimum
    acquirers_conversion_measure(now=NOW)

    response = api.get(URL)

    assert response.status_code == 200
    shown = {e["acquirer_key"]: e["conversion_percent"] for e in response.json()["data"]["acquirers"]}
    assert shown == {"measured": 37.5, "overridden": 12.5, "unmeasured": 0}
    assert all(isinstance(value, int | float) and not isinstance(value, bool) for value in shown.values())


# --------------------------------------------------------------------------- back office


def test_the_admin_shows_measured_override_and_shown_values(staff_client: Any, admin_client: Client) -> None:
    measured = AcquirerFactory(key="medida")
    charges(measured, 3, paid=True)
    charges(measured, 1)
    overridden = AcquirerFactory(key="definida", conversion_percent_override=Decimal("90"))
    charges(overridden, 2, paid=True)  # below the minimum
    never = AcquirerFactory(key="nunca")
    acquirers_conversion_measure(now=NOW)
    Acquirer.objects.filter(pk=never.pk).update_unwatched(conversion_measured_at=None)  # created after the run
    support: Client = staff_client("support")  # sees, changes nothing

    listing = support.get(reverse("admin:acquirers_acquirer_changelist")).content.decode()
    page = support.get(reverse("admin:acquirers_acquirer_change", args=[measured.pk])).content.decode()
    other = support.get(reverse("admin:acquirers_acquirer_change", args=[overridden.pk])).content.decode()

    for text in (listing, page):
        assert "75,00 % de 4 cobranças (medida em" in text
        assert "75,00 % (medida)" in text
    assert "90,00 % (definida pela equipe)" in listing
    assert "amostra insuficiente: 2 cobranças, mínimo 4 (medida em" in listing
    assert "ainda não medida" in listing
    assert "0,00 % (padrão: sem valor definido pela equipe nem medição)" in listing
    assert "90,00 % (definida pela equipe)" in other
    assert "amostra insuficiente: 2 cobranças, mínimo 4" in other

    # Who may change the acquirer edits the override; measured and shown stay read-only beside it.
    editable = admin_client.get(reverse("admin:acquirers_acquirer_change", args=[overridden.pk])).content.decode()
    assert 'name="conversion_percent_override"' in editable
    assert 'name="conversion_measured_percent"' not in editable
    assert "90,00 % (definida pela equipe)" in editable


def test_staff_save_the_override_and_the_listing_follows(admin_client: Client) -> None:
    acquirer = AcquirerFactory(key="editada", max_ticket=100_000)
    charges(acquirer, 4, paid=True)
    acquirers_conversion_measure(now=NOW)
    url = reverse("admin:acquirers_acquirer_change", args=[acquirer.pk])
    form = {
        "key": "editada",
        "name": "Editada",
        "nominal": "",
        "adapter": "sandbox",
        "options": '{"charge": "ok"}',
        "enabled": "on",
        "max_ticket": "1.000,00",
        "conversion_percent_override": "42,5",
        "default_priority": "",
        "connect_timeout_ms": "3000",
        "read_timeout_ms": "10000",
    }

    response = admin_client.post(url, form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    acquirer.refresh_from_db()
    assert (acquirer.conversion_percent, acquirer.conversion_source) == (Decimal("42.50"), "override")
    assert stored(acquirer) == (Decimal("100.00"), 4, NOW)  # the measurement is not a form field

    assert admin_client.post(url, {**form, "conversion_percent_override": "100,01"}).status_code == 200
    acquirer.refresh_from_db()
    assert acquirer.conversion_percent_override == Decimal("42.50")  # refused, nothing changed

    assert admin_client.post(url, {**form, "conversion_percent_override": ""}).status_code == 302
    acquirer.refresh_from_db()
    assert (acquirer.conversion_percent, acquirer.conversion_source) == (Decimal("100.00"), "measured")


def test_staff_clear_overrides_from_the_list(admin_client: Client) -> None:
    acquirer = AcquirerFactory(conversion_percent_override=Decimal("90"))
    untouched = AcquirerFactory(conversion_percent_override=Decimal("80"))
    charges(acquirer, 4)
    acquirers_conversion_measure(now=NOW)

    response = admin_client.post(
        reverse("admin:acquirers_acquirer_changelist"),
        {"action": "use_measured_conversion", "_selected_action": [acquirer.pk]},
        follow=True,
    )

    assert "1 adquirente passa a mostrar a conversão medida." in response.content.decode()
    acquirer.refresh_from_db()
    assert acquirer.conversion_percent_override is None
    assert (acquirer.conversion_percent, acquirer.conversion_source) == (Decimal("0.00"), "measured")
    untouched.refresh_from_db()
    assert untouched.conversion_percent_override == Decimal("80.00")


def test_support_cannot_clear_an_override(staff_client: Any) -> None:
    acquirer = AcquirerFactory(conversion_percent_override=Decimal("90"))

    staff_client("support").post(
        reverse("admin:acquirers_acquirer_changelist"),
        {"action": "use_measured_conversion", "_selected_action": [acquirer.pk]},
    )

    acquirer.refresh_from_db()
    assert acquirer.conversion_percent_override == Decimal("90.00")
