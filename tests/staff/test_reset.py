"""A staff member who lost their phone is reset by a colleague who may change
users (superusers; none of the back-office groups): their app and recovery
codes go, their sessions stop opening the back office, their next sign-in
enrols again, and the admin log says who did it and why."""

from __future__ import annotations

from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from tests.helpers import admin_action, admin_messages, staff_login, wrong_code
from tests.staff.conftest import past_the_throttle, sign_in, submit

pytestmark = pytest.mark.django_db

USERS = "/admin/auth/user/"
INDEX = "/admin/"


def reset(client: Client, member: Any, reason: str | None = "perdeu o celular; confirmado por vídeo") -> Any:
    return admin_action(client, USERS, "reset_second_factor", [member.pk], reason=reason)


def test_a_colleague_resets_a_locked_out_member_who_enrols_again(
    admin_client: Client, admin_user: Any, member: Any, app: TOTPDevice, recovery_codes: list[str]
) -> None:
    own = staff_login(Client(), member)  # a session of the member's, verified before the loss
    locked_out = Client()
    sign_in(locked_out)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        past_the_throttle(member)
        submit(locked_out, wrong_code(app))
    assert sign_in(locked_out).status_code == 429

    confirmation = reset(admin_client, member, reason=None)
    assert "ana" in confirmation.content.decode()
    assert TOTPDevice.objects.filter(user=member).exists()  # nothing yet: a reason first

    done = reset(admin_client, member)

    assert admin_messages(done) == [
        "Verificação em duas etapas redefinida: 1 membro da equipe; "
        "no próximo login, cada um configura um novo aplicativo."
    ]
    assert not TOTPDevice.objects.filter(user=member).exists()
    assert not StaticDevice.objects.filter(user=member).exists()
    assert not StaticToken.objects.filter(token__in=recovery_codes).exists()
    assert not AccessAttempt.objects.filter(username="ana").exists()
    entry = LogEntry.objects.get(object_id=str(member.pk), change_message__contains="redefinida")
    assert entry.user == admin_user
    assert entry.change_message.endswith("Motivo: perdeu o celular; confirmado por vídeo")
    # The member's old session no longer opens the back office...
    assert own.get(INDEX).status_code == 302
    # ...and their next sign-in enrols a new app.
    password = sign_in(locked_out)
    assert password.status_code == 302
    assert locked_out.get(password["Location"])["Location"].startswith("/admin/otp/enrol/")


def test_the_users_list_shows_who_enrolled(admin_client: Client, member: Any, django_user_model: Any) -> None:
    django_user_model.objects.create_user(username="bruno", password="x", is_staff=True)
    TOTPDevice.objects.create(user=member, name="app", confirmed=True)
    page = admin_client.get(USERS).content.decode()
    assert "Verificação em duas etapas" in page
    assert "Configurada" in page
    assert "Não configurada" in page


def test_no_back_office_group_may_reset(staff_member: Any, member: Any, app: TOTPDevice) -> None:
    for group in ("support", "operations", "finance"):
        colleague = staff_member(group, f"{group}-colleague")
        assert colleague.get(USERS).status_code == 403
        reset(colleague, member)
    assert TOTPDevice.objects.filter(user=member).exists()
    assert not LogEntry.objects.filter(change_message__contains="redefinida").exists()


def test_nobody_resets_their_own(admin_client: Client, admin_user: Any) -> None:
    own = TOTPDevice.objects.get(user=admin_user)

    done = reset(admin_client, admin_user)

    assert admin_messages(done) == [
        "A sua própria verificação em duas etapas só outro administrador redefine; nada mudou para você."
    ]
    assert TOTPDevice.objects.filter(pk=own.pk).exists()
    assert admin_client.get(INDEX).status_code == 200


def test_the_reset_page_reads_in_pt_br(admin_client: Client, member: Any) -> None:
    from tests.platform.test_admin_language import ENGLISH, shown

    page = shown(reset(admin_client, member, reason=None).content.decode())
    assert "Motivo" in page
    assert ENGLISH.findall(page) == []


def test_the_command_resets_and_says_who_and_why(member: Any, app: TOTPDevice, django_user_model: Any) -> None:
    operator = django_user_model.objects.create_user(username="plantao", password="x", is_staff=True)

    call_command("staff_second_factor_reset", "ana", "--by", "plantao", "--reason", "chamado 981")

    assert not TOTPDevice.objects.filter(user=member).exists()
    entry = LogEntry.objects.get(object_id=str(member.pk))
    assert (entry.user, entry.change_message.endswith("Motivo: chamado 981")) == (operator, True)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["nobody", "--by", "plantao", "--reason", "x"], "no such user"),
        (["ana", "--by", "plantao", "--reason", "  "], "--reason must say why"),
        (["ana", "--by", "merchant", "--reason", "x"], "not an active staff member"),
    ],
)
def test_the_command_refuses_and_changes_nothing(
    member: Any, app: TOTPDevice, django_user_model: Any, args: list[str], said: str
) -> None:
    django_user_model.objects.create_user(username="plantao", password="x", is_staff=True)
    django_user_model.objects.create_user(username="merchant", password="x", is_staff=False)
    with pytest.raises(CommandError, match=said):
        call_command("staff_second_factor_reset", *args)
    assert TOTPDevice.objects.filter(user=member).exists()
    assert not LogEntry.objects.exists()
