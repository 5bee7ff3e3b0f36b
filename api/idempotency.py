"""``Idempotency-Key`` for the money-moving POSTs (decisions §7).

The first request with a key claims it (a row inserted in its own
transaction, so a concurrent twin sees it at once); its response is stored
and replayed, status and body, with ``Idempotent-Replayed: true`` to any
repeat with the same body within 24 h. A different body is a 422 under
``idempotency_key``; a repeat while the first still runs is a 409. Every
answer is stored, 5xx included (as Stripe does).

A request's effect (the charge, the withdrawal and its debit) and its
answer commit in one transaction (:meth:`Claim.settle`), so a claim still
in flight has no effect. That is what lets a claim expire: a worker killed
mid-request or a connection dropped under it leaves the claim in flight,
and past ``WEB_TIMEOUT`` (gunicorn's timeout, the longest a request is
meant to run) a retry takes it over and runs again. gthread workers are not
killed at that timeout, so a request may outlive its claim: its settle then
finds the claim gone and rolls its effect back, and only the retry's counts.
A failure the handler answered (4xx, 5xx) is stored on a fresh connection
when the failure took this thread's connection down.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.models import IdempotencyRecord
from core.exceptions import ConflictError, ValidationFailed
from core.retention import delete_in_batches

HEADER = "Idempotency-Key"
TTL = dt.timedelta(hours=24)
MAX_KEY_LENGTH = 255

KEY_INVALID = "A chave de idempotência deve ter de 1 a 255 caracteres."
KEY_REUSED = "Esta chave de idempotência já foi usada com outra requisição."
IN_FLIGHT = "Uma requisição com esta chave de idempotência ainda está em processamento."


@dataclasses.dataclass
class Claim:
    """This request's hold on its key; ``record_id`` is None without a key."""

    record_id: int | None = None
    response: Response | None = None
    settled: bool = False

    def settle(self, response: Response) -> None:
        """Store ``response`` as the key's answer. Call it inside the
        transaction that writes the request's effect: both commit or neither.
        Raises :class:`ConflictError` (rolling the effect back) when the claim
        expired and a retry took the key over."""
        self.response = response
        if self.record_id is None:
            return
        if not connection.in_atomic_block:
            raise RuntimeError("Claim.settle must run inside the transaction that writes the effect")
        if not _finalise(self.record_id, response):
            raise ConflictError(IN_FLIGHT)
        # Only a commit settles it: after a rollback the claim is in flight again.
        transaction.on_commit(lambda: setattr(self, "settled", True))


def _finalise(record_id: int, response: Response) -> bool:
    """In flight → done with ``response``; False when the claim is no longer ours."""
    updated = IdempotencyRecord.objects.filter(pk=record_id, state=IdempotencyRecord.State.IN_FLIGHT).update(
        state=IdempotencyRecord.State.DONE, response_status=response.status_code, response_body=response.data
    )
    return updated == 1


def _request_hash(request: Request) -> str:
    try:
        canonical = json.dumps(json.loads(request.body or b"null"), sort_keys=True, separators=(",", ":")).encode()
    except (ValueError, RecursionError):  # a body nested past Python's limit is unreadable too
        canonical = bytes(request.body)
    return hashlib.sha256(canonical).hexdigest()


def idempotent(view: APIView, request: Request, endpoint: str, handler: Callable[[Claim], Response]) -> Response:
    """Run ``handler`` once per key; errors become responses through the view's
    own exception handling so they are stored like successes. ``handler``
    settles the claim it is given in the transaction of its effect."""
    key = request.headers.get(HEADER)
    if key is None:
        return handler(Claim())
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ValidationFailed({"idempotency_key": [KEY_INVALID]})

    account: Any = request.user  # the Account (see ApiKeyAuthentication)
    digest = _request_hash(request)
    claimed = _claim(account, endpoint, key, digest)
    if isinstance(claimed, IdempotencyRecord):
        return _replay(claimed, digest)

    claim = Claim(record_id=claimed)
    try:
        response = handler(claim)
    except Exception as exc:  # noqa: BLE001 - turned into the stored error response below
        response = view.handle_exception(exc)
    if not claim.settled:
        _finalise_on_a_live_connection(claimed, response)
    return response


def _finalise_on_a_live_connection(record_id: int, response: Response) -> None:
    """Store a response the handler did not settle (a refusal, a 5xx). The
    failure that caused it may have killed this thread's connection: finalise
    on a fresh one, or the claim would stay in flight."""
    if connection.errors_occurred and not connection.in_atomic_block and not connection.is_usable():
        connection.close()
    try:
        _finalise(record_id, response)
    except (OperationalError, InterfaceError):
        if connection.in_atomic_block:
            raise
        connection.close()
        _finalise(record_id, response)  # a repeat of the same conditional UPDATE is harmless


def _claim(account: Any, endpoint: str, key: str, digest: str) -> IdempotencyRecord | int:
    """Insert the in-flight row (its id), or return the existing one for this key."""
    for _ in range(3):
        try:
            with transaction.atomic():
                record = IdempotencyRecord.objects.create(
                    account=account, endpoint=endpoint, key=key, request_hash=digest
                )
            return record.pk
        except IntegrityError:
            existing = IdempotencyRecord.objects.filter(account=account, endpoint=endpoint, key=key).first()
            if existing is None:
                continue  # purged meanwhile: claim again
            now = timezone.now()
            if existing.created_at < now - TTL:
                existing.delete()  # expired but not purged yet
                continue
            if existing.state == IdempotencyRecord.State.IN_FLIGHT and existing.created_at < now - claim_timeout():
                # Its request died (or outlived WEB_TIMEOUT and can no longer
                # commit): in flight means it left no effect, so run again.
                # Conditional: a settle that commits first keeps the key.
                IdempotencyRecord.objects.filter(pk=existing.pk, state=IdempotencyRecord.State.IN_FLIGHT).delete()
                continue
            return existing
    raise ConflictError(IN_FLIGHT)


def claim_timeout() -> dt.timedelta:
    """How long a claim stays in flight: the longest a request may run."""
    return dt.timedelta(seconds=settings.WEB_TIMEOUT)


def _replay(record: IdempotencyRecord, digest: str) -> Response:
    if record.request_hash != digest:
        raise ValidationFailed({"idempotency_key": [KEY_REUSED]})
    if record.state != IdempotencyRecord.State.DONE or record.response_status is None:
        raise ConflictError(IN_FLIGHT)
    response = Response(record.response_body, status=record.response_status)
    response["Idempotent-Replayed"] = "true"
    return response


def idempotency_purge(*, now: dt.datetime | None = None) -> int:
    """Delete records older than ``RETENTION_DAYS_IDEMPOTENCY_KEYS`` days
    (beat, hourly); never one within its 24 h replay window."""
    keep = max(TTL, dt.timedelta(days=settings.RETENTION_DAYS_IDEMPOTENCY_KEYS))
    return delete_in_batches(IdempotencyRecord.objects.filter(created_at__lt=(now or timezone.now()) - keep))
