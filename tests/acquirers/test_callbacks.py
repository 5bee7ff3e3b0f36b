"""POST /acquirers/{key}/notifications with the sandbox adapter: stored raw
first, verified by signature, then each event dispatched to the app owning
its record (decisions §4; STYLE "Inbound notifications"). What a charge
event does is tests/payments/test_events.py's."""

from __future__ import annotations

import io
import json
import logging
import time
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils.log import configure_logging
from rest_framework.test import APIClient

from accounts.models import Account
from accounts.selectors import available_balance, ledger_sum
from acquirers import inbound as dispatch
from acquirers.adapters.base import Notification, NotificationEvent
from acquirers.adapters.sandbox_signing import SIGNATURE_HEADER, SIGNATURE_TOLERANCE, TIMESTAMP_HEADER, sign
from acquirers.exceptions import UnknownNotificationRecord
from acquirers.inbound import REJECTED_BODY_KEPT_BYTES
from acquirers.models import Acquirer, InboundNotification
from core.logging import logging_config
from payments.models import Charge, ChargeStatus, ChargeTransition
from tests.acquirers.sandbox_notify import (
    E2E,
    KEY,
    LIQUID,
    OTHER_SECRET,
    REJECTED,
    SECRET,
    URL,
    Status,
    accepted,
    create_charge,
    event,
    last_inbound,
    notify,
    sandbox_acquirer,
    state,
)
from tests.factories import AcquirerFactory
from tests.helpers import project_formatters

NOW = int(time.time())

pytestmark = pytest.mark.django_db


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return sandbox_acquirer()


@pytest.fixture
def charge(api: APIClient, acquirer: Acquirer) -> Charge:
    return create_charge(api)


# --------------------------------------------------------------------------- accepted


def test_paid_notification_pays_credits_and_is_stored(charge: Charge, account: Account) -> None:
    body = event("charge.paid", charge, e2e_id=E2E)
    raw = json.dumps(body).encode()

    response = notify(raw)

    accepted(response, 1)
    current = state(charge)
    assert (current["status"], current["e2e_id"]) == (ChargeStatus.PAID, E2E)
    assert current["paid_at"] is not None
    assert current["balance"] == LIQUID == ledger_sum(account)
    assert ChargeTransition.objects.get(charge=charge).source == "acquirer"
    inbound = InboundNotification.objects.get()
    assert inbound.acquirer.key == KEY
    assert inbound.body == raw.decode()
    assert (inbound.status, inbound.error) == (Status.PROCESSED, "")
    assert inbound.processed_at is not None
    assert inbound.headers[SIGNATURE_HEADER] == sign(SECRET, raw, int(inbound.headers[TIMESTAMP_HEADER]))


def test_no_client_credentials_are_needed_and_ours_are_never_stored(charge: Charge) -> None:
    response = notify(event("charge.paid", charge), HTTP_X_PUBLIC_KEY="pk_whatever", HTTP_X_SECRET_KEY="sk_leak")
    accepted(response, 1)
    headers = {k.lower(): v for k, v in last_inbound().headers.items()}
    assert "x-secret-key" not in headers
    assert "sk_leak" not in json.dumps(last_inbound().headers)


def test_list_body_applies_each_event(api: APIClient, acquirer: Acquirer, account: Account) -> None:
    first, second = create_charge(api), create_charge(api)

    response = notify([event("charge.paid", first), event("charge.paid", second)])

    accepted(response, 2)
    assert state(first)["status"] == state(second)["status"] == ChargeStatus.PAID
    assert available_balance(account) == 2 * LIQUID == ledger_sum(account)
    assert last_inbound().status == Status.PROCESSED


def test_list_body_with_one_refused_event_is_failed_but_applies_the_rest(
    api: APIClient, acquirer: Acquirer, account: Account
) -> None:
    # A chargeback of a charge never paid is refused (a Pix for a cancelled
    # one is not: it becomes a late payment, tests/payments/test_late_payments.py).
    paid, unpaid = create_charge(api), create_charge(api)

    response = notify([event("charge.chargeback", unpaid), event("charge.paid", paid)])

    accepted(response, 1)
    assert state(paid)["status"] == ChargeStatus.PAID
    assert state(unpaid)["status"] == ChargeStatus.PENDING
    assert available_balance(account) == LIQUID
    inbound = last_inbound()
    assert inbound.status == Status.FAILED
    assert unpaid.txid in inbound.error


# --------------------------------------------------------------------------- refused and failed


@pytest.mark.parametrize(
    "signature",
    ["", "deadbeef", "çãõ-not-ascii", sign(OTHER_SECRET, b"{}", NOW), "SIGN-OF-ANOTHER-BODY", "SIGN-OF-ANOTHER-TIME"],
    ids=["missing", "garbage", "not-ascii", "other-body", "placeholder", "other-time"],
)
def test_bad_signature_is_401_stored_as_rejected(charge: Charge, signature: str) -> None:
    body = event("charge.paid", charge, e2e_id=E2E)
    if signature == "SIGN-OF-ANOTHER-BODY":
        signature = sign(SECRET, json.dumps({**body, "e2e_id": None}).encode(), int(time.time()))
    if signature == "SIGN-OF-ANOTHER-TIME":
        # A fresh timestamp pasted onto an old request's signature.
        signature = sign(SECRET, json.dumps(body).encode(), int(time.time()) - 3600)
    before = state(charge)

    response = notify(body, signature=signature)

    assert response.status_code == 401
    assert response.json() == REJECTED
    assert state(charge) == before
    inbound = InboundNotification.objects.get()
    assert inbound.status == Status.REJECTED
    assert inbound.body == json.dumps(body)
    assert inbound.error == "bad signature"


@pytest.mark.parametrize(
    ("shift", "error"),
    [
        (-SIGNATURE_TOLERANCE - 5, "timestamp too old or too far ahead"),
        (SIGNATURE_TOLERANCE + 5, "timestamp too old or too far ahead"),
        (-86_400, "timestamp too old or too far ahead"),
    ],
    ids=["just-too-old", "too-far-ahead", "a-day-old"],
)
def test_a_signed_notification_outside_the_tolerance_is_rejected(charge: Charge, shift: int, error: str) -> None:
    """A request captured and replayed later (properly signed, with its own time) changes nothing."""
    before = state(charge)

    response = notify(event("charge.paid", charge, e2e_id=E2E), timestamp=int(time.time()) + shift)

    assert response.status_code == 401
    assert response.json() == REJECTED
    assert state(charge) == before
    assert (last_inbound().status, last_inbound().error) == (Status.REJECTED, error)


@pytest.mark.parametrize("shift", [-SIGNATURE_TOLERANCE + 30, SIGNATURE_TOLERANCE - 30], ids=["late", "early"])
def test_a_signed_notification_within_the_tolerance_is_accepted(charge: Charge, shift: int) -> None:
    accepted(notify(event("charge.paid", charge, e2e_id=E2E), timestamp=int(time.time()) + shift), 1)
    assert state(charge)["status"] == ChargeStatus.PAID


@pytest.mark.parametrize(
    "stamp", ["", "soon", "1e9", " 1700000000", "1_700_000_000", "\u0661\u0667" + "\u0660" * 8, "9" * 13]
)
def test_a_missing_or_malformed_timestamp_is_rejected(charge: Charge, stamp: str) -> None:
    before = state(charge)
    raw = json.dumps(event("charge.paid", charge, e2e_id=E2E)).encode()
    response = APIClient().post(
        URL,
        data=raw,
        content_type="application/json",
        HTTP_X_SANDBOX_TIMESTAMP=stamp,
        HTTP_X_SANDBOX_SIGNATURE=sign(SECRET, raw, NOW),
    )
    assert response.status_code == 401
    assert response.json() == REJECTED
    assert state(charge) == before
    assert (last_inbound().status, last_inbound().error) == (Status.REJECTED, "missing or malformed timestamp")


def test_signed_with_another_secret_is_rejected(charge: Charge) -> None:
    before = state(charge)
    response = notify(event("charge.paid", charge), secret=OTHER_SECRET)
    assert response.status_code == 401
    assert response.json() == REJECTED
    assert state(charge) == before
    assert last_inbound().status == Status.REJECTED


def test_acquirer_without_secret_rejects_everything(api: APIClient, account: Account) -> None:
    AcquirerFactory(key="sbx_nosecret", default_priority=1)
    charge = create_charge(api)
    before = state(charge)

    response = notify(event("charge.paid", charge), url="/api/acquirers/sbx_nosecret/notifications")

    assert response.status_code == 401
    assert response.json() == REJECTED
    assert state(charge) == before
    assert last_inbound().status == Status.REJECTED


@pytest.mark.parametrize(
    "raw",
    [b"not json", b'"x"', b'{"event": "charge.paid"}', b'{"event": "charge.exploded", "reference": "x"}'],
    ids=["not-json", "string", "no-reference", "unknown-event"],
)
def test_signed_but_unreadable_body_is_rejected_and_kept(acquirer: Acquirer, raw: bytes) -> None:
    response = notify(raw)
    # Authentic but unreadable: a 400, so the acquirer does not suspect its credentials.
    assert response.status_code == 400
    assert response.json() == {"success": False, "message": "Notificação ilegível.", "data": None}
    inbound = InboundNotification.objects.get()
    assert inbound.status == Status.REJECTED
    assert inbound.body == raw.decode()


def test_unknown_acquirer_is_404_and_nothing_is_stored(charge: Charge) -> None:
    response = notify(event("charge.paid", charge), url="/api/acquirers/nope/notifications")
    assert response.status_code == 404
    assert response.json() == {"success": False, "message": "Adquirente não encontrada.", "data": None}
    assert not InboundNotification.objects.exists()
    assert state(charge)["status"] == ChargeStatus.PENDING


def test_unknown_reference_is_stored_as_failed(acquirer: Acquirer) -> None:
    accepted(notify({"event": "charge.paid", "reference": "0" * 32}), 0)
    assert last_inbound().status == Status.FAILED


def test_payout_event_for_a_charge_is_stored_as_failed(charge: Charge) -> None:
    before = state(charge)
    accepted(notify(event("payout.paid", charge)), 0)
    assert state(charge) == before
    assert last_inbound().status == Status.FAILED


@pytest.mark.parametrize("bad_e2e", ["duplicate", "E" + "7" * 70], ids=["duplicate", "too-long"])
def test_unusable_e2e_id_fails_only_its_event(api: APIClient, acquirer: Acquirer, bad_e2e: str) -> None:
    first, second, third = create_charge(api), create_charge(api), create_charge(api)
    accepted(notify(event("charge.paid", first, e2e_id=E2E)), 1)
    bad = E2E if bad_e2e == "duplicate" else bad_e2e

    response = notify([event("charge.paid", second, e2e_id=bad), event("charge.paid", third)])

    assert state(second)["status"] == ChargeStatus.PENDING
    inbound = last_inbound()
    assert inbound.status == Status.FAILED
    assert second.txid in inbound.error
    assert state(third)["status"] == ChargeStatus.PAID
    accepted(response, 1)


# --------------------------------------------------------------------------- hostile requests


def test_a_forged_request_with_a_big_body_is_stored_only_truncated(charge: Charge) -> None:
    body = json.dumps([event("charge.paid", charge, e2e_id=E2E), {"padding": "x" * 200_000}]).encode()
    before = state(charge)

    response = notify(body, signature="deadbeef")

    assert response.status_code == 401
    assert response.json() == REJECTED
    assert state(charge) == before
    inbound = InboundNotification.objects.get()
    assert inbound.status == Status.REJECTED
    assert inbound.body == body[:REJECTED_BODY_KEPT_BYTES].decode()
    assert inbound.error == f"bad signature (body of {len(body)} bytes, first {REJECTED_BODY_KEPT_BYTES} kept)"


def test_an_authentic_big_body_is_stored_whole(charge: Charge) -> None:
    body = json.dumps([event("charge.paid", charge, e2e_id=E2E), event("charge.paid", charge, pad="x" * 100_000)])
    response = notify(body.encode())
    assert response.status_code == 200, response.content
    assert last_inbound().body == body


@pytest.mark.parametrize("size", [256 * 1024 + 1, 3 * 1024 * 1024], ids=["just-past-the-cap", "megabytes"])
def test_a_body_past_the_cap_is_a_413_stored_nowhere_and_logged_nowhere(
    charge: Charge, size: int, caplog: pytest.LogCaptureFixture
) -> None:
    body = json.dumps(event("charge.paid", charge, e2e_id=E2E, pad="")).encode()
    body = body[:-2] + b"x" * (size - len(body)) + body[-2:]
    assert len(body) == size
    before = state(charge)

    with caplog.at_level(logging.INFO):
        response = notify(body)  # correctly signed, even

    assert response.status_code == 413
    assert response.json() == {"success": False, "message": "Corpo da requisição muito grande.", "data": None}
    assert state(charge) == before
    assert not InboundNotification.objects.exists()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_the_url_token_never_reaches_a_log_line(
    acquirer: Acquirer, charge: Charge, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    token = "s3cr3t-url-token-of-the-psp-0123456789"

    def explode(**kwargs: Any) -> Any:
        raise RuntimeError("processing exploded")

    monkeypatch.setattr("acquirers.callbacks.notification_process", explode)
    with caplog.at_level(logging.DEBUG):
        response = notify(event("charge.paid", charge), url=f"{URL}/{token}/pix")
    assert response.status_code == 500

    lines = [formatter.format(record) for record in caplog.records for formatter in project_formatters()]
    # Not vacuous: Django logged the path of the 500, and our handler its trace.
    assert any(f"{URL}/[redacted]/pix" in line and "Internal Server Error" in line for line in lines)
    assert any("Traceback" in line and "processing exploded" in line for line in lines)
    assert all(token not in line for line in lines), lines


def test_the_url_token_reaches_no_handler_of_the_django_loggers_under_debug(
    acquirer: Acquirer, charge: Charge, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "s3cr3t-url-token-of-the-psp-9876543210"

    def explode(**kwargs: Any) -> Any:
        raise RuntimeError("processing exploded")

    monkeypatch.setattr("acquirers.callbacks.notification_process", explode)
    # As `make run` configures logging (Django's defaults, then ours), with
    # every stream handler of the chain writing where the test reads.
    configure_logging(settings.LOGGING_CONFIG, logging_config("text", "DEBUG"))
    streams: list[io.StringIO] = []
    try:
        for name in ("django.request", "django.server"):
            logger: logging.Logger | None = logging.getLogger(name)
            while logger is not None:
                for handler in logger.handlers:
                    if isinstance(handler, logging.StreamHandler):
                        streams.append(io.StringIO())
                        handler.setStream(streams[-1])
                logger = logger.parent if logger.propagate else None
        with override_settings(DEBUG=True):
            response = notify(event("charge.paid", charge), url=f"{URL}/{token}/pix")
            # What runserver logs for each request it serves.
            logging.getLogger("django.server").info('"%s" %s %s', f"POST {URL}/{token}/pix HTTP/1.1", "500", "0")
    finally:
        configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)
    assert response.status_code == 500

    written = [stream.getvalue() for stream in streams]
    # Not vacuous: the 500's path and the request line were written, redacted.
    assert any(f"Internal Server Error: {URL}/[redacted]/pix" in text for text in written), written
    assert any(f"POST {URL}/[redacted]/pix HTTP/1.1" in text for text in written), written
    assert all(token not in text for text in written), written


# --------------------------------------------------------------------------- dispatch


def test_an_event_no_app_handles_is_stored_as_failed_like_an_unknown_record(
    charge: Charge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """acquirers imports no app: the apps register what their events do. An
    event of a kind nobody registered changes nothing and fails only itself."""
    monkeypatch.setattr(dispatch, "_HANDLERS", {k: v for k, v in dispatch._HANDLERS.items() if k != "charge"})
    before = state(charge)

    accepted(notify(event("charge.paid", charge, e2e_id=E2E)), 0)

    assert state(charge) == before
    inbound = last_inbound()
    assert inbound.status == Status.FAILED
    assert inbound.error == f"charge.paid {charge.txid}: {UnknownNotificationRecord.default_message}"


def test_the_apps_register_a_handler_for_every_kind_of_event() -> None:
    kinds = {dispatch.event_kind(Notification(event=e, reference="x")) for e in NotificationEvent}
    assert kinds == set(dispatch.EVENT_KINDS) == set(dispatch._HANDLERS)


def test_only_known_kinds_may_be_registered() -> None:
    with pytest.raises(ValueError, match="unknown event kind"):
        dispatch.register("refund", dispatch._HANDLERS["charge"])  # type: ignore[arg-type]
