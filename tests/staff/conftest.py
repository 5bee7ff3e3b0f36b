"""A staff member and their second factor, and the steps of a sign-in as a
browser takes them (password, then code), from a given client address."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

PASSWORD = "cavalo-correto-bateria-grampo"
HOME = "203.0.113.7"
ELSEWHERE = "198.51.100.9"


def new_member(django_user_model: Any, username: str) -> Any:
    """A member of ``operations`` who signs in with ``PASSWORD``."""
    user = django_user_model.objects.create_user(username=username, password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name="operations"))
    return user


def enrolled_app(user: Any) -> TOTPDevice:
    """``user``'s authenticator app, enrolled."""
    return TOTPDevice.objects.create(user=user, name="Aplicativo autenticador", confirmed=True)


@pytest.fixture
def member(db: Any, django_user_model: Any) -> Any:
    return new_member(django_user_model, "ana")


@pytest.fixture
def app(member: Any) -> TOTPDevice:
    return enrolled_app(member)


@pytest.fixture
def recovery_codes(member: Any, app: TOTPDevice) -> list[str]:
    device = StaticDevice.objects.create(user=member, name="Códigos de recuperação", confirmed=True)
    codes = [StaticToken.random_token() for _ in range(10)]
    StaticToken.objects.bulk_create([StaticToken(device=device, token=code) for code in codes])
    return codes


def sign_in(client: Client, username: str = "ana", password: str = PASSWORD, address: str = HOME) -> Any:
    """The password step, as the login form posts it."""
    return client.post(
        reverse("admin:login") + "?next=" + reverse("admin:index"),
        {"username": username, "password": password},
        REMOTE_ADDR=address,
    )


def submit(client: Client, code: str, address: str = HOME, url: str = "") -> Any:
    """A code at the second step (or at ``url``: enrolment, new recovery codes)."""
    return client.post(
        url or reverse("admin:otp_verify") + "?next=" + reverse("admin:index"), {"otp_token": code}, REMOTE_ADDR=address
    )


def time_passes(member: Any, delta: dt.timedelta) -> None:
    """Every record of ``member``'s failures (django-otp's, django-axes') is ``delta`` older."""
    for model in (TOTPDevice, StaticDevice):
        for device in model.objects.filter(user=member, throttling_failure_timestamp__isnull=False):
            device.throttling_failure_timestamp -= delta
            device.save(update_fields=["throttling_failure_timestamp"])
    for attempt in AccessAttempt.objects.filter(username=member.username):
        attempt.attempt_time -= delta
        attempt.save(update_fields=["attempt_time"])


def past_the_throttle(member: Any) -> None:
    """Long enough since the last wrong code for django-otp to check the next one."""
    time_passes(member, dt.timedelta(minutes=1))
