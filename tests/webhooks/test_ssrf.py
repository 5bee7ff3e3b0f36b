"""The outbound client refuses local, private and reserved destinations
before any connection, never follows a redirect, and registration refuses
the same URLs (decisions §6). The destination is a real HTTP server on
loopback, so "nothing reached it" is observed, not assumed."""

from __future__ import annotations

import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.db import transaction

from accounts.models import Account
from webhooks import http, services
from webhooks.delivery import delivery_attempt
from webhooks.models import WebhookDelivery

BODY = b'{"id":"evt","event_type":"transaction","data":{}}'
HEADERS = {"Content-Type": "application/json"}

# Spellings of this machine's loopback; {port} is the receiver's. https:
# plain http is refused before the address is even looked at.
LOOPBACK_SPELLINGS = [
    "https://localhost:{port}/hook",
    "https://[::1]:{port}/hook",
    "https://2130706433:{port}/hook",  # decimal 127.0.0.1
    "https://0x7f000001:{port}/hook",  # hex
    "https://017700000001:{port}/hook",  # octal
    "https://127.1:{port}/hook",  # short form
    "https://0.0.0.0:{port}/hook",  # reaches local listeners on Linux
    "https://[::ffff:127.0.0.1]:{port}/hook",  # IPv4-mapped IPv6
    "https://user:pw@127.0.0.1:{port}/hook",
]
# Addresses that would not answer: only an early refusal returns quickly.
UNREACHABLE_PRIVATE = [
    "https://169.254.169.254/latest/meta-data/",
    "https://10.0.0.1/hook",
    "https://192.168.255.254/hook",
    "https://172.31.255.254/hook",
    "https://100.64.0.1/hook",  # CGNAT
    "https://[fd00::1]/hook",  # ULA
    "https://[fe80::1]/hook",  # link-local
    "https://224.0.0.1/hook",  # multicast
    "https://240.0.0.1/hook",  # reserved
    "https://10.0.0.1:8443/hook",
]
# Registration refuses what resolves to a local, private or reserved address.
FORBIDDEN_URLS = [
    "http://127.0.0.1/x",
    "http://localhost/x",
    "http://169.254.169.254/latest/meta-data",
    "http://10.0.0.1/x",
    "http://[::1]/x",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://127.1/",
    "http://100.64.0.1/",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://224.0.0.1/",
    "http://0.0.0.0/",
    "http://240.0.0.1/",
    "http://[::ffff:10.0.0.1]/",
    "http://192.0.0.8/",
    "https://user:pw@127.0.0.1:8443/x",
]


@pytest.fixture
def filtered(settings: Any) -> Any:
    """Production behaviour: the address filter on."""
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
    settings.WEBHOOK_CONNECT_TIMEOUT = 3.0
    settings.WEBHOOK_TIMEOUT = 15.0
    return settings


@pytest.fixture
def unfiltered(settings: Any) -> Any:
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
    return settings


def port_of(receiver: Any) -> int:
    port = urlsplit(receiver.url).port
    assert port is not None
    return port


def assert_blocked(result: http.HttpResult) -> None:
    assert result.status_code is None
    assert result.succeeded is False
    assert "blocked" in result.error
    assert result.body == ""


# --------------------------------------------------------------------------- post: the filter on


def secure(url: str) -> str:
    """``url`` over https: the address filter refuses it before any handshake."""
    return url.replace("http://", "https://", 1)


def test_loopback_receiver_is_never_reached(filtered: Any, receiver: Any) -> None:
    result = http.post(secure(receiver.url), BODY, HEADERS)
    assert_blocked(result)
    assert receiver.requests == []


@pytest.mark.parametrize("template", LOOPBACK_SPELLINGS)
def test_every_spelling_of_loopback_is_refused(filtered: Any, receiver: Any, template: str) -> None:
    result = http.post(template.format(port=port_of(receiver)), BODY, HEADERS)
    assert_blocked(result)
    assert receiver.requests == []


@pytest.mark.parametrize("url", UNREACHABLE_PRIVATE)
def test_private_address_is_refused_before_any_connection(filtered: Any, url: str) -> None:
    # A connection attempt would take up to the 3 s connect timeout (or fail
    # with a connection error); the refusal comes first and says so.
    started = time.monotonic()
    result = http.post(url, BODY, HEADERS)
    elapsed = time.monotonic() - started
    assert_blocked(result)
    assert elapsed < 1.0
    assert result.latency_ms < 1000


def test_the_filter_is_read_on_every_call(settings: Any, receiver: Any) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
    assert_blocked(http.post(secure(receiver.url), BODY, HEADERS))
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
    assert http.post(receiver.url, BODY, HEADERS).succeeded
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
    assert_blocked(http.post(secure(receiver.url), BODY, HEADERS))
    assert len(receiver.requests) == 1


# --------------------------------------------------------------------------- post: the filter off (dev and tests)


def test_loopback_is_reachable_when_private_networks_are_allowed(unfiltered: Any, receiver: Any) -> None:
    result = http.post(receiver.url, BODY, {**HEADERS, "X-Webhook-Code": "abc"})

    assert result.status_code == 200
    assert result.succeeded is True
    assert result.error == ""
    assert result.body == "ok"
    assert len(result.body) <= http.RESPONSE_BODY_LIMIT
    [request] = receiver.requests
    assert request.path == "/hook"
    assert request.body == BODY
    assert request.headers["X-Webhook-Code"] == "abc"
    assert request.headers["User-Agent"].startswith("PixService-Webhook/")


@pytest.mark.parametrize(
    "location", ["http://127.0.0.1:1/private", "http://169.254.169.254/latest/meta-data/", "/elsewhere"]
)
def test_redirects_are_never_followed(unfiltered: Any, receiver: Any, location: str) -> None:
    receiver.respond((302, {"Location": location}, 0))
    result = http.post(receiver.url, BODY, HEADERS)
    assert result.status_code == 302
    assert result.succeeded is False
    # Only the first request reached anything: a followed relative redirect
    # would have come back to this same receiver.
    assert len(receiver.requests) == 1


@pytest.mark.parametrize("status", [301, 303, 307, 308])
def test_every_redirect_status_is_a_failure(unfiltered: Any, receiver: Any, status: int) -> None:
    receiver.respond((status, {"Location": "/again"}, 0))
    result = http.post(receiver.url, BODY, HEADERS)
    assert (result.status_code, result.succeeded) == (status, False)
    assert len(receiver.requests) == 1


def test_refused_connection_is_reported_not_raised(unfiltered: Any) -> None:
    result = http.post("http://127.0.0.1:1/hook", BODY, HEADERS)
    assert result.status_code is None
    assert result.succeeded is False
    assert result.error.startswith("ConnectionError")


# --------------------------------------------------------------------------- url_refusal (registration)


@pytest.mark.parametrize("url", FORBIDDEN_URLS)
def test_url_refusal_refuses_local_private_and_reserved(filtered: Any, url: str) -> None:
    assert http.url_refusal(url) == http.URL_NOT_ALLOWED


@pytest.mark.parametrize("url", ["https://8.8.8.8/", "https://1.1.1.1:8443/hook", "https://[2001:4860:4860::8888]/"])
def test_url_refusal_accepts_public_addresses(filtered: Any, url: str) -> None:
    assert http.url_refusal(url) is None


def test_url_refusal_accepts_a_name_that_does_not_resolve_now(filtered: Any) -> None:
    # Every delivery resolves and checks the address again.
    assert http.url_refusal("https://nonexistent.invalid/") is None


@pytest.mark.parametrize("url", ["http://8.8.8.8/", "http://[2001:4860:4860::8888]/", "http://nonexistent.invalid/"])
def test_url_refusal_wants_https_where_private_networks_are_refused(filtered: Any, url: str) -> None:
    # Payloads carry PIX keys (CPF, phone, e-mail): never in clear text in production.
    assert http.url_refusal(url) == http.URL_HTTPS_REQUIRED


@pytest.mark.parametrize("url", ["ftp://x", "http://", "https://", "example.com/hook", "file:///etc/passwd", ""])
def test_url_refusal_names_invalid_urls(filtered: Any, url: str) -> None:
    assert http.url_refusal(url) == http.URL_INVALID


@pytest.mark.parametrize("url", ["http://example.com:99999/", "http://8.8.8.8:65536/"])
def test_url_refusal_names_a_port_out_of_range_invalid(filtered: Any, url: str) -> None:
    assert http.url_refusal(url) == http.URL_INVALID


def test_post_to_a_port_out_of_range_is_reported_not_raised(filtered: Any) -> None:
    result = http.post("https://8.8.8.8:99999/hook", BODY, HEADERS)
    assert result.status_code is None
    assert result.succeeded is False
    assert result.error


@pytest.mark.parametrize("url", ["http://127.0.0.1/x", "http://10.0.0.1/x", "http://[::1]/x"])
def test_url_refusal_allows_private_networks_when_the_setting_is_on(unfiltered: Any, url: str) -> None:
    assert http.url_refusal(url) is None


def test_url_refusal_still_names_invalid_urls_when_the_setting_is_on(unfiltered: Any) -> None:
    assert http.url_refusal("ftp://x") == http.URL_INVALID


def test_the_messages(filtered: Any) -> None:
    assert http.URL_NOT_ALLOWED == "URL não permitida: o endereço é local, privado ou reservado."
    assert http.URL_INVALID == "Informe uma URL http ou https válida."
    assert http.URL_HTTPS_REQUIRED == "A URL deve usar https: os eventos levam dados do pagador."


# --------------------------------------------------------------------------- deliveries check the address again


def _emit(account: Account, postback_url: str = "") -> None:
    with transaction.atomic():
        services.event_emit(
            account_id=account.pk,
            event_type="transaction",
            record_id=uuid.uuid4(),
            status="paid",
            data={"x": 1},
            postback_url=postback_url,
        )


@pytest.mark.django_db
def test_delivery_to_an_endpoint_that_became_loopback_is_blocked(
    account: Account, settings: Any, receiver: Any
) -> None:
    # Registered while private networks were allowed (or a name that later
    # resolves to loopback): the delivery itself refuses to send.
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
    endpoint = services.endpoint_create(account=account, url=secure(receiver.url)).endpoint
    _emit(account)
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False

    delivery_attempt(delivery_id=delivery.pk)

    assert receiver.requests == []
    [attempt] = delivery.attempts.all()
    assert attempt.status_code is None
    assert attempt.succeeded is False
    assert "blocked" in attempt.error
    delivery.refresh_from_db()
    assert delivery.status != WebhookDelivery.Status.SUCCEEDED
    assert delivery.last_status_code is None


@pytest.mark.django_db
def test_postback_to_loopback_is_blocked(account: Account, filtered: Any, receiver: Any) -> None:
    _emit(account, postback_url=secure(receiver.url))
    delivery = WebhookDelivery.objects.get(endpoint__isnull=True)

    delivery_attempt(delivery_id=delivery.pk)

    assert receiver.requests == []
    [attempt] = delivery.attempts.all()
    assert "blocked" in attempt.error
    assert attempt.succeeded is False


# --------------------------------------------------------------------------- plain http in production


def test_post_over_plain_http_is_refused_before_any_connection(filtered: Any) -> None:
    # A public name: only the scheme can refuse it, and before a lookup.
    result = http.post("http://example.com/hook", BODY, HEADERS)
    assert (result.status_code, result.succeeded, result.error) == (None, False, http.URL_HTTPS_REQUIRED)
    assert result.latency_ms == 0


@pytest.mark.django_db
def test_a_stored_http_endpoint_and_postback_are_not_sent_to_in_production(
    account: Account, settings: Any, receiver: Any
) -> None:
    # Stored while http was allowed (or by a path that did not check).
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
    services.endpoint_create(account=account, url=receiver.url)
    _emit(account, postback_url=receiver.url)
    settings.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False

    for delivery in WebhookDelivery.objects.all():
        delivery_attempt(delivery_id=delivery.pk)

    assert receiver.requests == []
    attempts = [(a.status_code, a.succeeded, a.error) for d in WebhookDelivery.objects.all() for a in d.attempts.all()]
    assert attempts == [(None, False, http.URL_HTTPS_REQUIRED)] * 2
    assert not WebhookDelivery.objects.filter(status=WebhookDelivery.Status.SUCCEEDED).exists()
