"""Fixtures for acquirer tests: a fake API Pix PSP behind mTLS, with
certificates made here, and ``bacen_pix`` acquirers pointed at it."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from accounts.models import Account
from acquirers.adapters.apipix.client import client_for
from acquirers.models import Acquirer
from tests.acquirers.fake_efi import FakeEfi
from tests.acquirers.fake_psp import FakePsp
from tests.acquirers.fake_server import Pki
from tests.factories import AccountFactory, AcquirerFactory

# Secrets reach the adapter only through the environment (options name the
# variables). They are set when this file is imported, before any fixture
# runs, because the session's Celery worker process (started by whichever
# test needs it first) copies this process's environment once.
PKI = Pki.create()
CLIENT_ID = "pix-service-client"
ENV = {
    "PIX_TEST_BACEN_CLIENT_SECRET": secrets.token_urlsafe(24),
    "PIX_TEST_BACEN_CERT_PEM": Pki.cert_pem(PKI.client),
    "PIX_TEST_BACEN_KEY_PEM": Pki.key_pem(PKI.client),
    "PIX_TEST_BACEN_CA_PEM": PKI.psp_ca.cert_pem.bytes().decode(),
    "PIX_TEST_BACEN_NOTIFY_TOKEN": secrets.token_urlsafe(24),
}
os.environ.update(ENV)
CLIENT_SECRET = ENV["PIX_TEST_BACEN_CLIENT_SECRET"]
NOTIFY_TOKEN = ENV["PIX_TEST_BACEN_NOTIFY_TOKEN"]
CHAVE = "7d9f0335-8dcc-4054-9bf9-0dbd61d36906"


@pytest.fixture
def account(db: Any) -> Account:
    """A merchant with the cash-in fees the charge tests count on: 30 centavos + 1.5 %."""
    return AccountFactory(cashin_fee_fixed=30, cashin_fee_bps=150)


def bacen_options(psp: FakePsp, **overrides: Any) -> dict[str, Any]:
    """What staff would save: URLs, the client id, and environment variable names."""
    return {
        "base_url": psp.base_url,
        "token_url": psp.token_url,
        "client_id": psp.client_id,
        "client_secret_env": "PIX_TEST_BACEN_CLIENT_SECRET",
        "cert_pem_env": "PIX_TEST_BACEN_CERT_PEM",
        "key_pem_env": "PIX_TEST_BACEN_KEY_PEM",
        "ca_bundle_pem_env": "PIX_TEST_BACEN_CA_PEM",
        "chave": CHAVE,
        "notification_token_env": "PIX_TEST_BACEN_NOTIFY_TOKEN",
        **overrides,
    }


@pytest.fixture
def fake_psp() -> Iterator[FakePsp]:
    """The PSP; the test fails if anything sent or answered broke the spec."""
    # A client id of its own: the token cache is keyed by it, and a port (so a
    # token URL) may come back in a later test, whose PSP never issued that token.
    client_id = f"{CLIENT_ID}-{secrets.token_hex(4)}"
    psp = FakePsp(pki=PKI, client_id=client_id, client_secret=CLIENT_SECRET, chave=CHAVE)
    with psp.running():
        yield psp
    assert psp.violations == [], "\n".join(psp.violations)


@pytest.fixture
def make_bacen_acquirer(fake_psp: FakePsp, db: Any) -> Callable[..., Acquirer]:
    def make(key: str = "bacen", *, options: dict[str, Any] | None = None, **fields: Any) -> Acquirer:
        defaults: dict[str, Any] = {"connect_timeout_ms": 2000, "read_timeout_ms": 3000}
        return AcquirerFactory(
            key=key, adapter="bacen_pix", options=options or bacen_options(fake_psp), **(defaults | fields)
        )

    return make


@pytest.fixture
def bacen_acquirer(make_bacen_acquirer: Callable[..., Acquirer]) -> Acquirer:
    """The platform's default acquirer, at the fake PSP."""
    return make_bacen_acquirer(default_priority=1)


@pytest.fixture
def one_ask_acquirer(make_bacen_acquirer: Callable[..., Acquirer], fake_psp: FakePsp) -> Acquirer:
    """The default acquirer at the fake PSP with a short read timeout (a
    hanging PSP is cut in well under a second) and no retry inside the
    client: each ask is one request, so a test counts them."""
    options = bacen_options(fake_psp, max_retries=0)
    acquirer = make_bacen_acquirer(default_priority=1, read_timeout_ms=700, options=options)
    warm_up(acquirer)
    return acquirer


def warm_up(acquirer: Acquirer) -> None:
    """Fetch the token now (it is shared through Redis), so a test about
    timeouts measures the call under test, not a first TLS handshake and
    token request on a busy machine."""
    from acquirers.adapters import build, config_of

    options = build(acquirer).options  # as cleaned by the adapter
    client_for(config_of(acquirer), options).access_token(time.monotonic() + 30)


# --------------------------------------------------------------------------- efi_pix

# Same PKI and client certificate as the API Pix fake (the variables above);
# its own client secret and notification token.
EFI_ENV = {
    "PIX_TEST_EFI_CLIENT_SECRET": secrets.token_urlsafe(24),
    "PIX_TEST_EFI_NOTIFY_TOKEN": secrets.token_urlsafe(24),
}
os.environ.update(EFI_ENV)
EFI_NOTIFY_TOKEN = EFI_ENV["PIX_TEST_EFI_NOTIFY_TOKEN"]
#: The paying account's key at Efí.
EFI_CHAVE = "5f84a4c5-c5cb-4599-9f13-7eb4d419dacc"


def efi_options(efi: FakeEfi, **overrides: Any) -> dict[str, Any]:
    """What staff would save for Efí: the API's URL (the token URL is derived),
    the client id, environment variable names, the paying key."""
    return {
        "base_url": efi.base_url,
        "client_id": efi.client_id,
        "client_secret_env": "PIX_TEST_EFI_CLIENT_SECRET",
        "cert_pem_env": "PIX_TEST_BACEN_CERT_PEM",
        "key_pem_env": "PIX_TEST_BACEN_KEY_PEM",
        "ca_bundle_pem_env": "PIX_TEST_BACEN_CA_PEM",
        "chave": EFI_CHAVE,
        "notification_token_env": "PIX_TEST_EFI_NOTIFY_TOKEN",
        **overrides,
    }


@pytest.fixture
def fake_efi() -> Iterator[FakeEfi]:
    """Efí's send-Pix API; the test fails if anything sent broke Efí's documented shapes."""
    efi = FakeEfi(
        pki=PKI,
        client_id=f"efi-client-{secrets.token_hex(4)}",  # own token cache key per test (see fake_psp)
        client_secret=EFI_ENV["PIX_TEST_EFI_CLIENT_SECRET"],
        chave=EFI_CHAVE,
    )
    with efi.running():
        yield efi
    assert efi.violations == [], "\n".join(efi.violations)


@pytest.fixture
def make_efi_acquirer(fake_efi: FakeEfi, db: Any) -> Callable[..., Acquirer]:
    def make(key: str = "efi", *, options: dict[str, Any] | None = None, **fields: Any) -> Acquirer:
        defaults: dict[str, Any] = {"connect_timeout_ms": 2000, "read_timeout_ms": 3000}
        return AcquirerFactory(
            key=key, adapter="efi_pix", options=options or efi_options(fake_efi), **(defaults | fields)
        )

    return make


@pytest.fixture
def efi_acquirer(make_efi_acquirer: Callable[..., Acquirer]) -> Acquirer:
    return make_efi_acquirer()
