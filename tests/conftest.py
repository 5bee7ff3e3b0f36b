"""Shared fixtures. Tests run on real PostgreSQL and Redis: the embedded ones,
or the servers named by DATABASE_URL / REDIS_URL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential
from accounts.services import IssuedCredential, credential_issue
from core.snapshots import forget_all
from tests.factories import AccountFactory
from tests.helpers import staff_login


@pytest.fixture(autouse=True)
def _fresh_snapshots() -> None:
    """Each test starts with no credential or chain snapshot anywhere: rows of
    earlier tests were rolled back or truncated, which no write signal tells."""
    forget_all()


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory()


@pytest.fixture
def issue_credential(db: Any) -> Callable[..., IssuedCredential]:
    def issue(account: Account, permission: str = ApiCredential.Permission.ALL) -> IssuedCredential:
        return credential_issue(account=account, permission=permission)

    return issue


def client_for(issued: IssuedCredential) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_PUBLIC_KEY=issued.credential.public_key, HTTP_X_SECRET_KEY=issued.secret_key)
    return client


@pytest.fixture
def staff_client(client: Client, django_user_model: Any) -> Callable[[str], Client]:
    """A client logged in (password and second factor) as a staff user of one of the back-office groups."""

    def login(group: str) -> Client:
        user = django_user_model.objects.create_user(username=f"{group}-user", password="x", is_staff=True)
        user.groups.add(Group.objects.get(name=group))
        return staff_login(client, user)

    return login


@pytest.fixture
def staff_member(db: Any, django_user_model: Any) -> Callable[[str, str], Client]:
    """A new client per call, logged in as ``username`` of ``group``: two
    staff members at once (maker-checker)."""

    def login(group: str, username: str) -> Client:
        user = django_user_model.objects.create_user(username=username, password="x", is_staff=True)
        user.groups.add(Group.objects.get(name=group))
        return staff_login(Client(), user)

    return login


@pytest.fixture
def admin_client(db: Any, admin_user: Any) -> Client:
    """pytest-django's, signed in past the second factor as staff are."""
    return staff_login(Client(), admin_user)


@pytest.fixture(scope="module")
def schema(django_db_blocker: Any) -> dict[str, Any]:
    """The OpenAPI document as clients download it."""
    import yaml

    with django_db_blocker.unblock():
        response = Client().get("/api/schema/")
    assert response.status_code == 200
    document: dict[str, Any] = yaml.safe_load(response.content)
    return document


@pytest.fixture
def api(account: Account, issue_credential: Callable[..., IssuedCredential]) -> APIClient:
    """A client authenticated with an ``all`` credential of ``account``."""
    return client_for(issue_credential(account))


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any) -> Iterator[Any]:
    """One real Celery worker for the session, on the test database. Tests
    using it must be ``django_db(transaction=True)`` so it sees their rows."""
    from django.db import connection

    from tests.realworld import celery_worker

    with celery_worker(connection.settings_dict["NAME"], tmp_path_factory.mktemp("celery")) as worker:
        yield worker


@pytest.fixture
def receiver() -> Iterator[Any]:
    """A real HTTP server on 127.0.0.1 recording what it receives."""
    from tests.realworld import http_receiver

    with http_receiver() as server:
        yield server
