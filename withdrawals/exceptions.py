"""Errors of withdrawals, with decisions §5's exact texts."""

from core.exceptions import BusinessRuleError, ConflictError, NotFoundError

PER_REQUEST_LIMIT = "O valor excede o limite por solicitação de saque."
DAILY_LIMIT = "O valor excede o limite diário de saques."
INSUFFICIENT_BALANCE = "Saldo insuficiente para realizar o saque."
WITHDRAWAL_NOT_FOUND = "Saque não encontrado."
# {amount} is core.money.brl of the minimum ("R$ 10,00").
BELOW_MINIMUM = "O valor mínimo para saque é de {amount}."
NOTHING_LEFT_AFTER_FEE = "O valor do saque não cobre a taxa de saque."
INVALID_PAYEE_DOCUMENT = "CPF/CNPJ do recebedor inválido."
SCHEDULED_CANCEL_REFUSED = "Só um saque agendado que ainda não foi enviado pode ser cancelado."


class WithdrawalNotFound(NotFoundError):
    """Unknown id, malformed id, or another account's withdrawal."""

    default_message = WITHDRAWAL_NOT_FOUND


RECEIPT_NOT_PAID = "O saque ainda não foi pago: não há comprovante."


class WithdrawalNotPaid(ConflictError):
    """A receipt was asked of a withdrawal that was never paid (withdrawals.receipts)."""

    default_message = RECEIPT_NOT_PAID
    default_code = "not_paid"


class WithdrawalTransitionNotAllowed(ConflictError):
    """The withdrawal's status does not allow the requested change."""

    default_code = "transition_not_allowed"


class PayoutUnsettled(WithdrawalTransitionNotAllowed):
    """Failing the withdrawal (money back) is refused: a send is in flight, or
    the acquirer that may hold the payout has not said where it stands."""

    default_code = "payout_unsettled"


class PayoutUndetermined(Exception):
    """An acquirer may have the payout and cannot tell us now: try again
    later, never elsewhere (a payout is never sent twice). The task retries
    on it."""


PAYOUT_IN_FLIGHT = "O pagamento está sendo enviado à adquirente: o saque não pode falhar agora."
PAYOUT_UNDETERMINED = (
    "A adquirente {acquirer} ainda não disse se pagou este saque: resolva-o na fila de pagamentos "
    "indeterminados, depois de confirmar com a adquirente."
)

RESOLVE_REASON_REQUIRED = "Diga qual resposta definitiva a adquirente deu (ao menos 10 caracteres)."
RESOLVE_OUTCOME = "Resolva como pago (com o e2e id) ou como falho."
RESOLVE_NOT_UNDETERMINED = "Só um pagamento indeterminado de um saque aprovado pode ser resolvido assim."

__all__ = ["BusinessRuleError", "PayoutUnsettled", "WithdrawalNotFound", "WithdrawalTransitionNotAllowed"]

# The payee check (withdrawals.payee_rules, withdrawals.payees; docs/api/payee-check.md).
SAME_OWNERSHIP_ONLY = "Esta conta só permite saques para chaves do próprio titular."
KEY_NOT_PAYEE = "A chave informada não pertence ao CPF/CNPJ do recebedor."
PAYEE_MISMATCH = "O titular da chave não confere com o documento informado."
PAYEE_KEY_NOT_FOUND = "A chave Pix não foi encontrada no DICT."
PAYEE_LOOKUP_GAVE_UP = "Não foi possível consultar o titular da chave a tempo; nada foi enviado."
PAYEE_CHECKED_SEND_REFUSED = "A adquirente recusou o envio com verificação do titular; nada foi enviado."

#: What a merchant reads as a failed withdrawal's ``failure_reason`` when the
#: stored one is not for them (an acquirer's text, staff's note when they
#: settled an undetermined payout): the stored reason stays for staff.
PAYOUT_FAILED = "O pagamento não pôde ser concluído; o valor voltou ao saldo."
#: Stored reasons written for the merchant, shown as they are.
MERCHANT_FAILURE_REASONS = frozenset(
    {PAYEE_MISMATCH, PAYEE_KEY_NOT_FOUND, PAYEE_LOOKUP_GAVE_UP, PAYEE_CHECKED_SEND_REFUSED}
)


def merchant_failure_reason(status: str, reason: str) -> str:
    """A withdrawal's ``failure_reason`` as the API shows it: "" unless
    failed; a reason written for the merchant as is; any other the generic one."""
    if status != "failed":
        return ""
    return reason if reason in MERCHANT_FAILURE_REASONS else PAYOUT_FAILED
