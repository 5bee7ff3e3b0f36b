"""Small helpers that read the API the way a client does."""

from __future__ import annotations

import datetime as dt
from typing import Any, overload
from zoneinfo import ZoneInfo

from rest_framework.test import APIClient

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
