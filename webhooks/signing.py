"""Standard Webhooks signatures (https://www.standardwebhooks.com/):
``v1,`` + base64(HMAC-SHA256(key, f"{id}.{timestamp}.{body}")), where the
secret is ``whsec_`` + base64(key)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable

SECRET_PREFIX = "whsec_"  # noqa: S105 - a format prefix, not a secret


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    payload = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), payload, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(secrets: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """Space-separated signatures, one per secret (two during a rotation)."""
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets if secret)
