"""A bootstrap account's ``sandbox_paid_charges`` (the demo's balance): each
is a charge created through ``charge_create`` at the account's sandbox
chain and paid by the sandbox's payer (``payments.sandbox``), so the balance
it gives has its evidence like any other: a paid charge, its ``charge_paid``
ledger entry, the Pix kept at the sandbox for reconciliation. No path credits
an account without one; crediting the ledger directly would be such a path.

Why the demo needs it: Swagger UI's default withdrawal example (and a
refund) must succeed on the fresh ``make run`` demo, whose balance would
otherwise be zero (issue 30).

Idempotent by ``ref``: the charge carries it in its metadata
(:data:`METADATA_KEY`), and a run finding it leaves it as it is (paying it
first if a previous run stopped between creating and paying it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from rest_framework import serializers

from accounts.models import Account
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.models import Acquirer
from api.examples import CPF
from core.fields import StrictCharField, StrictIntegerField
from payments.models import Charge, ChargeStatus
from payments.sandbox import sandbox_charge_drive
from payments.selectors import sandbox_charge_get
from payments.services import Buyer, charge_create

FIELD = "sandbox_paid_charges"
#: The charge's metadata key naming the bootstrap ref it was made for.
METADATA_KEY = "pix_bootstrap"
PAYER = Buyer(name="Pagador Sandbox", document=CPF, phone="11987654321", address={})

SANDBOX_OFF = "Cobranças pagas no sandbox exigem PIX_SANDBOX ligado."
CHAIN_REQUIRED = "Informe active_acquirers (adquirentes sandbox) junto com sandbox_paid_charges."
NOT_SANDBOX = 'Adquirente "{key}" não usa o adapter sandbox: só o sandbox paga cobranças de teste.'
DUPLICATE_REF = "Valor repetido na lista."


class SandboxChargeSpecSerializer(serializers.Serializer[Any]):
    ref = StrictCharField(max_length=64)
    amount = StrictIntegerField(min_value=1)


def validate_specs(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Refs are unique within the account (what makes a run idempotent)."""
    refs = [item["ref"] for item in value]
    repeated = {str(i): {"ref": [DUPLICATE_REF]} for i, ref in enumerate(refs) if ref in refs[:i]}
    if repeated:
        raise serializers.ValidationError(repeated)
    return value


def check(acquirers: Sequence[Mapping[str, Any]], accounts: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """What must hold before anything is written: the sandbox is on, and the
    charges can only land at sandbox acquirers (the account's cash-in chain,
    named in the same entry), since only the sandbox's payer may pay them."""
    errors: dict[str, list[str]] = {}
    file_adapters = {spec["key"]: spec.get("adapter") for spec in acquirers}
    for index, spec in enumerate(accounts):
        if not spec.get(FIELD):
            continue
        path = f"accounts[{index}]"
        if not settings.PIX_SANDBOX:
            errors.setdefault(f"{path}.{FIELD}", []).append(SANDBOX_OFF)
            continue
        chain = spec.get("active_acquirers") or []
        if not chain:
            errors.setdefault(f"{path}.{FIELD}", []).append(CHAIN_REQUIRED)
        stored = dict(Acquirer.objects.filter(key__in=chain).values_list("key", "adapter"))
        for position, key in enumerate(chain):
            adapter = file_adapters.get(key) or stored.get(key)
            if adapter is not None and adapter != SandboxAdapter.name:
                errors.setdefault(f"{path}.active_acquirers[{position}]", []).append(NOT_SANDBOX.format(key=key))
    return errors


def apply(*, account: Account, specs: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each spec's paid charge (created and paid unless a run did it already):
    ``{ref: charge id}``. Called with the bootstrap's transaction committed,
    as ``charge_create`` asks the acquirer before writing."""
    return {
        spec["ref"]: str(_paid_charge(account=account, ref=spec["ref"], amount=spec["amount"]).pk) for spec in specs
    }


def _paid_charge(*, account: Account, ref: str, amount: int) -> Charge:
    marker = {METADATA_KEY: ref}
    charge = Charge.objects.filter(account=account, metadata__contains=marker).order_by("-created_at").first()
    if charge is None:
        charge = charge_create(account=account, amount=amount, buyer=PAYER, metadata=marker)
    if charge.status == ChargeStatus.PENDING:
        # The drivers' own guard: a charge at any other acquirer is not found.
        payable = sandbox_charge_get(account=account, charge_id=charge.pk)
        charge = sandbox_charge_drive(charge=payable, action="pay").charge
    # Any other status (paid, or later refunded by the demo's user) is kept:
    # a re-run never credits the account again.
    return charge
