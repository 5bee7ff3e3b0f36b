"""Per-credential rate limit (decisions §7): a fixed one-minute window
counted in Redis with INCR and EXPIRE in one MULTI, so every process of the
service shares one exact count (DRF's own throttles read, then write)."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from accounts.models import ApiCredential
from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.redis import client as redis_client

logger = logging.getLogger(__name__)
WINDOW_SECONDS = 60


class CredentialRateThrottle(BaseThrottle):
    """``API_RATE_LIMIT_PER_MINUTE`` requests per credential per minute; 429 past it."""

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        credential = request.auth
        limit = settings.API_RATE_LIMIT_PER_MINUTE
        if not isinstance(credential, ApiCredential) or limit <= 0:
            return True
        now = time.time()
        # The public key, not the row id: ids repeat across databases sharing one Redis.
        key = f"pix:ratelimit:{credential.public_key}:{int(now // WINDOW_SECONDS)}"
        try:
            # Short timeout: this sits on every API request, and fails open anyway.
            pipe = redis_client(settings.REDIS_URL, timeout=0.5).pipeline(transaction=True)
            pipe.incr(key)
            pipe.expire(key, 2 * WINDOW_SECONDS)
            count = int(pipe.execute()[0])
        except REDIS_UNAVAILABLE:
            # Fail open: a cache outage must not take the payment API down with it.
            logger.warning("rate limit unavailable; request allowed", exc_info=True)
            return True
        if count <= limit:
            return True
        self._wait = WINDOW_SECONDS - (now % WINDOW_SECONDS)
        return False

    def wait(self) -> float | None:
        return self._wait
