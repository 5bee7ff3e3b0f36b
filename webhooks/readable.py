"""What staff read about webhooks, in pt-BR: a delivery's failure (the
stored text is the exception as Python phrased it, kept for engineers) and
an event's status (the API's status values).

Display only: nothing here is stored or sent, and the API keeps returning
the stored text and values unchanged."""

from __future__ import annotations

import re

#: Labels of the statuses events report, by event type (the statuses of
#: payments.ChargeStatus and withdrawals.WithdrawalStatus; this layer may not
#: import them, a test keeps them in step).
#: A charge's statuses, immediate or with a due date.
_CHARGE_LABELS = {
    "pending": "Pendente",
    "paid": "Paga",
    "failed": "Falhou",
    "canceled": "Cancelada",
    "refunded": "Estornada",
    "chargeback": "Contestada",
}

EVENT_STATUS_LABELS: dict[str, dict[str, str]] = {
    "transaction": _CHARGE_LABELS,
    "due_charge": _CHARGE_LABELS,
    "withdrawal": {
        "pending": "Pendente",
        "approved": "Aprovado",
        "paid": "Pago",
        "failed": "Falhou",
        "canceled": "Cancelado",
        "refunded": "Devolvido",
    },
    "infraction": {
        "opened": "Aberta",
        "deadline": "Prazo de defesa próximo",
        "closed": "Encerrada",
        "returned": "Valor devolvido ao pagador",
    },
    "due_charge_batch": {"done": "Concluído"},
    # A batch of withdrawals ended (withdrawals.batch_progress): all its items final, or refused.
    "payout_batch": {"completed": "Concluído", "canceled": "Cancelado"},
    # Pix Automático (recurrences.models: RecurrenceStatus, the cycle's statuses).
    "recurrence": {
        "created": "Aguardando autorização",
        "approved": "Autorizada",
        "rejected": "Rejeitada",
        "expired": "Expirada",
        "cancelled": "Cancelada",
        "completed": "Concluída",
    },
    "recurrence_cycle": {
        "scheduled": "Agendado",
        "awaiting_amount": "Aguardando valor",
        "active": "Ativo",
        "retrying": "Em retentativa",
        "paid": "Pago",
        "failed": "Falhou",
        "cancelled": "Cancelado",
        "missed": "Perdido",
        "refunded": "Estornado",
        "chargeback": "Contestado",
    },
}


def event_status_label(event_type: str, status: str) -> str:
    return EVENT_STATUS_LABELS.get(event_type, {}).get(status, status)


_TIMEOUT = re.compile(r"^Timeout: no complete answer within (\d+)s")

#: (pattern in the stored text, what staff read), first match wins: the
#: specific causes before the wrappers that carry them (a ConnectionError
#: wraps a refused connection, a timeout, a DNS failure...).
_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), text)
    for pattern, text in (
        (
            r"^blocked: destination address is not public|InvalidIPAddress",
            "Bloqueado: o endereço de destino não é público",
        ),
        (r"^interrupted: the worker stopped", "Interrompida: o processo parou antes de registrar a resposta"),
        (r"^endpoint deleted", "Não enviada: o endpoint foi excluído"),
        (r"^endpoint disabled", "Não enviada: o endpoint está desativado"),
        (r"ConnectTimeout|connect timeout|timed out while connecting", "Tempo esgotado ao conectar"),
        (r"ReadTimeout|Read timed out", "Tempo esgotado aguardando a resposta"),
        (r"CERTIFICATE_VERIFY_FAILED|certificate|SSLCertVerification", "Certificado TLS inválido"),
        (r"SSLError|SSL:|TLS", "Falha na negociação TLS"),
        (
            r"NameResolutionError|Name or service not known|nodename nor servname|getaddrinfo|"
            r"Temporary failure in name resolution|No address associated",
            "Nome não resolvido (DNS)",
        ),
        (r"Connection refused|ConnectionRefusedError|Errno 111", "Conexão recusada"),
        (r"Network is unreachable|No route to host", "Destino inacessível pela rede"),
        (
            r"Connection reset|RemoteDisconnected|ConnectionResetError|Connection aborted|BrokenPipe",
            "Conexão encerrada pelo destino",
        ),
        (r"ChunkedEncodingError|IncompleteRead|ProtocolError", "Resposta interrompida ou malformada"),
        (r"Timeout", "Tempo esgotado"),
    )
)


def delivery_error(error: str, status_code: int | None = None) -> str:
    """The stored error of an attempt or delivery (and its HTTP status) as
    staff read it: ``"Tempo esgotado ao conectar"``, ``"Resposta HTTP 500"``.
    Texts already in pt-BR (a refused URL) are shown as they are."""
    text = (error or "").strip()
    if not text:
        if status_code is None:
            return ""
        if 200 <= status_code < 300:
            return ""
        if status_code == 410:
            return "Resposta HTTP 410 (o destino removeu o endpoint)"
        if 300 <= status_code < 400:
            return f"Resposta HTTP {status_code} (redirecionamentos não são seguidos)"
        return f"Resposta HTTP {status_code}"
    found = _TIMEOUT.match(text)
    if found:
        return f"Tempo esgotado: sem resposta completa em {found.group(1)} s"
    for pattern, readable in _CAUSES:
        if pattern.search(text):
            return readable
    if text.startswith("A URL") or text.startswith("URL "):
        return text  # webhooks.http's own refusals, already pt-BR
    return "Falha de rede (veja os detalhes técnicos)"


_DISABLED_BY = re.compile(r"^disabled by (.+)$")
_FAILED_FOR = re.compile(r"^every delivery failed for (\d+) days$")


def disabled_reason(reason: str) -> str:
    """Why an endpoint was disabled, as staff read it (the stored reason is
    what the API returns, in its words)."""
    if found := _DISABLED_BY.match(reason):
        return f"Desativado pela equipe ({found.group(1)})"
    if found := _FAILED_FOR.match(reason):
        return f"Todas as entregas falharam por {found.group(1)} dias"
    if reason == "410 Gone":
        return "O destino respondeu 410: o endpoint não existe mais"
    return reason or "-"
