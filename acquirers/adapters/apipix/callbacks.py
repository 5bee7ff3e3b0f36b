"""The ``{webhookUrl}/pix`` callback of the API Pix (and of Efí's extension):
who may post it, and the entries it names.

The callback body is never trusted for money: adapters confirm every entry
with the PSP before turning it into events.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from typing import Any

from acquirers.adapters.apipix.credentials import read_env
from acquirers.adapters.base import (
    NOTIFICATION_TOKEN_HEADER,
    AcquirerConfig,
    InvalidNotification,
    UnreadableNotification,
)


def verify_notification_token(config: AcquirerConfig, options: Mapping[str, Any], headers: Mapping[str, str]) -> None:
    """The URL's secret segment (handed over by the view in
    :data:`NOTIFICATION_TOKEN_HEADER`), compared in constant time with the
    variable named by ``notification_token_env``; InvalidNotification if not."""
    env = options.get("notification_token_env")
    if not env:
        raise InvalidNotification("this acquirer has no notification_token_env: notifications are refused")
    expected = read_env(env, f"acquirer {config.key} notification token")
    presented = next((v for k, v in headers.items() if k.lower() == NOTIFICATION_TOKEN_HEADER.lower()), "")
    if not hmac.compare_digest(presented.encode(), expected.encode()):
        raise InvalidNotification("wrong or missing notification token")


def callback_entries(body: bytes, *, most: int) -> list[dict[str, Any]] | None:
    """The ``pix`` entries of a callback body, at most ``most`` of them; None
    when the body has no ``pix`` (nothing to confirm). UnreadableNotification
    when malformed."""
    return listed_entries(callback_object(body), "pix", most=most)


def callback_object(body: bytes) -> dict[str, Any]:
    """A callback body as the JSON object every API Pix callback is;
    UnreadableNotification when it is not one."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnreadableNotification(f"body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise UnreadableNotification("body is not a JSON object")
    return data


def listed_entries(data: Mapping[str, Any], key: str, *, most: int) -> list[dict[str, Any]] | None:
    """The objects listed under ``key`` (``pix``, ``recs``, ``cobsr``), at most
    ``most``; None when the body has no ``key``. UnreadableNotification when malformed."""
    if key not in data:
        return None
    entries = data[key]
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UnreadableNotification(f"{key} is not a list of objects")
    if len(entries) > most:
        raise UnreadableNotification(f"more than {most} entries in the callback's {key}")
    return entries
