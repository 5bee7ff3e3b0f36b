"""Maker-checker for what decides where an account's money may go: its
contact e-mail (where credential links are sent), whether its withdrawals
wait for a person, its withdrawal limits, whether its payouts may only go
to keys its holder owns, and the holder's CPF/CNPJ those keys are compared
with (any change of it needs a second person, as the e-mail's).

A change that loosens one of them (any new contact e-mail, manual approval
switched off, same ownership only switched off, a lower minimum, a higher
per-request or daily limit) is only
asked for (:func:`account_change_request`) and applied when another staff
member approves it (:func:`account_change_approve`), if the field still
holds the value the request saw. A change that tightens them (manual
approval or same ownership only switched on, a higher minimum, a lower
limit) is what staff do in
an incident, so it applies at once (:func:`loosens` says which is which).

Creating an account in the back office (:func:`account_create_by_staff`)
sets its first values as given, except the contact e-mail: that one becomes
a pending request from empty, so the person who creates an account cannot
also choose, alone, where its credentials' links go. ``pix_bootstrap``
(operators with shell access, outside the back office's rules) still sets it
directly.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.exceptions import ApprovalRefused
from accounts.models import Account, AccountChangeRequest, CredentialLink
from accounts.services import account_create
from core.documents import normalize_document
from core.plural import plural

Field = AccountChangeRequest.Field
State = AccountChangeRequest.State

#: The account fields a change request covers, in the order the form shows them.
CONTROLLED_FIELDS: tuple[str, ...] = tuple(Field.values)
APPROVE_PERMISSION = "accounts.approve_account_change"
#: The controlled fields that are on/off controls: switching one off loosens it.
SWITCHES = (Field.WITHDRAWALS_NEED_APPROVAL, Field.PAYOUTS_SAME_OWNERSHIP_ONLY)


def loosens(field: str, old: Any, new: Any) -> bool:
    """Whether changing ``field`` from ``old`` to ``new`` lets money leave
    more easily or toward another contact (then it needs a second person)."""
    if field in (Field.EMAIL, Field.DOCUMENT):
        return bool(old != new)
    if field in SWITCHES:
        return bool(old and not new)
    if field == Field.WITHDRAWAL_MINIMUM:
        return bool(new < old)
    return bool(new > old)


def _checked(field: str, value: Any) -> Any:
    """The value as the account stores it; what the form already refused is refused here too."""
    if field == Field.EMAIL:
        value = str(value).strip()
        if value:
            try:
                validate_email(value)
            except ValidationError:
                raise ApprovalRefused("E-mail de contato inválido.") from None
        return value
    if field == Field.DOCUMENT:
        value = str(value).strip()
        document = normalize_document(value) if value else ""
        if document is None:
            raise ApprovalRefused("CPF/CNPJ inválido.")
        return document
    if field in SWITCHES:
        if not isinstance(value, bool):
            raise ApprovalRefused(f"{Field(field).label}: valor inválido.")
        return value
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ApprovalRefused(f"{Field(field).label}: o valor deve ser um número de centavos não negativo.")
    return value


def account_change_request(
    *, account: Account, field: str, new_value: Any, requested_by: User, reason: str
) -> AccountChangeRequest:
    """Ask for ``field`` of ``account`` to become ``new_value``; nothing
    changes until another staff member approves. Records the value it has
    now, which approval checks again. :class:`ApprovalRefused` for a blank
    reason, an invalid value, no change, or a request already open for that
    field of that account."""
    if field not in CONTROLLED_FIELDS:
        raise ValueError(f"{field!r} is not a field change requests cover")
    reason = reason.strip()
    if not reason:
        raise ApprovalRefused("Informe o motivo.")
    new_value = _checked(field, new_value)
    label = Field(field).label
    try:
        with transaction.atomic():
            locked = Account.objects.select_for_update().only(field).get(pk=account.pk)
            old_value = getattr(locked, field)
            if old_value == new_value:
                raise ApprovalRefused(f"{label}: o valor pedido é o atual; nada a aprovar.")
            return AccountChangeRequest.objects.create(
                account_id=account.pk,
                field=field,
                old_value=old_value,
                new_value=new_value,
                reason=reason,
                requested_by=requested_by,
            )
    except IntegrityError:
        raise ApprovalRefused(
            f"{label}: já existe um pedido de alteração aguardando aprovação para esta conta."
        ) from None


#: The reason of the contact e-mail request a back-office creation makes.
CREATION_REASON = "E-mail de contato informado no cadastro da conta"


def account_create_by_staff(
    *, created_by: User, name: str, email: str = "", **fields: Any
) -> tuple[Account, AccountChangeRequest | None]:
    """Create an account from the back office with ``fields`` as given and no
    contact e-mail: ``email``, when given, becomes a pending change request
    by ``created_by`` (from empty), which another staff member must approve
    before any claim link can be sent to it. The creator is that request's
    requester, so segregation of duties counts them as having chosen the
    contact (``accounts.segregation``)."""
    with transaction.atomic():
        account = account_create(name=name, email="", **fields)
        pending = None
        if email.strip():
            pending = account_change_request(
                account=account, field=Field.EMAIL, new_value=email, requested_by=created_by, reason=CREATION_REASON
            )
    return account, pending


def _decision(request_id: Any, staff: User) -> AccountChangeRequest:
    """The pending request, locked, once ``staff`` may decide it."""
    request = AccountChangeRequest.objects.select_for_update().select_related("requested_by").get(pk=request_id)
    if request.state != State.PENDING:
        raise ApprovalRefused(f"O pedido de alteração #{request.pk} já foi decidido ({request.get_state_display()}).")
    if request.requested_by_id == staff.pk:
        raise ApprovalRefused(
            f"O pedido de alteração #{request.pk} foi feito por você: outra pessoa precisa decidi-lo."
        )
    if not staff.is_active or not staff.has_perm(APPROVE_PERMISSION):
        raise ApprovalRefused(f"Sem permissão para decidir o pedido de alteração #{request.pk}.")
    return request


def account_change_approve(*, request_id: Any, approver: User, note: str = "") -> AccountChangeRequest:
    """Approve a pending change and apply it, in one transaction under the
    request's then the account's row lock: ``approved`` if and only if the
    field changed. A field that no longer holds the value the request saw
    (changed meanwhile) leaves it ``failed``, with why, and the account as it
    is. The requester can never approve (here and in a database constraint)."""
    with transaction.atomic():
        request = _decision(request_id, approver)
        account = Account.objects.select_for_update().get(pk=request.account_id)
        current = getattr(account, request.field)
        if current != request.old_value:
            request.state = State.FAILED
            request.outcome = (
                f"{request.get_field_display()} mudou desde o pedido (era {request.shown(request.old_value)}, "
                f"agora {request.shown(current)}): nada foi aplicado."
            )[:500]
        else:
            setattr(account, request.field, request.new_value)
            account.save(update_fields=[request.field, "updated_at"])
            request.state = State.APPROVED
            if request.field == Field.EMAIL:
                # Links in the old contact's mailbox would still hand out the
                # secrets: they stop working with the change (the credentials
                # still wait, and their links can be sent again to the new one).
                replaced = CredentialLink.objects.filter(
                    credential__account_id=account.pk, used_at=None, replaced_at=None
                ).update(replaced_at=timezone.now())
                if replaced:
                    request.outcome = plural(
                        replaced,
                        "{n} link de resgate em aberto, enviado ao e-mail anterior, deixou de funcionar: "
                        "reenvie-o ao novo e-mail.",
                        "{n} links de resgate em aberto, enviados ao e-mail anterior, deixaram de funcionar: "
                        "reenvie-os ao novo e-mail.",
                    )
        _record_decision(request, approver, note)
    return request


def _record_decision(request: AccountChangeRequest, staff: User, note: str) -> None:
    request.decided_by = staff
    request.decided_at = timezone.now()
    request.decision_note = note.strip()
    request.save()


def account_change_reject(*, request_id: Any, staff: User, note: str = "") -> AccountChangeRequest:
    """Turn a pending change down; the account stays as it is."""
    with transaction.atomic():
        request = _decision(request_id, staff)
        request.state = State.REJECTED
        _record_decision(request, staff, note)
    return request
