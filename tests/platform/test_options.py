"""OPTIONS on every API route is a 405 in the envelope, with ``Allow``: it
answered 200 with DRF's description of the view, its internal docstring
included, to anyone."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from accounts.services import credential_issue
from tests.conftest import client_for
from tests.factories import AccountFactory

pytestmark = pytest.mark.django_db

NOT_ALLOWED = {"success": False, "message": "Método não permitido.", "data": None}
SAMPLE = {"key": "some_acquirer", "token": "some-token", "action": "pay"}


def patterns(resolver: URLResolver) -> Iterator[URLPattern]:
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace is None:  # the admin's are not API routes
                yield from patterns(entry)
        else:
            yield entry


def api_paths() -> list[str]:
    """Every named route under /api/ of the project's URL conf, with sample arguments."""
    found = []
    for pattern in patterns(get_resolver()):
        if pattern.name is None:
            continue
        arguments = {name: SAMPLE.get(name, str(uuid.uuid4())) for name in pattern.pattern.regex.groupindex}
        path = reverse(pattern.name, kwargs=arguments)
        if path.startswith("/api/"):
            found.append(path)
    return found


def test_the_walk_finds_every_kind_of_route() -> None:
    paths = api_paths()
    for expected in (
        "/api/transactions",
        "/api/schema/",
        "/api/health/ready",
        "/api/acquirers/some_acquirer/notifications",
    ):
        assert expected in paths
    assert len(paths) >= 20


@pytest.fixture
def api(db: Any) -> APIClient:
    """Allowed everywhere: every permission and feature, so only the method can be refused."""
    return client_for(credential_issue(account=AccountFactory(can_select_pix_cash_in_acquirer=True)))


@pytest.mark.parametrize("path", api_paths())
def test_options_is_a_405_with_allow_and_no_description(api: APIClient, path: str) -> None:
    response = api.options(path)
    assert response.status_code == 405, response.content
    assert response.json() == NOT_ALLOWED
    allowed = {method.strip() for method in response["Allow"].split(",")}
    assert allowed
    assert "OPTIONS" not in allowed
    assert allowed <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}


@pytest.mark.parametrize("path", api_paths())
def test_options_without_credentials_describes_nothing_either(path: str) -> None:
    response = APIClient().options(path)
    # Account routes authenticate first (decisions §2), like any other method.
    assert response.status_code in (401, 405), response.content
    assert "description" not in response.json()
    assert "renders" not in response.json()
