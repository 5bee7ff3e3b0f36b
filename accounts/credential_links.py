"""Credentials issued or rotated by staff reach the merchant, never staff.

A credential made in the back office is created waiting for its claim: no
secret exists yet and it authenticates nothing. A one-time link goes by
e-mail to the account's contact address (the one a change request approved
by a second staff member decides: ``accounts.account_changes``); only the
SHA-256 of its token is stored. Opening the link shows a button; pressing it
(a POST, so a mail scanner that fetches the link consumes nothing) makes the
secret, activates the credential and shows the secret once, in that answer
only. A link works once, for ``CREDENTIAL_LINK_HOURS``, and only while it is
the credential's latest: sending another, revoking the credential, or an
approved change of the account's contact e-mail replaces it; so does an
e-mail that did not leave.

The secret therefore exists in the merchant's browser and nowhere else: not
in a page, message, log or e-mail staff can read, not in the database.
``manage.py pix_bootstrap`` (operators with shell access) still prints the
secrets it makes: shell and database access are outside the back office's
guarantees (README, "Money safety").
"""

from __future__ import annotations

import datetime as dt
import logging
import smtplib
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from accounts.exceptions import ClaimRefused, CredentialLinkNotSent, CredentialLinkRefused
from accounts.models import Account, ApiCredential, CredentialLink
from accounts.services import rotated_label
from core.bulkhead import Bulkhead
from core.connections import release_connections
from core.text import single_line
from core.tokens import hash_secret, new_claim_token, new_public_key, new_secret_key

logger = logging.getLogger(__name__)

#: E-mails in flight at once in this process: an SMTP server that hangs holds
#: at most these staff requests, each for at most EMAIL_TIMEOUT.
EMAIL_BULKHEAD = Bulkhead("email", lambda: settings.EMAIL_MAX_IN_FLIGHT)

NO_CONTACT = (
    "A conta não tem e-mail de contato: a credencial só é entregue por um link enviado a ele. "
    "Peça a alteração do e-mail de contato (outra pessoa da equipe aprova) e emita de novo."
)
NO_BASE_URL = (
    "O endereço público do serviço (PUBLIC_BASE_URL) não está configurado: nenhum link foi enviado. "
    "Fale com quem opera a plataforma."
)
NOT_WAITING = "A credencial {key} não aguarda resgate (já foi resgatada ou revogada): nada foi enviado."

#: What the claim page says for each refusal (``ClaimRefused.code``).
CLAIM_UNKNOWN = "unknown"
CLAIM_USED = "used"
CLAIM_EXPIRED = "expired"
CLAIM_REPLACED = "replaced"
CLAIM_MESSAGES = {
    CLAIM_UNKNOWN: "Este link de resgate não existe. Confira se o endereço foi copiado inteiro.",
    CLAIM_USED: "Este link já foi usado: a chave secreta foi exibida uma única vez e não é mostrada de novo.",
    CLAIM_EXPIRED: "Este link expirou.",
    CLAIM_REPLACED: (
        "Este link foi substituído por um mais novo, o e-mail de contato da conta mudou ou a credencial foi revogada."
    ),
}


def credential_issue_for_claim(*, account: Account, permission: str, label: str = "") -> ApiCredential:
    """A credential for ``account`` waiting for its claim: no secret, inactive.
    Refused (:class:`CredentialLinkRefused`) when the account has no contact
    e-mail to send its link to. Send the link with :func:`credential_link_send`
    once this is committed."""
    if not Account.objects.filter(pk=account.pk).exclude(email="").exists():
        raise CredentialLinkRefused(NO_CONTACT)
    return ApiCredential.objects.create(
        account=account,
        permission=permission,
        label=label,
        public_key=new_public_key(),
        secret_hash="",
        secret_hint="",
        is_active=False,
    )


def credential_rotate_for_claim(*, credential: ApiCredential) -> ApiCredential:
    """The new credential of a rotation, with the same permission, waiting for
    its claim. The old one stays active until it is revoked, as for any
    rotation, so the merchant switches without downtime."""
    return credential_issue_for_claim(
        account=credential.account, permission=credential.permission, label=rotated_label(credential)
    )


def claim_url(token: str) -> str:
    """Where the merchant opens a link: always ``PUBLIC_BASE_URL``, never the
    address of the request that sent it (its Host header is the client's to
    forge: a link built from it would carry the token to the forger's server)."""
    return str(settings.PUBLIC_BASE_URL).rstrip("/") + reverse("credential_claim", args=[token])


def credential_link_send(*, credential_id: Any, sent_by: User) -> CredentialLink:
    """Make a new claim link for a credential waiting for its claim (the one
    in force before, if any, stops working) and e-mail it to the account's
    contact address as it is now, at ``PUBLIC_BASE_URL``. Call it holding no
    transaction: the link is committed first, then the e-mail is sent with no
    connection held, within ``EMAIL_TIMEOUT``.

    Raises :class:`CredentialLinkRefused` (nothing changed) when the
    credential no longer waits, the account has no contact e-mail or
    ``PUBLIC_BASE_URL`` is unset, and :class:`CredentialLinkNotSent` when the
    e-mail did not leave: the link is then useless (its token existed only in
    this call) and sending again makes another."""
    if not settings.PUBLIC_BASE_URL:
        # Production refuses to start without it; anywhere else, refuse to send rather than guess.
        raise CredentialLinkRefused(NO_BASE_URL)
    with EMAIL_BULKHEAD.slot() as taken:
        if not taken:
            raise CredentialLinkNotSent(
                "Muitos e-mails sendo enviados agora: nada foi enviado. Use «Reenviar link de resgate» em instantes."
            )
        token = new_claim_token()
        with transaction.atomic():
            credential = ApiCredential.objects.select_for_update().get(pk=credential_id)
            if not credential.awaiting_claim:
                raise CredentialLinkRefused(NOT_WAITING.format(key=credential.public_key))
            account = Account.objects.only("name", "email").get(pk=credential.account_id)
            if not account.email:
                raise CredentialLinkRefused(NO_CONTACT)
            now = timezone.now()
            CredentialLink.objects.filter(credential=credential, used_at=None, replaced_at=None).update(replaced_at=now)
            link = CredentialLink.objects.create(
                credential=credential,
                token_hash=hash_secret(token),
                sent_to=account.email,
                sent_by=sent_by,
                expires_at=now + dt.timedelta(hours=settings.CREDENTIAL_LINK_HOURS),
            )
        subject, body = _claim_email(account, credential, link, claim_url(token))
        release_connections(before="e-mail of a claim link")
        try:
            send_mail(subject, body, None, [account.email], fail_silently=False)
        except (OSError, smtplib.SMTPException) as exc:
            # The reason, never the message (it carries the link).
            logger.warning("claim link %s of credential %s not sent: %s", link.pk, credential.public_key, type(exc))
            # Never left as a link sent and valid: staff would wait for a claim
            # that cannot come. Should the server have delivered it after all
            # (an error after DATA), the merchant finds it replaced and asks
            # for another: the safe side.
            now = timezone.now()
            CredentialLink.objects.filter(pk=link.pk, used_at=None, replaced_at=None).update(
                send_failed_at=now, replaced_at=now
            )
            raise CredentialLinkNotSent(
                f"O e-mail para {account.email} não pôde ser enviado agora ({type(exc).__name__}): nada foi "
                "entregue. Use «Reenviar link de resgate» na credencial."
            ) from exc
    return link


def _claim_email(account: Account, credential: ApiCredential, link: CredentialLink, url: str) -> tuple[str, str]:
    expires = timezone.localtime(link.expires_at)
    subject = f"{settings.PLATFORM_NAME}: resgate a chave secreta da sua nova credencial de API"
    body = (
        # Refused on input (core.text); a name stored before that stays on its line.
        f"Olá, {single_line(account.name)}.\n\n"
        f"Uma credencial de API foi emitida para a sua conta no {settings.PLATFORM_NAME}:\n"
        f"  Permissão: {credential.get_permission_display()}\n"
        f"  Chave pública: {credential.public_key}\n\n"
        "A chave secreta não é enviada por e-mail nem vista pela nossa equipe. Para vê-la, abra o link abaixo "
        f"até {expires:%d/%m/%Y %H:%M} (horário de Brasília) e clique em «Revelar a chave secreta»:\n\n"
        f"{url}\n\n"
        "O link funciona uma única vez: copie a chave secreta quando ela aparecer e guarde-a com segurança.\n\n"
        "Se você não pediu esta credencial, não abra o link e fale com o nosso suporte.\n"
    )
    return subject, body


# --------------------------------------------------------------------------- the merchant's side


@dataclass(frozen=True)
class ClaimedCredential:
    credential: ApiCredential
    secret_key: str  # shown once, in the claim's answer; never stored


def _usable_link(token: str, *, lock: bool) -> CredentialLink:
    links = CredentialLink.objects.select_related("credential__account")
    if lock:
        links = links.select_for_update(of=("self", "credential"))
    link = links.filter(token_hash=hash_secret(token)).first()
    if link is None:
        raise ClaimRefused(CLAIM_MESSAGES[CLAIM_UNKNOWN], code=CLAIM_UNKNOWN)
    if link.used_at is not None:
        raise ClaimRefused(CLAIM_MESSAGES[CLAIM_USED], code=CLAIM_USED)
    if link.replaced_at is not None or not link.credential.awaiting_claim:
        raise ClaimRefused(CLAIM_MESSAGES[CLAIM_REPLACED], code=CLAIM_REPLACED)
    if link.expires_at <= timezone.now():
        raise ClaimRefused(CLAIM_MESSAGES[CLAIM_EXPIRED], code=CLAIM_EXPIRED)
    return link


def credential_link_check(*, token: str) -> CredentialLink:
    """The link of ``token`` if it can still be claimed (the claim page's
    first look: changes nothing); else :class:`ClaimRefused`."""
    return _usable_link(token, lock=False)


def credential_claim(*, token: str) -> ClaimedCredential:
    """Claim a credential with its link: the secret is made now, the
    credential activated and the link used, in one transaction under the
    link's and the credential's row locks, so of two claims at once exactly
    one gets the secret. :class:`ClaimRefused` (nothing changed) for an
    unknown, used, expired or replaced link."""
    secret = new_secret_key()
    with transaction.atomic():
        link = _usable_link(token, lock=True)
        now = timezone.now()
        CredentialLink.objects.filter(pk=link.pk).update(used_at=now)
        credential = link.credential
        credential.secret_hash = hash_secret(secret)
        credential.secret_hint = secret[-4:]
        credential.is_active = True
        # A save, not an update: post_save drops the credential snapshots (core.snapshots).
        credential.save(update_fields=["secret_hash", "secret_hint", "is_active"])
    logger.info("credential %s claimed with link %s", credential.public_key, link.pk)
    return ClaimedCredential(credential=credential, secret_key=secret)
