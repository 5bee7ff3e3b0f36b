"""Key-pair authentication: ``X-Public-Key`` + ``X-Secret-Key``."""

from __future__ import annotations

import copy
import hmac
import logging
from datetime import timedelta

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from accounts.exceptions import CredentialsInvalid, CredentialsMissing
from accounts.models import Account, ApiCredential
from accounts.selectors import active_credential
from core import ratelimit
from core.snapshots import Snapshots
from core.tokens import hash_secret

# last_used_at is informative; writing it on every request would add an
# UPDATE to the hot path for nothing.
LAST_USED_RESOLUTION = timedelta(minutes=1)

logger = logging.getLogger(__name__)


#: public key → its active credential and account, as of the last read (core.snapshots:
#: a revocation, rotation or account change is seen by the next request everywhere).
_credentials: Snapshots[str, ApiCredential] = Snapshots(active_credential)


class ApiKeyAuthentication(BaseAuthentication):
    """Authenticates the account behind a credential; ``request.auth`` is the credential.

    Missing headers and bad credentials are 401s with the spec's bodies; the
    secret is compared in constant time against its stored hash.
    """

    def authenticate(self, request: Request) -> tuple[Account, ApiCredential]:
        public_key = request.headers.get("X-Public-Key", "").strip()
        secret_key = request.headers.get("X-Secret-Key", "").strip()
        if not public_key or not secret_key:
            raise CredentialsMissing()

        # Hash even when the key is unknown so both failures take the same time.
        presented = hash_secret(secret_key)
        known = _credentials.remembered(public_key)
        if known is not None and hmac.compare_digest(presented, known.secret_hash):
            # The secret matches a credential this process remembers: count
            # the request for the rate limit in the round trip that reads the
            # snapshot generation (core.ratelimit). A public key alone is never counted.
            ratelimit.count_with_generation(request, public_key)
        snapshot = _credentials.get(public_key)
        expected = snapshot.secret_hash if snapshot is not None else hash_secret("")
        if not hmac.compare_digest(presented, expected) or snapshot is None:
            # A trail for security monitoring: the public key only, never the secret.
            logger.warning("authentication failed for public key %r", public_key[:64])
            raise CredentialsInvalid()

        now = timezone.now()
        if snapshot.last_used_at is None or now - snapshot.last_used_at > LAST_USED_RESOLUTION:
            ApiCredential.objects.filter(pk=snapshot.pk).update_unwatched(last_used_at=now)
            # On the snapshot too, or every request until it is retaken would write again.
            snapshot.last_used_at = now
        # The request's own copies: views may set attributes on them.
        account = copy.copy(snapshot.account)
        credential = copy.copy(snapshot)
        credential.account = account
        return account, credential

    def authenticate_header(self, request: Request) -> str:
        # A value here keeps DRF from turning our 401s into 403s.
        return 'X-Secret-Key realm="api"'


class ApiKeySchema(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "accounts.authentication.ApiKeyAuthentication"
    name = ["PublicKey", "SecretKey"]

    def get_security_definition(self, auto_schema: object) -> list[dict[str, str]]:
        return [
            {"type": "apiKey", "in": "header", "name": "X-Public-Key", "description": "Public key (`pk_…`)."},
            {"type": "apiKey", "in": "header", "name": "X-Secret-Key", "description": "Secret key (`sk_…`)."},
        ]

    def get_security_requirement(self, auto_schema: object) -> dict[str, list[str]]:
        return {"PublicKey": [], "SecretKey": []}
