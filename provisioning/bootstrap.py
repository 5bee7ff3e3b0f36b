"""Operator bootstrap (decisions §9): one JSON file describes acquirers and
accounts; :func:`bootstrap_apply` validates all of it (``provisioning.schema``),
then creates or updates everything it names in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from accounts.models import Account, ApiCredential
from accounts.services import account_approve, account_create, account_reject, account_set_blocked, credential_issue
from acquirers.models import Acquirer, AcquirerSlot
from acquirers.services import acquirer_grants_set, acquirer_slots_set, acquirer_upsert
from core.exceptions import ValidationFailed
from provisioning import sandbox_charges
from provisioning.schema import CHAIN_FIELDS, BootstrapFileSerializer, check_against_database, error_paths
from webhooks.models import WebhookEndpoint
from webhooks.services import endpoint_create


class BootstrapInvalid(ValidationFailed):
    """The bootstrap file is invalid; ``errors`` maps each bad field's path
    (``accounts[0].cashin_fee.bps``) to its messages. Nothing was written."""

    default_message = "Arquivo de bootstrap inválido."
    default_code = "bootstrap_invalid"


# --------------------------------------------------------------------------- creating and updating


def _account_update(*, account: Account, status: str | None, blocked: bool | None, columns: dict[str, Any]) -> None:
    changed = {name: value for name, value in columns.items() if getattr(account, name) != value}
    if changed:
        for name, value in changed.items():
            setattr(account, name, value)
        account.save(update_fields=[*changed, "updated_at"])
    if status == Account.Status.APPROVED:
        account_approve(account=account)
    elif status == Account.Status.REJECTED:
        account_reject(account=account)
    if blocked is not None:
        account_set_blocked(account=account, blocked=blocked)


def _credential_apply(*, account: Account, spec: dict[str, Any]) -> dict[str, str]:
    credential = ApiCredential.objects.filter(account=account, ref=spec["ref"]).first()
    if credential is None:
        # Only a permission the file names is passed on, so an omitted one
        # takes the platform default.
        issued = credential_issue(account=account, **spec)
        return {"public_key": issued.credential.public_key, "secret_key": issued.secret_key}
    # An existing credential keeps its keys: its secret was shown once and is
    # not stored, and replacing it would break the client using it.
    if "permission" in spec and credential.permission != spec["permission"]:
        credential.permission = spec["permission"]
        credential.save(update_fields=["permission"])
    return {"public_key": credential.public_key}


def _webhook_apply(*, account: Account, ref: str, url: str) -> dict[str, str]:
    endpoint = WebhookEndpoint.objects.filter(account=account, ref=ref).first()
    if endpoint is None:
        # Through the service, so the limit of endpoints per account holds
        # here too (checked for the whole file beforehand, in the schema).
        endpoint = endpoint_create(account=account, url=url, ref=ref).endpoint
        return {"id": str(endpoint.pk), "code": endpoint.code, "secret": endpoint.secret}
    if endpoint.url != url:
        endpoint.url = url
        endpoint.save(update_fields=["url", "updated_at"])
    return {"id": str(endpoint.pk), "code": endpoint.code}


def _account_apply(
    *, spec: dict[str, Any], account: Account | None, acquirers: Mapping[str, Acquirer]
) -> dict[str, Any]:
    spec = dict(spec)
    ref: str = spec.pop("ref")
    chains = {field: [acquirers[key] for key in spec.pop(field)] for field in CHAIN_FIELDS if field in spec}
    credentials: list[dict[str, Any]] = spec.pop("credentials", [])
    webhooks: list[dict[str, Any]] = spec.pop("webhooks", [])
    spec.pop(sandbox_charges.FIELD, None)  # after the commit: bootstrap_apply

    if account is None:
        account = account_create(ref=ref, **spec)
    else:
        _account_update(
            account=account, status=spec.pop("status", None), blocked=spec.pop("is_blocked", None), columns=spec
        )

    # Grants before slots: a new active acquirer must be granted first, and
    # withdrawing a grant takes the acquirer out of the cash-in chain.
    if "available_acquirers" in chains:
        acquirer_grants_set(account=account, acquirers=chains["available_acquirers"])
    if "active_acquirers" in chains:
        acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHIN, acquirers=chains["active_acquirers"])
    if "cashout_acquirers" in chains:
        acquirer_slots_set(account=account, purpose=AcquirerSlot.Purpose.CASHOUT, acquirers=chains["cashout_acquirers"])

    return {
        "id": str(account.pk),
        "credentials": {item["ref"]: _credential_apply(account=account, spec=item) for item in credentials},
        "webhooks": {
            item["ref"]: _webhook_apply(account=account, ref=item["ref"], url=item["url"]) for item in webhooks
        },
    }


def bootstrap_apply(*, data: Any) -> dict[str, Any]:
    """Validate a whole bootstrap file (decoded JSON), then create or update
    what it names; return the ids and the secrets created (decisions §9).
    Then, committed, each account's ``sandbox_paid_charges``
    (:mod:`provisioning.sandbox_charges`: their ids under that key).

    Acquirers are matched by ``key``, accounts by ``ref``, credentials and
    webhooks by ``ref`` within their account. Omitted fields keep the model
    default on create and the stored value on update; lists of acquirers are
    set exactly. An existing credential keeps its keys (only its permission
    follows the file) and its secret is not shown again; neither is an
    existing webhook's secret.

    Raises :class:`BootstrapInvalid`, having written nothing, when anything in
    the file is wrong.
    """
    result, account_specs = _bootstrap_write(data=data)
    for spec in account_specs:
        if spec.get(sandbox_charges.FIELD):
            account = Account.objects.get(ref=spec["ref"])
            paid = sandbox_charges.apply(account=account, specs=spec[sandbox_charges.FIELD])
            result["accounts"][spec["ref"]][sandbox_charges.FIELD] = paid
    return result


@transaction.atomic
def _bootstrap_write(*, data: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    serializer = BootstrapFileSerializer(data=data)
    if not serializer.is_valid():
        raise BootstrapInvalid(error_paths(serializer.errors))
    acquirer_specs: list[dict[str, Any]] = serializer.validated_data.get("acquirers", [])
    account_specs: list[dict[str, Any]] = serializer.validated_data.get("accounts", [])

    # Locked for the whole run, so the checks below still hold when the
    # writes happen.
    existing = {
        account.ref: account
        for account in Account.objects.select_for_update()
        .filter(ref__in=[spec["ref"] for spec in account_specs])
        .order_by("ref")
        if account.ref is not None
    }
    errors = check_against_database(acquirer_specs, account_specs, existing)
    errors.update(sandbox_charges.check(acquirer_specs, account_specs))
    if errors:
        raise BootstrapInvalid(errors)

    for spec in acquirer_specs:
        fields = dict(spec)
        acquirer_upsert(key=fields.pop("key"), **fields)
    referenced = {key for spec in account_specs for field in CHAIN_FIELDS for key in spec.get(field, [])}
    acquirers = Acquirer.objects.in_bulk(list(referenced), field_name="key")

    result = {
        "acquirers": [spec["key"] for spec in acquirer_specs],
        "accounts": {
            spec["ref"]: _account_apply(spec=spec, account=existing.get(spec["ref"]), acquirers=acquirers)
            for spec in account_specs
        },
    }
    return result, account_specs
