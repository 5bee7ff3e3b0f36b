"""The sandbox's MED (decisions §8): a merchant testing its integration opens
an infraction on a charge paid at a sandbox acquirer, and plays the MED's
decision on it (accept with a return, reject, cancel).

``POST /api/sandbox/transactions/{id}/infraction`` and ``POST
/api/sandbox/infractions/{id}/accept|reject|cancel`` (``sandbox_urls``; only
with ``PIX_SANDBOX`` on) record the change at the sandbox acquirer, as a
payer's PSP and the MED would at a real one, and then apply it through the
evidence path: the poller's own code (:mod:`infractions.polling`) reads the
acquirer's listing and applies the record with
:func:`infractions.services.infraction_apply`. Nothing here moves money by
itself: a driver that could not be read back (Redis away) changes nothing
here until the next poll reads it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account
from acquirers import adapters
from acquirers.adapters.base import InfractionStatus as AcquirerStatus
from acquirers.adapters.sandbox import SandboxAdapter
from acquirers.adapters.sandbox_infractions import SandboxInfractionRefused
from acquirers.models import Acquirer
from api.base import (
    INVALID_BODY,
    VALIDATION_ERROR,
    AccountAPIView,
    error_response,
    not_found,
    ok,
    responses,
    success_envelope,
)
from api.schema import uuid_path
from core.exceptions import ConflictError, PixServiceError
from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.selectors import get_by_uuid
from infractions import exceptions as err
from infractions.models import Infraction
from infractions.payloads import InfractionPayloadSerializer, infraction_payload
from infractions.polling import ListingFailed, listing_read
from infractions.services import infraction_apply
from payments.exceptions import CHARGE_NOT_FOUND
from payments.models import Charge
from payments.selectors import sandbox_charge_get

NOT_RECEIVED = "A transação não recebeu um Pix: não há o que contestar."
DECISION_REFUSED = "A infração já foi encerrada com outra decisão."
READ_BACK_FAILED = "A adquirente sandbox não respondeu: a infração será lida na próxima consulta."
RETURN_TOO_LARGE = "O valor devolvido não pode passar do valor contestado."

MESSAGES = {
    "opened": "Infração aberta.",
    "accept": "Infração aceita: valor devolvido ao pagador.",
    "reject": "Infração rejeitada: valor liberado.",
    "cancel": "Infração cancelada.",
}
DECISIONS = {
    "accept": AcquirerStatus.ACCEPTED,
    "reject": AcquirerStatus.REJECTED,
    "cancel": AcquirerStatus.CANCELED,
}


class SandboxNotRead(PixServiceError):
    """The change was recorded at the sandbox but could not be read back (503)."""

    status_code = 503
    default_message = READ_BACK_FAILED
    default_code = "sandbox_unavailable"


# --------------------------------------------------------------------------- the drivers


def _sandbox(acquirer: Acquirer) -> SandboxAdapter:
    sandbox = adapters.build(acquirer)
    assert isinstance(sandbox, SandboxAdapter)  # the selectors only hand out sandbox acquirers' records
    return sandbox


def _apply_from_listing(acquirer: Acquirer, external_id: str, since: dt.datetime) -> Infraction:
    """The evidence path: the acquirer's listing, read by the poller's code,
    and its record of ``external_id`` applied as the poller applies it."""
    try:
        records = listing_read(acquirer=acquirer, since=since)
    except ListingFailed as exc:
        raise SandboxNotRead() from exc
    for record in records:
        if record.external_id == external_id:
            return infraction_apply(acquirer=acquirer, record=record)
    raise SandboxNotRead()


def _since(data: dict[str, Any]) -> dt.datetime:
    # Just before the sandbox recorded the change: the listing returns it.
    return dt.datetime.fromisoformat(data["updated_at"]) - dt.timedelta(seconds=1)


def sandbox_infraction_open(
    *, charge: Charge, blocked_amount: int | None = None, reason: str = "", defense_hours: int = 72
) -> Infraction:
    """A payer's PSP reports the Pix ``charge`` received, at its sandbox
    acquirer: ``blocked_amount`` (default: all of it) blocked there."""
    if not charge.e2e_id:
        raise ConflictError(NOT_RECEIVED)
    sandbox = _sandbox(charge.acquirer)
    try:
        data = sandbox.infraction_open(
            e2e_id=charge.e2e_id,
            amount=charge.amount,
            blocked_amount=charge.amount if blocked_amount is None else min(blocked_amount, charge.amount),
            reason=reason or "Fraude reportada pelo pagador (sandbox).",
            defense_hours=defense_hours,
        )
    except REDIS_UNAVAILABLE as exc:
        raise SandboxNotRead() from exc
    return _apply_from_listing(charge.acquirer, data["external_id"], _since(data))


def sandbox_infraction_decide(*, infraction: Infraction, action: str, returned_amount: int | None = None) -> Infraction:
    """The MED's decision (``accept``, ``reject``, ``cancel``) on an
    infraction at its sandbox acquirer. ``accept`` returns
    ``returned_amount`` (default: what was blocked there); accepting again
    with more is MED 2.0's later return. Another decision after the close is
    refused (409); the same one again changes nothing."""
    sandbox = _sandbox(infraction.acquirer)
    try:
        held = sandbox.infraction_get(infraction.external_id)
        if held is None:
            raise SandboxNotRead()
        returned = int(held["blocked_amount"]) if returned_amount is None else returned_amount
        if returned > infraction.amount:
            raise ConflictError(RETURN_TOO_LARGE)
        data = sandbox.infraction_close(infraction.external_id, DECISIONS[action], returned_amount=returned)
    except SandboxInfractionRefused as exc:
        raise ConflictError(DECISION_REFUSED) from exc
    except REDIS_UNAVAILABLE as exc:
        raise SandboxNotRead() from exc
    applied = _apply_from_listing(infraction.acquirer, infraction.external_id, _since(data))
    applied.refresh_from_db()
    return applied


def sandbox_infraction_get(*, account: Account, infraction_id: Any) -> Infraction:
    """An infraction the sandbox drivers may decide: the account's, at an
    acquirer using the sandbox adapter; any other is a 404."""
    found = Infraction.objects.select_related("acquirer").filter(account=account, acquirer__adapter=SandboxAdapter.name)
    return get_by_uuid(found, infraction_id, err.InfractionNotFound)


# --------------------------------------------------------------------------- the endpoints


class OpenSerializer(serializers.Serializer[Any]):
    blocked_amount = serializers.IntegerField(
        required=False, min_value=0, help_text="Blocked at the acquirer, centavos; default: the whole charge."
    )
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500)
    defense_hours = serializers.IntegerField(required=False, min_value=1, max_value=720, default=72)


class AcceptSerializer(serializers.Serializer[Any]):
    returned_amount = serializers.IntegerField(
        required=False, min_value=0, help_text="Returned to the payer, centavos; default: what was blocked."
    )


INFRACTION_ENVELOPE = success_envelope("SandboxInfractionResponse", InfractionPayloadSerializer())
CONFLICT = error_response("The infraction (or the charge) does not allow this change.", DECISION_REFUSED)
UNREAD = error_response("Recorded at the sandbox, not read back yet (Redis unavailable).", READ_BACK_FAILED)


class SandboxInfractionOpenApi(AccountAPIView):
    """Opens a MED infraction on a charge paid at a sandbox acquirer (decisions §8)."""

    required_permission = "cashin"

    @extend_schema(
        tags=["sandbox"],
        summary="Sandbox: open a MED infraction on a charge",
        description=(
            "Only with PIX_SANDBOX on, for charges held by an acquirer using the `sandbox` adapter (any other is "
            "a 404). The sandbox acquirer records the infraction and its block; the service then reads it from "
            "the acquirer's listing, as it reads a real acquirer's, and blocks the money: what the balance covers "
            "is debited, the rest is kept back from withdrawals and refunds."
        ),
        parameters=[uuid_path("charge_id", "Transaction id (a paid charge).")],
        request=OpenSerializer,
        responses=responses(
            {201: INFRACTION_ENVELOPE},
            (400, INVALID_BODY),
            (404, not_found(CHARGE_NOT_FOUND)),
            (409, error_response("The charge received no Pix.", NOT_RECEIVED)),
            (422, VALIDATION_ERROR),
            (503, UNREAD),
        ),
    )
    def post(self, request: Request, charge_id: str) -> Response:
        charge = sandbox_charge_get(account=request.user, charge_id=charge_id)  # type: ignore[arg-type]
        body = OpenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        infraction = sandbox_infraction_open(charge=charge, **body.validated_data)
        return ok(infraction_payload(infraction), MESSAGES["opened"], status=201)


class SandboxInfractionDecisionApi(AccountAPIView):
    """Plays the MED's decision on a sandbox acquirer's infraction (decisions §8)."""

    required_permission = "cashin"

    @extend_schema(
        tags=["sandbox"],
        summary="Sandbox: accept, reject or cancel a MED infraction",
        description=(
            "`/accept`, `/reject` or `/cancel`. Only with PIX_SANDBOX on, for infractions at a `sandbox` "
            "acquirer. `accept`: the money goes back to the payer (`returned_amount`, default what was "
            "blocked): the block is released and the merchant's "
            "share debited, which may take the balance below zero; accepting again with a larger amount is a "
            "later return (MED 2.0). `reject` / `cancel`: the block is released. Another decision after the "
            "close is a 409; the same one again is a 200 that changes nothing."
        ),
        parameters=[uuid_path("infraction_id", "Infraction id (the `id` the sandbox's infraction call answered).")],
        request=AcceptSerializer,
        responses=responses(
            {200: INFRACTION_ENVELOPE},
            (400, INVALID_BODY),
            (404, not_found(err.INFRACTION_NOT_FOUND)),
            (409, CONFLICT),
            (422, VALIDATION_ERROR),
            (503, UNREAD),
        ),
    )
    def post(self, request: Request, infraction_id: str, decision: str) -> Response:
        infraction = sandbox_infraction_get(account=request.user, infraction_id=infraction_id)  # type: ignore[arg-type]
        returned: int | None = None
        if decision == "accept":
            body = AcceptSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            returned = body.validated_data.get("returned_amount")
        decided = sandbox_infraction_decide(infraction=infraction, action=decision, returned_amount=returned)
        return ok(infraction_payload(decided), MESSAGES[decision])
