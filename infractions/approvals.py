"""Maker-checker for infractions: one staff member asks
(:func:`infraction_request_register`, :func:`infraction_request_action`), a
second one approves (:func:`infraction_request_approve`) or rejects
(:func:`infraction_request_reject`). Nothing is blocked, released or debited
before the approval; the approval applies the request through
:mod:`infractions.services` in its own transaction, under the infraction's
row lock, and the request is ``approved`` if and only if it was applied.

An acquirer with an infractions API (``supports_infractions``) is the
evidence for its infractions: staff neither register nor close them there
(its listing does), and may only give up the defence (``accept_return``).
For one without that API the evidence is what it reported by other means
(a letter, a portal, a phone call), which staff type in and a second staff
member checks."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.exceptions import ActionNotExecutable, ApprovalRefused
from acquirers import adapters
from acquirers.adapters.base import InfractionRecord, InvalidOptions
from acquirers.adapters.base import InfractionStatus as RecordStatus
from acquirers.models import Acquirer
from core.money import brl
from infractions.choices import InfractionSource, InfractionStatus
from infractions.models import Infraction
from infractions.services import infraction_apply, infraction_close
from infractions.staff_models import InfractionRequest
from payments.choices import ChargeSource

Kind = InfractionRequest.Kind
State = InfractionRequest.State

REQUEST_PERMISSION = "infractions.request_infraction_action"
APPROVE_PERMISSION = "infractions.approve_infraction_action"

HAS_API = (
    "A adquirente {acquirer} informa as infrações pela API: o registro dela é a evidência, a equipe não "
    "registra nem encerra infrações dela."
)


def has_infractions_api(acquirer: Acquirer) -> bool:
    """Whether ``acquirer``'s adapter lists infractions itself. An adapter
    this process lacks lists nothing here: staff register what it reports."""
    try:
        return adapters.adapter_class(acquirer.adapter).supports("infractions")
    except InvalidOptions:
        return False


def _reason(reason: str) -> str:
    reason = reason.strip()
    if not reason:
        raise ApprovalRefused("Informe o motivo.")
    return reason


def _may_ask(user: User) -> None:
    if not user.is_active or not user.has_perm(REQUEST_PERMISSION):
        raise ApprovalRefused("Sem permissão para pedir ações sobre infrações.")


def _create(**fields: Any) -> InfractionRequest:
    try:
        with transaction.atomic():
            return InfractionRequest.objects.create(**fields)
    except IntegrityError:
        raise ApprovalRefused("Já existe um pedido aguardando aprovação para esta infração.") from None


# --------------------------------------------------------------------------- asking


def register_refusal(
    *, acquirer: Acquirer, external_id: str, e2e_id: str, amount: int, blocked_amount: int
) -> str | None:
    """Why registering this record cannot be asked; None when it can."""
    if has_infractions_api(acquirer):
        return HAS_API.format(acquirer=acquirer)
    if not external_id.strip() or not e2e_id.strip():
        return "Informe o id da infração na adquirente e o e2e id do Pix contestado."
    if amount <= 0:
        return "O valor contestado deve ser maior que zero."
    if not 0 <= blocked_amount <= amount:
        return "O valor bloqueado deve estar entre zero e o valor contestado."
    if Infraction.objects.filter(acquirer=acquirer, external_id=external_id.strip()).exists():
        return f"A infração {external_id.strip()} da {acquirer} já está registrada."
    return None


def infraction_request_register(
    *,
    acquirer: Acquirer,
    external_id: str,
    e2e_id: str,
    amount: int,
    blocked_amount: int,
    infraction_reason: str,
    defense_deadline: dt.datetime | None,
    requested_by: User,
    reason: str,
) -> InfractionRequest:
    """Ask to register an infraction ``acquirer`` (one without an infractions
    API) reported by other means. Nothing is blocked until another staff
    member approves. :class:`ApprovalRefused` for an acquirer with that API,
    an incomplete record, one already registered or already asked for."""
    _may_ask(requested_by)
    reason = _reason(reason)
    external_id, e2e_id = external_id.strip(), e2e_id.strip()
    refusal = register_refusal(
        acquirer=acquirer, external_id=external_id, e2e_id=e2e_id, amount=amount, blocked_amount=blocked_amount
    )
    if refusal is not None:
        raise ApprovalRefused(refusal)
    return _create(
        kind=Kind.REGISTER,
        acquirer=acquirer,
        external_id=external_id[:100],
        e2e_id=e2e_id[:64],
        amount=amount,
        blocked_amount=blocked_amount,
        infraction_reason=infraction_reason.strip()[:500],
        defense_deadline=defense_deadline,
        requested_by=requested_by,
        reason=reason,
    )


def action_refusal(infraction: Infraction, kind: str, returned_amount: int | None) -> str | None:
    """Why ``kind`` cannot be asked (or applied) for ``infraction`` as it is
    now; None when it can."""
    if infraction.is_closed:
        return "Esta infração já foi encerrada."
    api = has_infractions_api(infraction.acquirer)
    if kind == Kind.CLOSE_REJECTED:
        if api:
            return HAS_API.format(acquirer=infraction.acquirer)
        return None
    if kind != Kind.ACCEPT_RETURN:
        return "Pedido desconhecido."
    if api:
        if infraction.defense_submitted_at is not None:
            return "Esta infração já tem uma defesa: a devolução não pode mais ser aceita sem defesa."
        if infraction.defense_waived_at is not None:
            return "A devolução desta infração já foi aceita sem defesa."
        if returned_amount is not None:
            return "A adquirente informa pela API quanto foi devolvido: não informe o valor."
        return None
    if returned_amount is None:
        return "Informe quanto a adquirente devolveu ao pagador."
    if not 0 <= returned_amount <= infraction.amount:
        return f"O valor devolvido deve estar entre zero e o valor contestado ({brl(infraction.amount)})."
    return None


def infraction_request_action(
    *, infraction: Infraction, kind: str, requested_by: User, reason: str, returned_amount: int | None = None
) -> InfractionRequest:
    """Ask to accept ``infraction``'s return without defence, or to close it
    as rejected (an acquirer without an infractions API); ``returned_amount``:
    what that acquirer said went back to the payer (acceptance only). Nothing
    changes until another staff member approves."""
    _may_ask(requested_by)
    reason = _reason(reason)
    refusal = action_refusal(infraction, kind, returned_amount)
    if refusal is not None:
        raise ApprovalRefused(refusal)
    return _create(
        kind=kind,
        acquirer_id=infraction.acquirer_id,
        infraction=infraction,
        returned_amount=returned_amount,
        requested_by=requested_by,
        reason=reason,
    )


# --------------------------------------------------------------------------- deciding


def _decision(request_id: Any, staff: User) -> InfractionRequest:
    """The pending request, locked, once ``staff`` may decide it."""
    request = (
        InfractionRequest.objects.select_for_update(of=("self",))
        .select_related("requested_by", "acquirer")
        .get(pk=request_id)
    )
    if request.state != State.PENDING:
        raise ApprovalRefused(f"O pedido #{request.pk} já foi decidido ({request.get_state_display()}).")
    if request.requested_by_id == staff.pk:
        raise ApprovalRefused(f"O pedido #{request.pk} foi feito por você: outra pessoa precisa decidi-lo.")
    if not staff.is_active or not staff.has_perm(APPROVE_PERMISSION):
        raise ApprovalRefused(f"Sem permissão para decidir o pedido #{request.pk}.")
    return request


def _register(request: InfractionRequest, actor: str) -> str:
    if has_infractions_api(request.acquirer):
        raise ActionNotExecutable(HAS_API.format(acquirer=request.acquirer))
    if Infraction.objects.filter(acquirer_id=request.acquirer_id, external_id=request.external_id).exists():
        raise ActionNotExecutable(f"A infração {request.external_id} já foi registrada desde o pedido.")
    record = InfractionRecord(
        external_id=request.external_id,
        e2e_id=request.e2e_id,
        status=RecordStatus.OPEN,
        amount=request.amount or 0,
        blocked_amount=request.blocked_amount or 0,
        reason=request.infraction_reason,
        opened_at=request.requested_at,
        defense_deadline=request.defense_deadline,
        raw={"registered_by_request": request.pk},
    )
    infraction = infraction_apply(acquirer=request.acquirer, record=record, source=InfractionSource.STAFF, actor=actor)
    request.infraction = infraction
    if infraction.note:
        return infraction.note
    return f"Infração registrada; {brl(infraction.hold)} bloqueado no saldo da conta."


def _act(request: InfractionRequest, actor: str) -> str:
    assert request.infraction_id is not None  # the database's infraction_request_complete
    infraction = (
        Infraction.objects.select_for_update(of=("self",)).select_related("acquirer").get(pk=request.infraction_id)
    )
    refusal = action_refusal(infraction, request.kind, request.returned_amount)
    if refusal is not None:
        raise ActionNotExecutable(refusal)
    if request.kind == Kind.CLOSE_REJECTED:
        infraction_close(
            infraction=infraction, status=InfractionStatus.REJECTED, returned=0, actor=actor, source=ChargeSource.STAFF
        )
        return "Infração encerrada como rejeitada; bloqueio liberado."
    if infraction.defense_submitted_at is None:
        infraction.defense_waived_at = timezone.now()
        infraction.save(update_fields=["defense_waived_at", "updated_at"])
    if request.returned_amount is None:
        # The acquirer closes it and says what went back; its listing applies that.
        return "Defesa dispensada: a conta não pode mais enviar defesa."
    infraction_close(
        infraction=infraction,
        status=InfractionStatus.ACCEPTED,
        returned=request.returned_amount,
        actor=actor,
        source=ChargeSource.STAFF,
    )
    return f"Infração encerrada como aceita; {brl(infraction.debited_amount)} debitado da conta."


def infraction_request_approve(*, request_id: Any, approver: User, note: str = "") -> InfractionRequest:
    """Approve a pending request and apply it, in one transaction: the
    request is ``approved`` if and only if it was applied. The requester can
    never approve (here and in a database constraint). An infraction that
    moved on since the request leaves it ``failed``, with why, and nothing
    changed."""
    with transaction.atomic():
        request = _decision(request_id, approver)
        actor = f"{approver.get_username()} (aprovou o pedido #{request.pk} de {request.requested_by.get_username()})"
        try:
            with transaction.atomic():
                outcome = _register(request, actor) if request.kind == Kind.REGISTER else _act(request, actor)
        except ActionNotExecutable as exc:
            request.state = State.FAILED
            request.outcome = exc.message[:500]
        else:
            request.state = State.APPROVED
            request.outcome = outcome[:500]
        _record_decision(request, approver, note)
    return request


def infraction_request_reject(*, request_id: Any, staff: User, note: str = "") -> InfractionRequest:
    """Turn a pending request down; nothing changes."""
    with transaction.atomic():
        request = _decision(request_id, staff)
        request.state = State.REJECTED
        _record_decision(request, staff, note)
    return request


def _record_decision(request: InfractionRequest, staff: User, note: str) -> None:
    request.decided_by = staff
    request.decided_at = timezone.now()
    request.decision_note = note.strip()
    request.save()
