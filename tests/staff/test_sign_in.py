"""Staff sign in to the back office in two steps: the password (django-axes
throttles it), then a code from their authenticator app or a recovery code
(django-otp). No admin page opens on a password alone."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import URLPattern, URLResolver, reverse
from django_otp.plugins.otp_static.models import StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from staff.views import LOCKED, WAIT, WRONG_CODE
from tests.helpers import app_code, wrong_code
from tests.staff.conftest import ELSEWHERE, past_the_throttle, sign_in, submit, time_passes

pytestmark = pytest.mark.django_db

INDEX = "/admin/"
VERIFY = "/admin/otp/"
#: The pages a member past the password and not yet past the code may open.
SECOND_STEP = {"login", "otp_verify", "otp_enrol", "otp_logout"}


def admin_paths(patterns: list[URLPattern | URLResolver], prefix: str = "") -> list[tuple[str, str]]:
    """(name, path) of every admin URL, each parameter filled with a value its converter takes."""
    found: list[tuple[str, str]] = []
    for pattern in patterns:
        route = str(pattern.pattern).lstrip("^").rstrip("$")
        route = re.sub(r"\(\?P<app_label>[^)]*\)", "accounts", route)
        route = route.replace("(?P<url>.*)", "nada/")
        route = re.sub(r"<(?:(\w+):)?\w+>", lambda m: str(uuid.uuid4()) if m.group(1) == "uuid" else "1", route)
        if isinstance(pattern, URLResolver):
            found += admin_paths(pattern.url_patterns, prefix + route)
        else:
            found.append((pattern.name or "", "/admin/" + prefix + route))
    return found


def test_no_admin_page_opens_on_a_password_alone(client: Client, django_user_model: Any) -> None:
    root = django_user_model.objects.create_superuser("root", "root@example.com", "x")
    TOTPDevice.objects.create(user=root, name="app", confirmed=True)
    client.force_login(root)  # the password step, and nothing more
    paths = [(name, path) for name, path in admin_paths(admin.site.get_urls()) if name not in SECOND_STEP]
    assert len(paths) > 100  # every model's list, add, change, history, delete, custom pages...

    opened = []
    for name, path in paths:
        for answer in (client.get(path), client.post(path, {"action": "delete_selected", "post": "yes"})):
            target = answer.get("Location", "")
            if answer.status_code != 302 or not target.startswith(("/admin/login/", INDEX)):
                opened.append((name, path, answer.status_code))
    assert opened == []
    # The way on: the login sends the member to the code step.
    assert client.get(reverse("admin:login")).headers["Location"] == f"{VERIFY}?next={INDEX}"


def test_password_then_code_opens_the_back_office(client: Client, app: TOTPDevice) -> None:
    password = sign_in(client)
    assert (password.status_code, password["Location"]) == (302, f"{VERIFY}?next={INDEX}")
    assert client.get(INDEX).status_code == 302

    page = client.get(password["Location"])
    assert page.status_code == 200
    assert "código de 6 dígitos do seu aplicativo autenticador" in page.content.decode()
    before = client.session.session_key

    done = submit(client, app_code(app))

    assert (done.status_code, done["Location"]) == (302, INDEX)
    assert client.get(INDEX).status_code == 200
    assert client.session.session_key != before  # a privilege gained: a new session id
    # A used code is spent: the same one again is refused elsewhere.
    app.refresh_from_db()
    assert app.last_t >= 0


def test_a_wrong_code_is_refused_in_pt_br_and_opens_nothing(client: Client, app: TOTPDevice) -> None:
    sign_in(client)
    typed = wrong_code(app)

    answer = submit(client, typed)

    assert answer.status_code == 200
    assert WRONG_CODE in answer.content.decode()
    assert client.get(INDEX).status_code == 302
    app.refresh_from_db()
    assert app.throttling_failure_count == 1
    # django-axes counted it as a failed login of this member, without keeping what was typed.
    attempt = AccessAttempt.objects.get(username="ana")
    assert (attempt.failures_since_start, attempt.path_info) == (1, VERIFY)
    assert typed not in attempt.post_data


def test_a_code_typed_again_at_once_waits_for_django_otps_throttle(client: Client, app: TOTPDevice) -> None:
    sign_in(client)
    submit(client, wrong_code(app))

    again = submit(client, app_code(app))  # right, but before the throttle's delay

    assert WAIT in again.content.decode()
    assert client.get(INDEX).status_code == 302
    app.refresh_from_db()
    assert app.throttling_failure_count == 1  # not even checked


def test_wrong_codes_in_a_row_lock_the_member_out_and_sign_them_out(
    client: Client, member: Any, app: TOTPDevice
) -> None:
    sign_in(client)
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert submit(client, wrong_code(app)).status_code == 200
        past_the_throttle(member)

    locked = submit(client, wrong_code(app))

    assert locked.status_code == 429
    assert "Acesso bloqueado temporariamente" in locked.content.decode()
    assert "_auth_user_id" not in client.session
    # From this address the password is refused too (django-axes), the right one included.
    assert sign_in(client).status_code == 429
    # From another address the password passes, and the code step is still locked.
    elsewhere = Client()
    assert sign_in(elsewhere, address=ELSEWHERE).status_code == 302
    step = elsewhere.get(VERIFY)
    assert step.status_code == 429
    assert LOCKED in step.content.decode()
    assert "_auth_user_id" not in elsewhere.session

    # After the cool-off the right code opens the back office.
    time_passes(member, settings.AXES_COOLOFF_TIME)
    assert sign_in(client).status_code == 302
    assert submit(client, app_code(app)).status_code == 302
    assert client.get(INDEX).status_code == 200


def test_signing_in_again_does_not_start_the_count_of_wrong_codes_over(
    client: Client, member: Any, app: TOTPDevice
) -> None:
    """django-axes forgets a pair's failures at each right password; the run
    of wrong codes is the devices' and only a right code ends it."""
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(client).status_code == 302  # the password again: django-axes' count starts over
        assert submit(client, wrong_code(app)).status_code == 200
        past_the_throttle(member)
    assert sign_in(client).status_code == 302

    locked = submit(client, wrong_code(app))

    assert locked.status_code == 429
    assert LOCKED in locked.content.decode()
    assert client.get(VERIFY).status_code == 302  # signed out: back to the login


def test_a_right_code_ends_the_run_of_wrong_ones(
    client: Client, member: Any, app: TOTPDevice, recovery_codes: list[str]
) -> None:
    """Wrong codes of both kinds make one run (each counted on its device); a right one ends it."""
    sign_in(client)
    for typed in ["zzzzzzzz", "yyyyyyyy", wrong_code(app), "xxxxxxxx"][: settings.AXES_FAILURE_LIMIT - 1]:
        assert submit(client, typed).status_code == 200
        past_the_throttle(member)
    assert submit(client, app_code(app)).status_code == 302
    client.logout()

    sign_in(client)
    assert submit(client, wrong_code(app)).status_code == 200  # one wrong code, not the fifth
    assert submit(client, "zzzzzzzz").status_code == 200
    assert not AccessAttempt.objects.filter(username="ana", failures_since_start__gte=3).exists()


def test_a_recovery_code_signs_in_once(client: Client, member: Any, recovery_codes: list[str]) -> None:
    code = recovery_codes[0]
    sign_in(client)

    typed = f"{code[:4].upper()}-{code[4:].upper()}"  # as written down
    done = submit(client, typed)

    assert (done.status_code, done["Location"]) == (302, INDEX)
    index = client.get(INDEX)
    assert index.status_code == 200
    said = "Você entrou com um código de recuperação, que não vale mais. Códigos restantes: 9."
    assert said in index.content.decode()
    logged = LogEntry.objects.filter(user=member, change_message__startswith="Entrou com um código de recuperação")
    assert logged.exists()
    assert not StaticToken.objects.filter(token=code).exists()

    client.logout()
    sign_in(client)
    again = submit(client, code)
    assert WRONG_CODE in again.content.decode()
    assert client.get(INDEX).status_code == 302
    assert StaticToken.objects.filter(device__user=member).count() == 9


def test_the_code_step_needs_the_password_first(client: Client, app: TOTPDevice) -> None:
    anonymous = client.get(VERIFY)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/admin/login/")
    assert submit(client, app_code(app)).status_code == 302
    assert client.get(INDEX).status_code == 302


def test_leaving_at_the_code_step_signs_out(client: Client, app: TOTPDevice) -> None:
    sign_in(client)
    left = client.post(reverse("admin:otp_logout"))
    assert (left.status_code, left["Location"]) == (302, "/admin/login/")
    assert "_auth_user_id" not in client.session


def test_a_next_elsewhere_stays_here(client: Client, app: TOTPDevice) -> None:
    sign_in(client)
    done = client.post(VERIFY + "?next=https://evil.example/", {"otp_token": app_code(app)})
    assert (done.status_code, done["Location"]) == (302, INDEX)
