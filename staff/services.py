"""A staff member's second factor: enrol an authenticator app, check a code,
new recovery codes, a colleague's reset. Devices are django-otp's: a
``TOTPDevice`` (the app) and a ``StaticDevice`` whose tokens are the recovery
codes, each deleted as it is used."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from axes.utils import reset as axes_reset
from django.contrib.admin.models import CHANGE, LogEntry
from django.db import transaction
from django_otp.models import Device
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

#: How many recovery codes a member gets, each good for one sign-in.
RECOVERY_CODES = 10
APP_DEVICE_NAME = "Aplicativo autenticador"
RECOVERY_DEVICE_NAME = "Códigos de recuperação"


@dataclass(frozen=True)
class CodeCheck:
    """What a code submitted at the second step did.

    ``device`` is the device that accepted it (``None``: refused);
    ``wait_until`` is set when django-otp's throttle refused to check it at
    all; ``recovery_codes`` are the new codes an enrolment created."""

    device: Device | None = None
    wait_until: dt.datetime | None = None
    recovery_codes: list[str] = field(default_factory=list)

    @property
    def by_recovery_code(self) -> bool:
        return isinstance(self.device, StaticDevice)


def normalized(code: str) -> str:
    """A code as typed (``123 456``, ``abcd-efgh``, capitals) as stored."""
    return "".join(code.split()).replace("-", "").lower()


def is_app_code(code: str) -> bool:
    return len(code) == 6 and code.isdigit()


def enrolment_device(*, user: Any) -> TOTPDevice:
    """The authenticator app ``user`` is enrolling: the same secret on every
    visit until confirmed, so a reload never invalidates the app's entry."""
    device = TOTPDevice.objects.filter(user=user, confirmed=False).order_by("pk").first()
    return device or TOTPDevice.objects.create(user=user, name=APP_DEVICE_NAME, confirmed=False)


def _check(device: Any, code: str) -> CodeCheck:
    """``device`` (locked by the caller) checks ``code`` under django-otp's throttle."""
    allowed, details = device.verify_is_allowed()
    if not allowed:
        return CodeCheck(wait_until=(details or {}).get("locked_until"))
    if not device.verify_token(code):  # a failure is counted on the device
        return CodeCheck()
    return CodeCheck(device=device)


def _end_failure_run(user: Any) -> None:
    """A right code ends the run of wrong ones, on every device of ``user``."""
    for model in (TOTPDevice, StaticDevice):
        model.objects.filter(user=user).update(throttling_failure_count=0, throttling_failure_timestamp=None)


def _log(*, actor: Any, member: Any, message: str) -> None:
    LogEntry.objects.log_actions(
        user_id=actor.pk, queryset=[member], action_flag=CHANGE, change_message=message, single_object=True
    )


def _new_recovery_codes(user: Any) -> list[str]:
    StaticDevice.objects.filter(user=user).delete()
    device = StaticDevice.objects.create(user=user, name=RECOVERY_DEVICE_NAME, confirmed=True)
    codes = [StaticToken.random_token() for _ in range(RECOVERY_CODES)]
    StaticToken.objects.bulk_create([StaticToken(device=device, token=code) for code in codes])
    return codes


def second_factor_verify(*, user: Any, code: str, app_only: bool = False) -> CodeCheck:
    """Check ``code`` for ``user``: six digits against their authenticator
    app, anything else against their recovery codes (unless ``app_only``).
    A recovery code that passes is deleted with the check: used once."""
    code = normalized(code)
    model = TOTPDevice if is_app_code(code) or app_only else StaticDevice
    with transaction.atomic():
        # Locked: two requests never both pass with one code.
        device = model.objects.select_for_update().filter(user=user, confirmed=True).order_by("pk").first()
        if device is None:
            return CodeCheck()
        checked = _check(device, code)
        if checked.device is not None:
            _end_failure_run(user)
        if checked.by_recovery_code:
            left = StaticToken.objects.filter(device=device).count()
            _log(actor=user, member=user, message=f"Entrou com um código de recuperação (restantes: {left}).")
    return checked


def second_factor_enrol(*, user: Any, code: str) -> CodeCheck:
    """Confirm the authenticator app ``user`` is enrolling with a code it
    shows, and give them new recovery codes (any older ones are dropped)."""
    with transaction.atomic():
        device = TOTPDevice.objects.select_for_update().filter(user=user, confirmed=False).order_by("pk").first()
        if device is None or TOTPDevice.objects.filter(user=user, confirmed=True).exists():
            return CodeCheck()
        checked = _check(device, normalized(code))
        if checked.device is None:
            return checked
        device.confirmed = True
        device.save(update_fields=["confirmed"])
        TOTPDevice.objects.filter(user=user, confirmed=False).delete()
        codes = _new_recovery_codes(user)
        _end_failure_run(user)
        _log(actor=user, member=user, message="Verificação em duas etapas configurada (aplicativo autenticador).")
    return CodeCheck(device=device, recovery_codes=codes)


def recovery_codes_regenerate(*, user: Any) -> list[str]:
    """New recovery codes for ``user`` (already re-verified by the caller);
    the old ones stop working."""
    with transaction.atomic():
        codes = _new_recovery_codes(user)
        _log(actor=user, member=user, message="Novos códigos de recuperação gerados; os anteriores foram invalidados.")
    return codes


def second_factor_reset(*, member: Any, by: Any, reason: str) -> None:
    """Remove ``member``'s authenticator app and recovery codes (a lost phone),
    on ``by``'s word and ``reason``, logged: ``member``'s sessions lose their
    verification and their next sign-in enrols again. Their sign-in lockouts
    (wrong passwords or codes) are lifted too."""
    with transaction.atomic():
        TOTPDevice.objects.filter(user=member).delete()
        StaticDevice.objects.filter(user=member).delete()
        _log(
            actor=by,
            member=member,
            message=f"Verificação em duas etapas redefinida (aplicativo e códigos de recuperação removidos). "
            f"Motivo: {reason}",
        )
    axes_reset(username=member.get_username())
