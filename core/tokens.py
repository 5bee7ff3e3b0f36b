"""Random identifiers and secrets handed to clients."""

from __future__ import annotations

import base64
import hashlib
import secrets


def new_public_key() -> str:
    return "pk_" + secrets.token_urlsafe(24)


def new_secret_key() -> str:
    return "sk_" + secrets.token_urlsafe(32)


def new_webhook_secret() -> str:
    # Standard Webhooks secrets are "whsec_" + base64 of the key bytes.
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def new_claim_token() -> str:
    """The token of a one-time link (a credential's claim): URL-safe, 256 random bits."""
    return secrets.token_urlsafe(32)


def new_webhook_code() -> str:
    return secrets.token_hex(16)


def hash_secret(secret: str) -> str:
    """SHA-256 of a high-entropy secret.

    The secrets are 256 random bits, so a slow password hash adds nothing but
    latency on every request; a fast hash is the standard for API tokens.
    """
    return hashlib.sha256(secret.encode()).hexdigest()
