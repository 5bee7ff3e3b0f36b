"""OAuth2 client credentials (RFC 6749 §4.4) for API Pix acquirers, and the
cache that shares the token.

The token is cached in Django's cache (Redis), shared by every web and worker
process, until shortly before it expires; one process fetches it while the
others wait briefly (a ``cache.add`` lock), so a cold start does not stampede
the PSP. The client (:mod:`acquirers.adapters.apipix.client`) sends the
request built here over the call's own mTLS session, and drops a token the PSP
answers 401 to.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from urllib.parse import quote, urlencode

from django.core.cache import cache

from acquirers.adapters.apipix.credentials import ApiSettings
from acquirers.adapters.apipix.problems import HttpUnavailable, json_dict, json_object
from acquirers.adapters.base import InvalidResponse

logger = logging.getLogger(__name__)

#: A token is dropped this long before the PSP says it expires (at most 10 % of its life).
TOKEN_EXPIRY_MARGIN = 60.0
#: Longest a process waits for another one that is fetching the token.
TOKEN_LOCK_WAIT = 2.0


def token_key(api: ApiSettings) -> str:
    """The cache key of the token of one client at one token URL, for these scopes."""
    identity = "|".join((api.token_url, api.client_id, " ".join(api.scopes)))
    return f"acquirer-token:{api.acquirer_key}:{hashlib.sha256(identity.encode()).hexdigest()[:32]}"


def token_request(api: ApiSettings) -> tuple[dict[str, str], bytes]:
    """Headers and body of the token POST, in the PSP's dialect (client in
    HTTP Basic or in the body; the body as a form or JSON)."""
    fields = {"grant_type": "client_credentials"}
    if api.scopes:
        fields["scope"] = " ".join(api.scopes)
    headers = {"Accept": "application/json"}
    if api.token_auth == "basic":  # noqa: S105 - a mode's name, not a password
        # RFC 6749 §2.3.1: each part form-encoded before the Basic encoding.
        pair = f"{quote(api.client_id, safe='')}:{quote(api.client_secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    else:
        fields |= {"client_id": api.client_id, "client_secret": api.client_secret}
    if api.token_body == "json":  # noqa: S105 - a format's name, not a password
        body = json.dumps(fields).encode()
        headers["Content-Type"] = "application/json"
    else:
        body = urlencode(fields).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    return headers, body


def token_from_answer(status: int, body: bytes) -> tuple[str, float]:
    """The access token of the PSP's answer and how many seconds to keep it.
    A refusal is an outage of this acquirer (credentials), not a decline."""
    if status != 200:
        reason = _oauth_error(body)
        raise HttpUnavailable(f"token request refused: HTTP {status} {reason}".strip(), status=status)
    data = json_object(body, "token answer")
    token = data.get("access_token")
    if not isinstance(token, str) or not token:
        raise InvalidResponse("token answer without access_token")
    token_type = str(data.get("token_type", "Bearer"))
    if token_type.lower() != "bearer":
        raise InvalidResponse(f"token answer: unsupported token_type {token_type!r}")
    expires_in = data.get("expires_in")
    lifetime = float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else 60.0
    return token, lifetime - min(TOKEN_EXPIRY_MARGIN, lifetime * 0.1)


def _oauth_error(body: bytes) -> str:
    data = json_dict(body)
    if data is None:
        return ""
    return " ".join(str(data[k])[:200] for k in ("error", "error_description") if data.get(k))


# --------------------------------------------------------------------------- cache
# The token cache is an optimisation: with Redis down, every call fetches its
# own token rather than failing the charge.


def cache_get(key: str) -> str | None:
    try:
        value = cache.get(key)
    except Exception:
        logger.warning("token cache unavailable (get)", exc_info=True)
        return None
    return value if isinstance(value, str) else None


def cache_set(key: str, value: str, ttl: float) -> None:
    try:
        cache.set(key, value, int(ttl))
    except Exception:
        logger.warning("token cache unavailable (set)", exc_info=True)


def cache_add(key: str, *, timeout: int) -> bool:
    try:
        return bool(cache.add(key, "1", timeout))
    except Exception:
        logger.warning("token cache unavailable (add)", exc_info=True)
        return True  # fetch ourselves


def cache_delete(key: str) -> None:
    try:
        cache.delete(key)
    except Exception:
        logger.warning("token cache unavailable (delete)", exc_info=True)
