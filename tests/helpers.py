"""Small helpers that read the API the way a client does."""

from __future__ import annotations

import csv
import datetime as dt
import io
import logging
from typing import Any, cast, overload
from zoneinfo import ZoneInfo

from django.http import StreamingHttpResponse
from django.test import Client
from django.utils.module_loading import import_string
from rest_framework.test import APIClient

from core.logging import logging_config

SAO_PAULO = ZoneInfo("America/Sao_Paulo")
VALIDATION = "Erro de validação nos dados fornecidos"


@overload
def local(moment: dt.datetime) -> str: ...
@overload
def local(moment: None) -> None: ...
def local(moment: dt.datetime | None) -> str | None:
    """A stored instant as the API shows it: ``YYYY-MM-DD HH:mm:ss`` in America/Sao_Paulo."""
    return None if moment is None else moment.astimezone(SAO_PAULO).strftime("%Y-%m-%d %H:%M:%S")


def listing_data(api: APIClient, url: str, **params: Any) -> dict[str, Any]:
    """``data`` of a successful listing."""
    response = api.get(url, params)
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    assert body["success"] is True
    return body["data"]


def listing_errors(api: APIClient, url: str, **params: Any) -> dict[str, list[str]]:
    """``data.errors`` of a listing refused with 422."""
    response = api.get(url, params)
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["success"] is False
    assert body["message"] == VALIDATION
    errors: dict[str, list[str]] = body["data"]["errors"]
    assert all(isinstance(m, str) and m for messages in errors.values() for m in messages)
    return errors


def csv_rows(response: Any) -> list[list[str]]:
    """A streamed CSV export (the API's: ``;``-separated, UTF-8) as Python's csv module reads it."""
    assert response.status_code == 200, response
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = b"".join(response.streaming_content).decode("utf-8")  # type: ignore[arg-type]
    return list(csv.reader(io.StringIO(text), delimiter=";"))


def admin_action(client: Any, changelist: str, action: str, pks: list[Any], *, reason: str | None = None) -> Any:
    """Run an admin action as staff do: without ``reason``, the changelist's
    POST (a money action answers with its confirmation page); with it, the
    confirmation page's submit. Redirects are followed."""
    data: dict[str, Any] = {"action": action, "_selected_action": [str(pk) for pk in pks]}
    if reason is not None:
        data |= {"confirmed": "yes", "reason": reason}
    return client.post(changelist, data, follow=True)


def staff_refund(client: Any, charge: Any, *, reason: str = "pedido do pagador") -> Any:
    """Staff's refund of a paid charge, both halves: "Estornar" asks
    (maker-checker: the money goes to the payer), a second staff member
    approves (the refund is reserved), and "Estornar" again asks the acquirer
    at once about the reserved refund, as the old one-person refund did. When
    the first "Estornar" asks nothing (a refund already processing, a charge in
    chargeback, a refusal) its answer is returned as it is."""
    from django.contrib.auth.models import Group, User
    from django.urls import reverse

    from accounts.models import MoneyActionRequest
    from accounts.services import money_action_approve

    charges = reverse("admin:payments_charge_changelist")
    response = admin_action(client, charges, "refund", [charge.pk], reason=reason)
    pending = MoneyActionRequest.objects.filter(
        action=MoneyActionRequest.Action.REFUND_CHARGE, target_id=str(charge.pk), state="pending"
    ).first()
    if pending is None:
        return response
    checker, created = User.objects.get_or_create(username="aprovadora-de-estornos", defaults={"is_staff": True})
    if created:
        checker.groups.add(Group.objects.get(name="finance"))
    money_action_approve(request_id=pending.pk, approver=checker, note="conferido")
    return admin_action(client, charges, "refund", [charge.pk], reason=reason)


def staff_user(group: str, username: str) -> Any:
    """A staff member of a back-office group, for services that take the user (maker-checker)."""
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(username=username, password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def asked_and_approved(action: str, target_id: Any, *, maker: Any, checker: Any, reason: str = "conferido") -> Any:
    """A maker-checker request asked by ``maker`` and approved by ``checker``, through the services."""
    from accounts.services import money_action_approve, money_action_request

    asked = money_action_request(action=action, target_id=target_id, requested_by=maker, reason=reason)
    return money_action_approve(request_id=asked.pk, approver=checker, note=reason)


def admin_messages(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def project_formatters() -> list[logging.Formatter]:
    """The formatters of ``logging_config``, built as dictConfig builds them."""
    config = logging_config("json", "DEBUG")
    specs = cast(dict[str, dict[str, Any]], config["formatters"])
    made: list[logging.Formatter] = []
    for spec in specs.values():
        options = dict(spec)
        factory = options.pop("()", None)
        made.append(logging.Formatter(options["format"]) if factory is None else import_string(factory)(**options))
    return made


def staff_login(client: Client, user: Any) -> Client:
    """``client`` signed in to the back office as ``user`` as staff sign in:
    past the password and the second factor (an enrolled authenticator app,
    django-otp's session key). ``client.force_login`` alone is the password
    step only: the admin then sends the member to the code step."""
    from django_otp import DEVICE_ID_SESSION_KEY
    from django_otp.plugins.otp_totp.models import TOTPDevice

    client.force_login(user)
    device = TOTPDevice.objects.filter(user=user, confirmed=True).first()
    device = device or TOTPDevice.objects.create(user=user, name="Aplicativo autenticador", confirmed=True)
    session = client.session
    session[DEVICE_ID_SESSION_KEY] = device.persistent_id
    session.save()
    return client


def app_code(device: Any) -> str:
    """The code ``device``'s authenticator app shows now, as a staff member
    types it; the next one when this one was used already (django-otp takes
    each time step once, and accepts one step either side)."""
    import time

    from django_otp.oath import hotp

    device.refresh_from_db()
    now = int((time.time() - device.t0) // device.step) + device.drift
    counter = max(now, device.last_t + 1)
    return f"{hotp(device.bin_key, counter, device.digits):0{device.digits}d}"


def wrong_code(device: Any) -> str:
    """Six digits ``device`` refuses now (none of the codes of the steps it accepts)."""
    import time

    from django_otp.oath import hotp

    now = int((time.time() - device.t0) // device.step) + device.drift
    accepted = {f"{hotp(device.bin_key, now + step, device.digits):06d}" for step in range(-2, 3)}
    return next(code for code in ("000000", "111111", "222222", "333333", "444444", "555555") if code not in accepted)
