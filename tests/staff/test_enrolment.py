"""A staff member without an authenticator app enrols one at their first
sign-in (QR code and secret, confirmed with a code), gets recovery codes
shown once, and can make new ones after a code from the app."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse
from django_otp.oath import totp
from django_otp.plugins.otp_static.models import StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from staff.views import WRONG_CODE
from tests.helpers import app_code, wrong_code
from tests.platform.test_admin_language import ENGLISH, shown
from tests.staff.conftest import past_the_throttle, sign_in, submit

pytestmark = pytest.mark.django_db

INDEX = "/admin/"
ENROL = "/admin/otp/enrol/"
RECOVERY = "/admin/otp/recovery-codes/"


def secret_on(page: str) -> bytes:
    """The secret as a staff member reads it off the page to type it into their app."""
    match = re.search(r'<code id="otp-secret">([A-Z2-7 ]+)</code>', page)
    assert match is not None
    return base64.b32decode(match.group(1).replace(" ", ""))


def code_for(secret: bytes) -> str:
    return f"{totp(secret):06d}"


def codes_on(page: str) -> list[str]:
    return re.findall(r"<li><code>([a-z2-7]{8})</code></li>", page)


def test_a_member_without_an_app_enrols_at_their_first_sign_in(client: Client, member: Any) -> None:
    password = sign_in(client)
    step = client.get(password["Location"])
    assert (step.status_code, step["Location"]) == (302, f"{ENROL}?next={INDEX}")

    page = client.get(step["Location"]).content.decode()
    assert 'src="data:image/svg+xml' in page  # the QR code, drawn in the page: no outside service
    secret = secret_on(page)
    assert secret_on(client.get(ENROL).content.decode()) == secret  # a reload keeps the app's entry good

    wrong = submit(client, "000000" if code_for(secret) != "000000" else "111111", url=ENROL + "?next=/admin/")
    assert WRONG_CODE in wrong.content.decode()
    assert not TOTPDevice.objects.filter(user=member, confirmed=True).exists()
    assert client.get(INDEX).status_code == 302
    past_the_throttle(member)

    done = submit(client, code_for(secret), url=ENROL + "?next=/admin/")

    assert done.status_code == 303
    shown_page = client.get(done["Location"])
    assert shown_page.status_code == 200
    assert "no-store" in shown_page["Cache-Control"]
    codes = codes_on(shown_page.content.decode())
    assert len(codes) == 10
    assert sorted(codes) == sorted(StaticToken.objects.filter(device__user=member).values_list("token", flat=True))
    # Shown once: the page again shows nothing.
    again = client.get(done["Location"], follow=True)
    assert codes_on(again.content.decode()) == []
    assert "já foram exibidos" in again.content.decode()
    # Enrolled and verified: the back office opens; the enrolment is in the admin log.
    assert client.get(INDEX).status_code == 200
    assert TOTPDevice.objects.get(user=member).confirmed
    assert LogEntry.objects.filter(
        user=member, object_id=str(member.pk), change_message__startswith="Verificação em duas etapas configurada"
    ).exists()


def test_an_enrolled_member_cannot_enrol_another_app(client: Client, member: Any, app: TOTPDevice) -> None:
    sign_in(client)
    answer = client.get(ENROL)
    assert (answer.status_code, answer["Location"]) == (302, f"/admin/otp/?next={INDEX}")
    assert client.post(ENROL, {"otp_token": "123456"}).status_code == 302
    assert TOTPDevice.objects.filter(user=member).count() == 1


def test_new_recovery_codes_after_a_code_from_the_app(
    client: Client, member: Any, app: TOTPDevice, recovery_codes: list[str]
) -> None:
    sign_in(client)
    submit(client, app_code(app))
    page = client.get(RECOVERY).content.decode()
    assert 'id="otp-codes-left">10<' in page

    # A recovery code cannot make more: only the phone proves the phone.
    refused = submit(client, recovery_codes[0], url=RECOVERY)
    assert WRONG_CODE in refused.content.decode()
    assert StaticToken.objects.filter(token=recovery_codes[0]).exists()
    past_the_throttle(member)

    done = submit(client, app_code(app), url=RECOVERY)

    assert done.status_code == 303
    new = codes_on(client.get(done["Location"]).content.decode())
    assert len(new) == 10
    assert set(new).isdisjoint(recovery_codes)
    assert sorted(new) == sorted(StaticToken.objects.filter(device__user=member).values_list("token", flat=True))
    assert LogEntry.objects.filter(user=member, change_message__startswith="Novos códigos de recuperação").exists()


def test_wrong_codes_when_making_new_ones_count_as_sign_in_failures(
    client: Client, member: Any, app: TOTPDevice, recovery_codes: list[str]
) -> None:
    sign_in(client)
    submit(client, app_code(app))
    for _ in range(4):
        assert submit(client, wrong_code(app), url=RECOVERY).status_code == 200
        past_the_throttle(member)

    locked = submit(client, wrong_code(app), url=RECOVERY)

    assert locked.status_code == 429
    assert client.get(INDEX).status_code == 302  # a stolen session cannot guess its way to new codes
    assert sorted(recovery_codes) == sorted(StaticToken.objects.values_list("token", flat=True))


def test_the_second_factor_pages_read_in_pt_br(client: Client, member: Any, django_user_model: Any) -> None:
    sign_in(client)
    pages = [client.get(ENROL), submit(client, "000000", url=ENROL)]
    device = TOTPDevice.objects.get(user=member)
    past_the_throttle(member)
    enrolled = submit(client, app_code(device), url=ENROL)
    pages += [client.get(enrolled["Location"]), client.get(RECOVERY), client.get(INDEX)]
    client.logout()
    sign_in(client)
    pages += [client.get("/admin/otp/"), submit(client, wrong_code(device))]
    for _ in range(4):
        past_the_throttle(member)
        pages.append(submit(client, wrong_code(device)))
    assert pages[-1].status_code == 429

    english = {
        page.request["PATH_INFO"]: sorted({m.group(0) for m in ENGLISH.finditer(shown(page.content.decode()))})
        for page in pages
    }
    assert {path: words for path, words in english.items() if words} == {}
    assert "Verificação em duas etapas" in shown(pages[4].content.decode())  # the user link of every page


def test_django_otps_device_pages_are_not_in_the_back_office() -> None:
    """They would show any superuser each member's secret and recovery codes."""
    from django.contrib import admin
    from django_otp.plugins.otp_static.models import StaticDevice

    assert not admin.site.is_registered(TOTPDevice)
    assert not admin.site.is_registered(StaticDevice)
    assert reverse("admin:auth_user_changelist")
