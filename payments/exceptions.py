"""Errors of charges, with the spec's exact texts."""

__all__ = [
    "ACQUIRER_RULES_MESSAGE",
    "ACQUIRER_UNAVAILABLE",
    "BOTH_OVERRIDE_FORMS",
    "DUPLICATE_ACQUIRER",
    "DUPLICATE_PRIORITY",
    "NO_ACQUIRER_AVAILABLE",
    "AcquirerRuleViolation",
    "AllAcquirersFailed",
    "BusinessRuleError",
    "ChargeNotFound",
    "RefundFailed",
    "RefundNotAllowed",
    "RefundNotFound",
    "RefundUndetermined",
    "TransitionNotAllowed",
    "reject_repeats",
]

# The acquirer-list rules are the acquirers app's (its selection API shares
# them with a charge's override); named here too for the charge code.
from acquirers.exceptions import (
    ACQUIRER_RULES_MESSAGE,
    ACQUIRER_UNAVAILABLE,
    BOTH_OVERRIDE_FORMS,
    DUPLICATE_ACQUIRER,
    DUPLICATE_PRIORITY,
    NO_ACQUIRER_AVAILABLE,
    AcquirerRuleViolation,
    reject_repeats,
)
from core.exceptions import BusinessRuleError, ConflictError, NotFoundError, PixServiceError

METHOD_NOT_ENABLED = "Este método de pagamento não está habilitado para sua conta."
AMOUNT_ABOVE_MAX = "O valor máximo permitido para transações é de R$ 3.000,00."
NET_BELOW_MIN = "O valor da transação deve resultar em pelo menos R$ 0,10 após as taxas."
ALL_ACQUIRERS_FAILED = "Erro ao processar o pagamento. Tente novamente mais tarde."
CREATE_INTERNAL_ERROR = "Ocorreu um erro ao criar o pagamento."
CHARGE_NOT_FOUND = "Transação não encontrada."
# The sandbox drivers: a charge withdrawn at its acquirer, and a Pix that came after the cancel.
REMOVED_AT_ACQUIRER = "A transação foi removida na adquirente: o pagador não consegue mais pagá-la."
NO_QR_CODE = "Esta cobrança não tem QR code: é um ciclo do Pix Automático, liquidado pelo banco do pagador."
#: A Pix Automático cycle is paid by the payer's bank on its own, never by scanning a code.
CYCLE_PAID_BY_PAYERS_BANK = (
    "Esta cobrança é um ciclo do Pix Automático: o banco do pagador a liquida no vencimento, sem QR code "
    "(no sandbox: POST /api/sandbox/recurrences/{id}/cycles/{index}/pay ou /fail)."
)
LATE_PAYMENT_RECORDED = (
    "Pagamento recebido após o cancelamento: registrado para a equipe creditar ou devolver ao pagador."
)

# POST /transactions/{id}/refund (docs/api/refunds.md, "Refusals").
REFUND_REQUESTED = "Estorno solicitado com sucesso."
REFUND_NOT_FOUND = "Esta transação não tem estorno."
REFUND_NOT_PAID = "Só transações pagas podem ser estornadas; esta está {status}."
REFUND_IN_PROGRESS = "Já existe um estorno em processamento para esta transação."
REFUND_ALREADY_FAILED = (
    "A adquirente já recusou o estorno desta transação; um novo pedido teria a mesma resposta. Fale com o suporte."
)
REFUND_UNAVAILABLE = "O estorno desta transação não está disponível pela API. Fale com o suporte."
REFUND_INSUFFICIENT_BALANCE = "Saldo insuficiente para realizar o estorno."
#: A MED infraction is open on the charge (infractions app): it alone moves the charge until it closes.
MED_OPEN = "Esta transação tem uma infração MED em andamento: só a infração a altera até ser encerrada."
REFUND_MED_OPEN = "Esta transação tem uma infração MED em andamento e não pode ser estornada."


class ChargeNotFound(NotFoundError):
    """Unknown id, malformed id, or another account's charge."""

    default_message = CHARGE_NOT_FOUND


class AllAcquirersFailed(BusinessRuleError):
    """Every acquirer of the chain failed, or the chain was empty."""

    default_message = ALL_ACQUIRERS_FAILED
    default_code = "acquirers_failed"


class TransitionNotAllowed(ConflictError):
    """The charge's current status does not allow the requested change."""

    default_code = "transition_not_allowed"


class RefundFailed(PixServiceError):
    """The acquirer could not, or did not, return the money (staff read it
    from the back office's refund action)."""

    default_message = "A devolução não foi realizada pela adquirente."
    default_code = "refund_failed"


class RefundUndetermined(RefundFailed):
    """No definitive answer from the acquirer (a timeout, a 5xx, an answer it
    could not read, too busy to call): to staff, the refund was not made
    now; to the money, it may have been. Its amount is reserved (nothing
    reserved is released on it) and the refund is asked about again."""

    default_code = "refund_undetermined"


class RefundNotAllowed(ConflictError):
    """The charge's state refuses a refund by API (not paid, a refund already
    in progress, or one the acquirer already refused): 409, nothing changed."""

    default_code = "refund_not_allowed"


class RefundNotFound(NotFoundError):
    """The charge exists but was never refunded through a reservation."""

    default_message = REFUND_NOT_FOUND
