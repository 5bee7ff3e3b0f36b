"""Every authentication and permission case of the spec, with exact bodies,
in the check order of decisions §2."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from accounts.models import Account, ApiCredential
from accounts.services import account_set_blocked, credential_issue, credential_revoke, credential_rotate
from tests.conftest import client_for
from tests.factories import AccountFactory

BALANCE = "/api/withdrawals/balance"
MISSING = {"error": "Credenciais inválidas", "message": "Chave pública e chave privada são obrigatórias"}
INVALID = {"error": "Credenciais inválidas", "message": "Chave não encontrada ou inativa"}


def forbidden(message: str) -> dict[str, object]:
    return {"success": False, "message": message, "data": None}


NO_PERMISSION = forbidden("Esta credencial não tem permissão para realizar esta operação.")
NOT_APPROVED = forbidden("Sua conta precisa estar aprovada para usar esta funcionalidade.")
BLOCKED = forbidden("Sua conta está bloqueada. Não é permitido realizar esta ação.")

pytestmark = pytest.mark.django_db


def test_missing_both_headers() -> None:
    response = APIClient().get(BALANCE)
    assert response.status_code == 401
    assert response.json() == MISSING


@pytest.mark.parametrize("header", ["HTTP_X_PUBLIC_KEY", "HTTP_X_SECRET_KEY"])
def test_one_header_only(account: Account, header: str) -> None:
    issued = credential_issue(account=account)
    value = issued.credential.public_key if header == "HTTP_X_PUBLIC_KEY" else issued.secret_key
    response = APIClient().get(BALANCE, **{header: value})  # type: ignore[arg-type]
    assert response.status_code == 401
    assert response.json() == MISSING


def test_empty_headers_count_as_missing() -> None:
    response = APIClient().get(BALANCE, HTTP_X_PUBLIC_KEY="", HTTP_X_SECRET_KEY=" ")
    assert response.status_code == 401
    assert response.json() == MISSING


def test_unknown_public_key() -> None:
    response = APIClient().get(BALANCE, HTTP_X_PUBLIC_KEY="pk_nope", HTTP_X_SECRET_KEY="sk_nope")
    assert response.status_code == 401
    assert response.json() == INVALID


def test_wrong_secret(account: Account) -> None:
    issued = credential_issue(account=account)
    response = APIClient().get(
        BALANCE, HTTP_X_PUBLIC_KEY=issued.credential.public_key, HTTP_X_SECRET_KEY=issued.secret_key + "x"
    )
    assert response.status_code == 401
    assert response.json() == INVALID


def test_revoked_key(account: Account) -> None:
    issued = credential_issue(account=account)
    client = client_for(issued)
    assert client.get(BALANCE).status_code == 200
    credential_revoke(credential=issued.credential)
    response = client.get(BALANCE)
    assert response.status_code == 401
    assert response.json() == INVALID


def test_rotation_keeps_old_key_until_revoked(account: Account) -> None:
    old = credential_issue(account=account, permission=ApiCredential.Permission.CASHOUT)
    new = credential_rotate(credential=old.credential)
    assert new.credential.permission == ApiCredential.Permission.CASHOUT
    assert new.credential.public_key != old.credential.public_key
    assert client_for(old).get(BALANCE).status_code == 200
    assert client_for(new).get(BALANCE).status_code == 200
    credential_revoke(credential=old.credential)
    assert client_for(old).get(BALANCE).status_code == 401
    assert client_for(new).get(BALANCE).status_code == 200


def test_401_carries_www_authenticate(account: Account) -> None:
    response = APIClient().get(BALANCE)
    assert response.status_code == 401
    assert "WWW-Authenticate" in response.headers


def test_wrong_permission(account: Account) -> None:
    # Balance is a cash-out endpoint: a cash-in credential may not read it.
    issued = credential_issue(account=account, permission=ApiCredential.Permission.CASHIN)
    response = client_for(issued).get(BALANCE)
    assert response.status_code == 403
    assert response.json() == NO_PERMISSION


@pytest.mark.parametrize("permission", [ApiCredential.Permission.CASHOUT, ApiCredential.Permission.ALL])
def test_permissions_that_may_read_balance(account: Account, permission: str) -> None:
    issued = credential_issue(account=account, permission=permission)
    assert client_for(issued).get(BALANCE).status_code == 200


@pytest.mark.parametrize("status", [Account.Status.PENDING, Account.Status.REJECTED])
def test_account_not_approved(status: str) -> None:
    account = AccountFactory(status=status)
    response = client_for(credential_issue(account=account)).get(BALANCE)
    assert response.status_code == 403
    assert response.json() == NOT_APPROVED


def test_account_blocked(account: Account) -> None:
    account_set_blocked(account=account, blocked=True)
    response = client_for(credential_issue(account=account)).get(BALANCE)
    assert response.status_code == 403
    assert response.json() == BLOCKED


def test_order_permission_before_approval() -> None:
    account = AccountFactory(status=Account.Status.PENDING, is_blocked=True)
    issued = credential_issue(account=account, permission=ApiCredential.Permission.CASHIN)
    assert client_for(issued).get(BALANCE).json() == NO_PERMISSION


def test_order_approval_before_blocked() -> None:
    account = AccountFactory(status=Account.Status.PENDING, is_blocked=True)
    assert client_for(credential_issue(account=account)).get(BALANCE).json() == NOT_APPROVED


def test_order_credentials_before_everything() -> None:
    account = AccountFactory(status=Account.Status.REJECTED, is_blocked=True)
    issued = credential_issue(account=account, permission=ApiCredential.Permission.CASHIN)
    response = APIClient().get(BALANCE, HTTP_X_PUBLIC_KEY=issued.credential.public_key, HTTP_X_SECRET_KEY="sk_bad")
    assert response.status_code == 401
    assert response.json() == INVALID


def test_secret_is_stored_only_as_hash(account: Account) -> None:
    issued = credential_issue(account=account)
    stored = ApiCredential.objects.values().get(pk=issued.credential.pk)
    assert issued.secret_key.startswith("sk_")
    assert issued.credential.public_key.startswith("pk_")
    assert all(issued.secret_key not in str(value) for value in stored.values())


def test_last_used_is_recorded(account: Account) -> None:
    issued = credential_issue(account=account)
    assert issued.credential.last_used_at is None
    client_for(issued).get(BALANCE)
    issued.credential.refresh_from_db()
    assert issued.credential.last_used_at is not None
