"""The charges list's refund action ("Estornar"): a paid charge's refund is
asked for here and made only once another staff member approves it
(``payments.approvals``); a charge in chargeback is marked refunded (MED
returned the money already). Used by ``payments.admin.charges``."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.admin.decisions import staff_user
from accounts.exceptions import ActionNotExecutable, ApprovalRefused
from accounts.models import MoneyActionRequest
from accounts.services import money_action_request
from core.admin.confirmation import Confirmation, confirm_first
from core.exceptions import PixServiceError
from core.plural import plural
from payments.exceptions import TransitionNotAllowed
from payments.models import Charge, ChargeRefund, ChargeStatus
from payments.refunds import RefundOutcome, charge_refund


def _refund_debit(charge: Charge) -> int:
    # A charge in chargeback already gave its money back (MED): refunding it moves nothing.
    return charge.liquid_amount if charge.status == ChargeStatus.PAID else 0


def _ask_refund(request: HttpRequest, record: Charge, reason: str) -> MoneyActionRequest:
    with transaction.atomic():
        return money_action_request(
            action=MoneyActionRequest.Action.REFUND_CHARGE,
            target_id=record.pk,
            requested_by=staff_user(request),
            reason=reason,
        )


def _refund(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any], reason: str) -> None:
    """Paid charges: the money would go to the payer, whom an insider can be,
    so only a request is made; another staff member approves it
    (``payments.approvals``), and then the acquirer is asked to return the
    Pix (a devolução). A paid charge whose devolução is already processing
    (approved, or asked by API) is asked about again (same devolução id: no
    new money moves). Charges in chargeback are marked refunded only (MED
    returned the money already)."""
    counts = dict.fromkeys(RefundOutcome, 0)
    skipped = asked = 0
    failures: list[str] = []
    for record in queryset.select_related(None).only("pk", "status"):
        if record.status not in (ChargeStatus.PAID, ChargeStatus.CHARGEBACK):
            skipped += 1
            continue
        processing = record.refunds.filter(status=ChargeRefund.Status.PROCESSING).exists()
        if record.status == ChargeStatus.PAID and not processing:
            try:
                pending = _ask_refund(request, record, reason)
            except (ApprovalRefused, ActionNotExecutable) as exc:
                failures.append(f"{record.pk}: {exc.message}")
                continue
            modeladmin.log_change(
                request, record, f"Estornar: pedido #{pending.pk} aguardando aprovação. Motivo: {reason}"
            )
            modeladmin.log_addition(request, pending, f"Pedido: Estornar cobrança paga. Motivo: {reason}")
            asked += 1
            continue
        try:
            outcome = charge_refund(charge_id=record.pk, actor=request.user.get_username(), reason=reason)
        except TransitionNotAllowed:
            skipped += 1  # moved on since the list was loaded
            continue
        except PixServiceError as exc:
            failures.append(f"{record.pk}: {exc.message}")
            continue
        counts[outcome] += 1
        modeladmin.log_change(request, record, f"Estornar ({record.status}): {outcome}. Motivo: {reason}")
    done = counts[RefundOutcome.REFUNDED] + counts[RefundOutcome.MARKED]
    if done:
        modeladmin.message_user(
            request, plural(done, "Estornar: {n} cobrança.", "Estornar: {n} cobranças."), messages.SUCCESS
        )
    if counts[RefundOutcome.PROCESSING]:
        modeladmin.message_user(
            request,
            plural(
                counts[RefundOutcome.PROCESSING],
                "{n} devolução em processamento na adquirente",
                "{n} devoluções em processamento na adquirente",
            )
            + ": a cobrança passa a estornada quando a adquirente confirmar (ou ao estornar de novo).",
            messages.INFO,
        )
    if asked:
        modeladmin.message_user(
            request,
            "Estornar: "
            + plural(asked, "{n} pedido de aprovação criado.", "{n} pedidos de aprovação criados.")
            + " Nada foi debitado nem devolvido: outro membro da equipe precisa aprovar em Pedidos de aprovação "
            "(Contas).",
            messages.SUCCESS,
        )
    for failure in failures:
        modeladmin.message_user(request, failure, messages.ERROR)
    if skipped:
        modeladmin.message_user(
            request,
            plural(
                skipped,
                "{n} cobrança ignorada: o status atual não permite.",
                "{n} cobranças ignoradas: o status atual não permite.",
            ),
            messages.WARNING,
        )


refund = confirm_first(
    _refund,
    name="refund",
    description="Estornar",
    permission="refund_charge",
    confirmation=Confirmation(
        effect=(
            "Estorno: a adquirente devolve o Pix ao pagador (quando o adaptador permite) e o valor líquido "
            "é debitado do saldo da conta"
        ),
        column="Débito na conta",
        amount=_refund_debit,
        from_statuses=(ChargeStatus.PAID, ChargeStatus.CHARGEBACK),
        note="Cobranças pagas: nada é debitado nem devolvido agora; é criado um pedido que outro membro da equipe "
        "precisa aprovar (o pagador pode ser qualquer pessoa, inclusive da equipe). Cobranças em contestação "
        "são só marcadas como estornadas: o dinheiro já voltou pelo MED.",
    ),
)
