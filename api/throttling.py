"""Per-credential rate limit (decisions §7): ``API_RATE_LIMIT_PER_MINUTE``
requests per credential per fixed minute, counted in Redis by
:mod:`core.ratelimit` (every process shares one exact count; DRF's own
throttles read, then write), mostly during authentication, in the round
trip it makes anyway."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from accounts.models import ApiCredential
from core import ratelimit


class CredentialRateThrottle(BaseThrottle):
    """``API_RATE_LIMIT_PER_MINUTE`` requests per credential per minute; 429 past it."""

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        credential = request.auth
        limit = settings.API_RATE_LIMIT_PER_MINUTE
        if not isinstance(credential, ApiCredential) or limit <= 0:
            return True
        count = ratelimit.counted(request, credential.public_key)
        # None: Redis could not count. Fail open: a cache outage must not take
        # the payment API down with it.
        if count.value is None or count.value <= limit:
            return True
        self._wait = count.remaining
        return False

    def wait(self) -> float | None:
        return self._wait
