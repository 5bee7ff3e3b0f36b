"""Reads of a staff member's second factor (django-otp's devices)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.utils import timezone
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice


def has_second_factor(user: Any) -> bool:
    """Whether ``user`` has confirmed an authenticator app (enrolled)."""
    return bool(user.is_authenticated) and TOTPDevice.objects.filter(user=user, confirmed=True).exists()


def recovery_codes_left(user: Any) -> int:
    return int(StaticToken.objects.filter(device__user=user, device__confirmed=True).count())


def second_step_locked_until(user: Any) -> dt.datetime | None:
    """Until when ``user``'s second step checks no code, or ``None``.

    ``ADMIN_LOGIN_FAILURE_LIMIT`` wrong codes in a row (app and recovery codes
    together, from any address and any number of password sign-ins) lock it
    for ``ADMIN_LOGIN_COOLOFF_MINUTES`` after the last one: the limit and the
    period of the password step (django-axes), whose count a password success
    resets and whose pair an attacker changes with their address. The count
    is django-otp's own, on the devices, reset only by a right code."""
    failures = 0
    last: dt.datetime | None = None
    for model in (TOTPDevice, StaticDevice):
        for count, at in model.objects.filter(user=user).values_list(
            "throttling_failure_count", "throttling_failure_timestamp"
        ):
            failures += count
            if at is not None and (last is None or at > last):
                last = at
    if failures < settings.AXES_FAILURE_LIMIT or last is None:
        return None
    until: dt.datetime = last + settings.AXES_COOLOFF_TIME
    return until if until > timezone.now() else None
