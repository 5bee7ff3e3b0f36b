"""``Idempotency-Key`` for the money-moving POSTs (decisions §7).

The first request with a key claims it (a row inserted in its own
transaction, so a concurrent twin sees it at once); its response is stored
and replayed, status and body, with ``Idempotent-Replayed: true`` to any
repeat with the same body within 24 h. A different body is a 422 under
``idempotency_key``; a repeat while the first still runs is a 409. Every
answer is stored, 5xx included (as Stripe does): a failure after the debit
committed must not let a retry with the same key debit again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pix_service.exceptions import ConflictError, ValidationFailed
from pix_service.models import IdempotencyRecord

HEADER = "Idempotency-Key"
TTL = dt.timedelta(hours=24)
MAX_KEY_LENGTH = 255

KEY_INVALID = "A chave de idempotência deve ter de 1 a 255 caracteres."
KEY_REUSED = "Esta chave de idempotência já foi usada com outra requisição."
IN_FLIGHT = "Uma requisição com esta chave de idempotência ainda está em processamento."


def _request_hash(request: Request) -> str:
    try:
        canonical = json.dumps(json.loads(request.body or b"null"), sort_keys=True, separators=(",", ":")).encode()
    except (ValueError, RecursionError):  # a body nested past Python's limit is unreadable too
        canonical = bytes(request.body)
    return hashlib.sha256(canonical).hexdigest()


def idempotent(view: APIView, request: Request, endpoint: str, handler: Callable[[], Response]) -> Response:
    """Run ``handler`` once per key; errors become responses through the view's
    own exception handling so they are stored like successes."""
    key = request.headers.get(HEADER)
    if key is None:
        return handler()
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ValidationFailed({"idempotency_key": [KEY_INVALID]})

    account: Any = request.user  # the Account (see ApiKeyAuthentication)
    digest = _request_hash(request)
    record = _claim(account, endpoint, key, digest)
    if record is not None:
        return _replay(record, digest)

    try:
        response = handler()
    except Exception as exc:  # noqa: BLE001 - turned into the stored error response below
        response = view.handle_exception(exc)

    IdempotencyRecord.objects.filter(account=account, endpoint=endpoint, key=key, request_hash=digest).update(
        state=IdempotencyRecord.State.DONE, response_status=response.status_code, response_body=response.data
    )
    return response


def _claim(account: Any, endpoint: str, key: str, digest: str) -> IdempotencyRecord | None:
    """Insert the in-flight row, or return the existing one for this key."""
    for _ in range(2):
        try:
            with transaction.atomic():
                IdempotencyRecord.objects.create(account=account, endpoint=endpoint, key=key, request_hash=digest)
            return None
        except IntegrityError:
            existing = IdempotencyRecord.objects.filter(account=account, endpoint=endpoint, key=key).first()
            if existing is None:
                continue  # purged meanwhile: claim again
            if existing.created_at < timezone.now() - TTL:
                existing.delete()  # expired but not purged yet
                continue
            return existing
    raise ConflictError(IN_FLIGHT)


def _replay(record: IdempotencyRecord, digest: str) -> Response:
    if record.request_hash != digest:
        raise ValidationFailed({"idempotency_key": [KEY_REUSED]})
    if record.state != IdempotencyRecord.State.DONE or record.response_status is None:
        raise ConflictError(IN_FLIGHT)
    response = Response(record.response_body, status=record.response_status)
    response["Idempotent-Replayed"] = "true"
    return response


def idempotency_purge(*, now: dt.datetime | None = None) -> int:
    """Delete records older than 24 h (beat, hourly)."""
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=(now or timezone.now()) - TTL).delete()
    return deleted
