"""The fast path of content negotiation answers exactly what DRF would."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from api.negotiation import JSONFirstNegotiation


@pytest.mark.parametrize("accept", [None, "*/*", "application/json"])
def test_common_accept_headers_get_what_drf_gives(accept: str | None) -> None:
    headers: dict[str, Any] = {} if accept is None else {"HTTP_ACCEPT": accept}
    drf_request = Request(APIRequestFactory().get("/api/withdrawals/balance", **headers))
    renderers = [JSONRenderer()]
    fast = JSONFirstNegotiation().select_renderer(drf_request, renderers)
    assert fast == DefaultContentNegotiation().select_renderer(drf_request, renderers)


@pytest.mark.parametrize(("accept", "status"), [("application/json; indent=2", 200), ("text/html", 406), ("", 406)])
def test_anything_else_is_drfs_negotiation_406_included(api: Any, accept: str, status: int) -> None:
    assert api.get("/api/withdrawals/balance", HTTP_ACCEPT=accept).status_code == status
