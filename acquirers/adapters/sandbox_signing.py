"""How the ``sandbox`` acquirer signs its notifications, and how they are
verified: hex(HMAC-SHA256(notification_secret, ``"<timestamp>." + body``))
in ``X-Sandbox-Signature``, the unix time in ``X-Sandbox-Timestamp``."""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping

from acquirers.adapters.base import InvalidNotification

SIGNATURE_HEADER = "X-Sandbox-Signature"
TIMESTAMP_HEADER = "X-Sandbox-Timestamp"
#: Seconds a signed notification stays acceptable, either way of our clock:
#: a captured request cannot be replayed later.
SIGNATURE_TOLERANCE = 300
_UNIX_SECONDS = re.compile(r"[0-9]{1,12}")


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """hex(HMAC-SHA256(secret, ``"<timestamp>." + body``)): the time is signed with the body."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def signed_headers(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The two headers a sandbox notification carries (now, unless told)."""
    at = int(time.time()) if timestamp is None else timestamp
    return {TIMESTAMP_HEADER: str(at), SIGNATURE_HEADER: sign(secret, body, at)}


def verify(headers: Mapping[str, str], body: bytes, secret: str) -> None:
    """Raises :class:`InvalidNotification` unless ``body`` was signed with
    ``secret`` within :data:`SIGNATURE_TOLERANCE` seconds of now (no replay)."""
    presented = _header(headers, SIGNATURE_HEADER)
    stamp = _header(headers, TIMESTAMP_HEADER)
    if not _UNIX_SECONDS.fullmatch(stamp):
        raise InvalidNotification("missing or malformed timestamp")
    # Bytes: compare_digest refuses str with non-ASCII characters.
    if not hmac.compare_digest(presented.encode(), sign(secret, body, int(stamp)).encode()):
        raise InvalidNotification("bad signature")
    if abs(time.time() - int(stamp)) > SIGNATURE_TOLERANCE:
        raise InvalidNotification("timestamp too old or too far ahead")


def _header(headers: Mapping[str, str], name: str) -> str:
    return next((v for k, v in headers.items() if k.lower() == name.lower()), "")
