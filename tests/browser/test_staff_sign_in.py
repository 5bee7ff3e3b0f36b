"""Staff sign in to the back office in a real browser: the password, then a
code from an authenticator app (enrolled at the first sign-in from the QR
page's secret), a wrong code, and a member locked out by wrong codes, let
back in by a colleague's reset, or by a recovery code when the phone is lost."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django_otp.oath import totp
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice
from playwright.sync_api import expect

from staff.views import WRONG_CODE
from tests.browser.conftest import screenshot
from tests.helpers import app_code, wrong_code
from tests.staff.conftest import PASSWORD, enrolled_app, new_member, past_the_throttle

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def member(django_user_model: Any) -> Any:
    return new_member(django_user_model, "carla")


@pytest.fixture
def app(member: Any) -> TOTPDevice:
    return enrolled_app(member)


def sign_in(page: Any, admin_url: Any, username: str = "carla") -> None:
    """The admin's login form, as a member fills it."""
    page.goto(admin_url("login/"))
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.locator("#login-form input[type=submit]").click()


def type_code(page: Any, code: str, button: str = "Verificar") -> None:
    page.fill("input[name=otp_token]", code)
    page.get_by_role("button", name=button).click()


def at_the_index(page: Any, admin_url: Any) -> None:
    page.wait_for_url(f"**{admin_url()}")
    expect(page.locator("#user-tools")).to_contain_text("Verificação em duas etapas")


def test_a_new_member_enrols_then_signs_in_with_a_code(signed_out_page: Any, admin_url: Any, member: Any) -> None:
    page = signed_out_page()
    sign_in(page, admin_url)

    page.wait_for_url(lambda url: "/otp/enrol/?next=" in url)
    expect(page.locator("#otp-qr-code")).to_be_visible()
    # The secret as a member types it into their app, and the code the app then shows.
    secret = base64.b32decode(page.locator("#otp-secret").inner_text().replace(" ", ""))
    screenshot(page, "staff-enrol")
    type_code(page, f"{totp(secret):06d}", button="Confirmar")

    page.wait_for_url("**/otp/recovery-codes/*/")
    codes = page.locator("#otp-recovery-codes li").all_inner_texts()
    assert len(codes) == 10
    assert sorted(codes) == sorted(StaticToken.objects.filter(device__user=member).values_list("token", flat=True))
    expect(page.locator(".messagelist .warning")).to_contain_text("esta página não os mostra de novo")
    screenshot(page, "staff-recovery-codes")
    page.get_by_role("link", name="Concluído").click()
    at_the_index(page, admin_url)

    page.locator("#logout-form button").click()
    sign_in(page, admin_url)
    page.wait_for_url(lambda url: "/otp/?next=" in url)
    screenshot(page, "staff-second-step")
    type_code(page, app_code(TOTPDevice.objects.get(user=member)))
    at_the_index(page, admin_url)
    assert page.errors == []


def test_a_wrong_code_is_refused_and_the_right_one_opens(
    signed_out_page: Any, admin_url: Any, member: Any, app: TOTPDevice
) -> None:
    page = signed_out_page()
    sign_in(page, admin_url)
    page.wait_for_url(lambda url: "/otp/?next=" in url)

    type_code(page, wrong_code(app))

    expect(page.locator(".errorlist")).to_have_text(WRONG_CODE)
    assert "/otp/" in page.url
    page.goto(admin_url())  # nothing opens on the password alone
    page.wait_for_url(lambda url: "/otp/?next=" in url)
    past_the_throttle(member)
    type_code(page, app_code(app))
    at_the_index(page, admin_url)
    assert page.errors == []


def test_a_locked_out_member_is_reset_by_a_colleague_and_enrols_again(
    signed_out_page: Any, staff_page: Any, admin_url: Any, member: Any, app: TOTPDevice
) -> None:
    page = signed_out_page()
    sign_in(page, admin_url)
    page.wait_for_url(lambda url: "/otp/?next=" in url)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        past_the_throttle(member)
        type_code(page, wrong_code(app))

    expect(page.locator("h1")).to_have_text("Acesso bloqueado temporariamente")
    screenshot(page, "staff-locked-out")
    sign_in(page, admin_url)  # even the password is refused now
    expect(page.locator("h1")).to_have_text("Acesso bloqueado temporariamente")

    colleague = staff_page(superuser=True, username="chefe")
    colleague.goto(admin_url("auth/user/"))
    row = colleague.locator("#result_list tr", has_text="carla")
    expect(row).to_contain_text("Configurada")
    row.locator("input.action-select").check()
    colleague.select_option("select[name=action]", "reset_second_factor")
    colleague.locator("button[name=index]").click()
    expect(colleague.locator("#content-main")).to_contain_text("carla")
    colleague.fill("textarea[name=reason]", "perdeu o celular; confirmado por vídeo")
    colleague.get_by_role("button", name="Confirmar: Redefinir verificação em duas etapas").click()
    expect(colleague.locator(".messagelist")).to_contain_text("Verificação em duas etapas redefinida: 1 membro")
    entry = LogEntry.objects.get(object_id=str(member.pk))
    assert (entry.user.username, entry.change_message.endswith("Motivo: perdeu o celular; confirmado por vídeo")) == (
        "chefe",
        True,
    )

    sign_in(page, admin_url)
    page.wait_for_url(lambda url: "/otp/enrol/?next=" in url)
    expect(page.locator("#otp-secret")).to_be_visible()
    assert page.errors == []
    assert colleague.errors == []


def test_a_member_who_lost_the_phone_signs_in_once_with_a_recovery_code(
    signed_out_page: Any, admin_url: Any, member: Any, app: TOTPDevice
) -> None:
    device = StaticDevice.objects.create(user=member, name="Códigos de recuperação", confirmed=True)
    StaticToken.objects.bulk_create([StaticToken(device=device, token=t) for t in ("abcdefgh", "ijklmnop")])
    page = signed_out_page()
    sign_in(page, admin_url)
    page.wait_for_url(lambda url: "/otp/?next=" in url)

    type_code(page, "ABCD-EFGH")

    at_the_index(page, admin_url)
    expect(page.locator(".messagelist")).to_contain_text("Você entrou com um código de recuperação")
    page.locator("#logout-form button").click()
    sign_in(page, admin_url)
    page.wait_for_url(lambda url: "/otp/?next=" in url)
    type_code(page, "abcdefgh")
    expect(page.locator(".errorlist")).to_have_text(WRONG_CODE)
    assert page.errors == []
