"""Errors of Pix Automático (/api/recurrences), with their pt-BR texts."""

from core.exceptions import BusinessRuleError, ConflictError, NotFoundError

RECURRENCE_NOT_FOUND = "Recorrência não encontrada."
CYCLE_NOT_FOUND = "Ciclo não encontrado."
CREATED = "Recorrência criada com sucesso."
CANCELLED = "Recorrência cancelada."
AMOUNT_SET = "Valor do ciclo informado."
ALREADY_CANCELLED = "A recorrência já estava cancelada."
LISTED = "Recorrências listadas com sucesso."
READ = "Recorrência consultada com sucesso."
CYCLES_LISTED = "Ciclos listados com sucesso."
CYCLE_READ = "Ciclo consultado com sucesso."
LIVE_EXISTS = "Já existe uma recorrência ativa ou aguardando autorização para este devedor e contrato."
ALREADY_ENDED = "A recorrência já está encerrada ({status})."
FIXED_AMOUNT = "A recorrência tem valor fixo: o valor dos ciclos não pode ser informado."
AMOUNT_ABOVE_MAX = "O valor do ciclo excede o valor máximo da recorrência."
AMOUNT_TOO_LATE = "O valor deste ciclo já não pode ser informado: a cobrança já foi enviada ou o prazo passou."
NOT_A_CYCLE = "A recorrência não tem esse ciclo (fora da vigência)."


class RecurrenceNotFound(NotFoundError):
    """Unknown id, malformed id, or another account's recurrence."""

    default_message = RECURRENCE_NOT_FOUND


class CycleNotFound(NotFoundError):
    default_message = CYCLE_NOT_FOUND


class LiveRecurrenceExists(ConflictError):
    """One live recurrence per (account, debtor, contract): a second would
    charge the same payer twice for one contract, and a create whose answer
    was lost is found at the acquirer by that pair."""

    default_message = LIVE_EXISTS
    default_code = "recurrence_exists"


class RecurrenceEnded(ConflictError):
    default_message = "A recorrência já está encerrada."
    default_code = "recurrence_ended"


class CycleAmountRefused(BusinessRuleError):
    """A cycle's amount the recurrence does not take (fixed, above its
    maximum, or too late to change)."""

    default_code = "cycle_amount"
