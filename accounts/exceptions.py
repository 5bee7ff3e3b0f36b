"""Errors of accounts, credentials and authentication, with the spec's texts."""

from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated

from core.exceptions import AccessDenied, BusinessRuleError, PixServiceError

MISSING_CREDENTIALS = "Chave pública e chave privada são obrigatórias"
INVALID_CREDENTIALS = "Chave não encontrada ou inativa"
NO_PERMISSION = "Esta credencial não tem permissão para realizar esta operação."
NOT_APPROVED = "Sua conta precisa estar aprovada para usar esta funcionalidade."
BLOCKED = "Sua conta está bloqueada. Não é permitido realizar esta ação."
ACQUIRER_SELECTION_DISABLED = "Seleção de adquirente PIX cash-in não está habilitada para esta conta."


class CredentialsMissing(NotAuthenticated):
    """One or both key headers are absent or empty (401)."""

    default_detail = MISSING_CREDENTIALS


class CredentialsInvalid(AuthenticationFailed):
    """Unknown public key, wrong secret, or revoked credential (401)."""

    default_detail = INVALID_CREDENTIALS


class InvalidTransition(BusinessRuleError):
    """A status change that the account's state does not allow."""

    default_code = "invalid_transition"


class ApprovalRefused(BusinessRuleError):
    """A maker-checker step the rules refuse: approving one's own request,
    without the action's permission, a request already decided, or a second
    open request for the same record."""

    default_code = "approval_refused"


class ActionNotExecutable(BusinessRuleError):
    """The record a requested action targets no longer allows it (it moved on)."""

    default_code = "action_not_executable"


class CredentialLinkRefused(BusinessRuleError):
    """A credential cannot be delivered by link: its account has no contact
    e-mail, or it is no longer waiting for its claim (claimed, revoked)."""

    default_code = "credential_link_refused"


class CredentialLinkNotSent(PixServiceError):
    """The link was made but its e-mail did not leave (SMTP refused or did not
    answer in time, or too many e-mails in flight): nothing was delivered,
    and sending it again makes a new link."""

    default_code = "credential_link_not_sent"


class ClaimRefused(PixServiceError):
    """A claim link that delivers nothing: unknown, used, expired, replaced
    by a newer one, or its credential revoked. ``code`` says which."""

    status_code = 410
    default_code = "claim_refused"


class SegregationOfDuties(BusinessRuleError):
    """A staff member may not approve this account's withdrawals now: they
    recently issued a credential that can cash out, or asked for or approved
    a change of the contact e-mail, of that account."""

    default_code = "segregation_of_duties"


__all__ = [
    "ACQUIRER_SELECTION_DISABLED",
    "BLOCKED",
    "NOT_APPROVED",
    "NO_PERMISSION",
    "AccessDenied",
    "ActionNotExecutable",
    "ApprovalRefused",
    "ClaimRefused",
    "CredentialLinkNotSent",
    "CredentialLinkRefused",
    "CredentialsInvalid",
    "CredentialsMissing",
    "InvalidTransition",
    "SegregationOfDuties",
]
