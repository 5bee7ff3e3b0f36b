"""The back office in a real browser: Debian's headless Chromium driven by
Playwright, against pytest-django's live server on the test database.

Chromium comes from the machine's packages (``make test`` installs it when
missing; browser builds cannot be downloaded here), never from Playwright's
download. Without it the browser tests are skipped, except under ``CI=true``
where a missing browser is a failure, so CI never passes by skipping them.

Every test can write a screenshot with :func:`screenshot`: PNG files under
``var/test-artifacts/screenshots/`` (``PIX_TEST_ARTIFACTS`` moves them)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.test import Client

from tests.helpers import staff_login

CHROMIUM = os.environ.get("PIX_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(os.environ.get("PIX_TEST_ARTIFACTS", Path(settings.BASE_DIR) / "var" / "test-artifacts"))
VIEWPORT = {"width": 1440, "height": 900}


def screenshot(page: Any, name: str) -> Path:
    """A full-page PNG of what the staff member sees, kept as a test artefact."""
    path = ARTIFACTS / "screenshots" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium per test module. Module-scoped, not session-scoped:
    Playwright's sync API keeps an event loop running in this thread while it
    is started, and Django refuses ORM calls beside one. The tests' ORM calls
    are ordinary synchronous ones between browser steps, so the refusal is
    lifted (DJANGO_ALLOW_ASYNC_UNSAFE) for exactly as long as the loop runs,
    never for the other tests or the processes they start."""
    if CHROMIUM is None:
        message = "Debian's chromium is not installed (make test installs it: apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def staff_page(browser: Any, live_server: Any, django_user_model: Any) -> Iterator[Callable[..., Any]]:
    """``staff_page(group)`` (or ``staff_page(superuser=True)``): a new browser
    page logged in to the back office (password and second factor) as a new staff member, at 1440x900,
    pt-BR, America/Sao_Paulo. Every action the page takes is a real request
    to the live server; Playwright's default timeout bounds each wait."""
    contexts: list[Any] = []

    def open_page(group: str | None = None, *, superuser: bool = False, username: str | None = None) -> Any:
        name = username or (group or "admin").replace(" ", "-").lower()
        if superuser:
            user = django_user_model.objects.create_superuser(username=name, password="x", email=f"{name}@example.com")
        else:
            user = django_user_model.objects.create_user(username=name, password="x", is_staff=True)
            if group is not None:
                user.groups.add(Group.objects.get(name=group))
        client = staff_login(Client(), user)
        page = new_page(browser, live_server, contexts)
        page.context.add_cookies(
            [
                {
                    "name": settings.SESSION_COOKIE_NAME,
                    "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                    "url": live_server.url,
                }
            ]
        )
        return page

    yield open_page
    for context in contexts:
        context.close()


def new_page(browser: Any, live_server: Any, contexts: list[Any]) -> Any:
    """A page in a browser context of its own (kept in ``contexts`` to be
    closed), signed in to nothing."""
    context = browser.new_context(
        base_url=live_server.url, viewport=VIEWPORT, locale="pt-BR", timezone_id="America/Sao_Paulo"
    )
    context.set_default_timeout(15_000)
    contexts.append(context)
    page = context.new_page()
    # A page error (an exception in the page's script) fails the test, as a user would notice it.
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors
    return page


@pytest.fixture
def signed_out_page(browser: Any, live_server: Any) -> Iterator[Callable[[], Any]]:
    """``signed_out_page()``: a new browser page signed in to nothing, to sign
    in through the back office's own pages (password, then the second factor)."""
    contexts: list[Any] = []
    yield lambda: new_page(browser, live_server, contexts)
    for context in contexts:
        context.close()


@pytest.fixture
def admin_url() -> Callable[[str], str]:
    """``admin_url("accounts/account/")`` → the back office's path for it."""

    def url(path: str = "") -> str:
        return "/" + settings.ADMIN_URL + path

    return url
