"""The second factor is on wherever money is: production settings force it
(and refuse to start when told otherwise), the tests keep it; only local
settings (``make run``) leave it to each member."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from typing import Any

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.test import Client, override_settings
from django.utils import timezone

from core.middleware import check_site_middleware
from tests.helpers import app_code
from tests.platform.test_deployment import PROD_ENV, ROOT, _production_client_says, _run
from tests.staff.conftest import sign_in, submit

INDEX = "/admin/"


@pytest.mark.parametrize("value", ["false", "0", "off"])
def test_production_refuses_to_start_with_the_second_factor_off(value: str) -> None:
    result = _run({**PROD_ENV, "ADMIN_OTP_REQUIRED": value}, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "ADMIN_OTP_REQUIRED must be on in production" in result.stderr


def test_production_requires_it_unless_told_anything() -> None:
    assert _production_client_says("from django.conf import settings; print(json.dumps(settings.ADMIN_OTP_REQUIRED))")


def test_local_settings_leave_it_to_each_member_and_tests_keep_it() -> None:
    base = {k: v for k, v in os.environ.items() if k not in PROD_ENV and k != "ADMIN_OTP_REQUIRED"}
    script = "import django; django.setup(); from django.conf import settings; print(settings.ADMIN_OTP_REQUIRED)"
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "config.settings.local"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    assert settings.ADMIN_OTP_REQUIRED is True


def test_the_site_refuses_to_start_without_django_otps_middleware() -> None:
    without = [m for m in settings.SITE_MIDDLEWARE if m != "django_otp.middleware.OTPMiddleware"]
    assert check_site_middleware() == []
    with override_settings(SITE_MIDDLEWARE=without):
        assert [m.id for m in check_site_middleware()] == ["core.E002"]


@pytest.mark.django_db
@override_settings(ADMIN_OTP_REQUIRED=False)
def test_optional_a_member_who_never_enrolled_passes_on_the_password(client: Client, member: Any) -> None:
    answer = sign_in(client)
    assert (answer.status_code, answer["Location"]) == (302, INDEX)
    assert client.get(INDEX).status_code == 200
    # and may enrol from the back office
    assert client.get("/admin/otp/recovery-codes/").status_code == 200
    assert client.get("/admin/otp/enrol/").status_code == 200


@pytest.mark.django_db
@override_settings(ADMIN_OTP_REQUIRED=False)
def test_optional_a_member_who_enrolled_still_gives_a_code(client: Client, member: Any, app: Any) -> None:
    answer = sign_in(client)
    assert answer["Location"].startswith("/admin/otp/")
    assert client.get(INDEX).status_code == 302
    submit(client, app_code(app))
    assert client.get(INDEX).status_code == 200


@pytest.mark.django_db
def test_a_staff_session_ends_after_twelve_hours_and_with_the_browser(
    client: Client, member: Any, app: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not Django's two weeks: SESSION_COOKIE_AGE (12 h by default), and a
    cookie that does not outlive the browser."""
    sign_in(client)
    submit(client, app_code(app))
    signed_in = timezone.now()
    assert client.get(INDEX).status_code == 200

    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    assert (cookie["max-age"], cookie["expires"]) == ("", "")  # the browser drops it when it closes
    session = Session.objects.get(session_key=cookie.value)
    assert dt.timedelta(hours=11, minutes=59) < session.expire_date - signed_in <= dt.timedelta(hours=12)

    monkeypatch.setattr(timezone, "now", lambda: signed_in + dt.timedelta(hours=12, minutes=1))
    answer = client.get(INDEX)
    assert answer.status_code == 302
    assert answer["Location"].startswith("/admin/login/")
