"""What a payout run that died with its process leaves for the next one.

A payout run holds its withdrawal's lease (``withdrawals.services.LEASE``, 5
minutes, longer than a run may last) and only its holder's token releases
it. When a prefork pool child is SIGKILLed mid-run (the OOM killer, an
operator), the worker's main process sees the child die (``WorkerLostError``)
and hands the message back to the queue at once (``reject_on_worker_lost``).
Just before, it writes here, per withdrawal, the lease token the dead run
held and how many runs of the withdrawal in a row were lost so:

- the redelivered run takes that lease back at once (one conditional UPDATE
  on that exact token) instead of waiting out the 5 minutes. Only the process
  that saw the child die vouches for the token, so a run that is still alive
  (a second delivery of a message, after a broker connection was lost) is
  never taken over: its token is not here;
- after ``PAYOUT_MAX_LOST_RUNS`` the payout is held for staff instead of run
  again: a payout that kills its worker every time stops there.

A run's token is derived from what the main process also knows of it: the
worker's node name, the pool child's pid, the task id and its retry count.
At any moment one process runs one task, and node names are unique among
live workers, so two runs alive at once never share a token; a retry (same
task id) has its own.

The note lives in the service's Redis (``REDIS_URL``) for a day; a run that
ends without dying clears it (losses count in a row), and so does staff's
"resume". Redis unavailable: no note, and the lease is waited out, as before.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass

from django.conf import settings

from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.redis import client as redis_client

logger = logging.getLogger(__name__)

KEY = "pix:payout-lost:{}"
#: Long past any redelivery; only a note nobody read again outlives a run.
NOTE_TTL_SECONDS = 24 * 3600


def run_token(*, node: str, pid: int, task_id: str, retries: int) -> str:
    """The lease token of the payout run of task ``task_id`` (retry number
    ``retries``) in process ``pid`` of worker ``node``: 32 hex characters."""
    material = f"{node}\0{pid}\0{task_id}\0{retries}".encode()
    return hashlib.blake2b(material, digest_size=16).hexdigest()


@dataclass(frozen=True)
class LostRuns:
    """Runs of one withdrawal lost with their process, in a row, and the
    lease token the last one held ("" when its process was not known)."""

    count: int
    token: str


def _key(withdrawal_id: uuid.UUID | str) -> str:
    return KEY.format(withdrawal_id)


def lost_run_note(*, withdrawal_id: uuid.UUID | str, token: str) -> int:
    """The worker's main process: a run of this withdrawal died with its
    process, holding ``token``. How many in a row now (0: not recorded).
    Quick (a 2 s timeout): it runs between the child's death and the requeue."""
    client = redis_client(settings.REDIS_URL, timeout=2)
    key = _key(withdrawal_id)
    try:
        pipe = client.pipeline(transaction=True)
        pipe.hincrby(key, "count", 1)
        pipe.hset(key, "token", token)
        pipe.expire(key, NOTE_TTL_SECONDS)
        count, _, _ = pipe.execute()
    except REDIS_UNAVAILABLE:
        logger.warning("withdrawal %s: lost payout run not recorded (Redis unavailable)", withdrawal_id, exc_info=True)
        return 0
    return int(count)


def lost_runs(withdrawal_id: uuid.UUID | str) -> LostRuns | None:
    """What the runs of this withdrawal lost with their process left (None: nothing)."""
    client = redis_client(settings.REDIS_URL, timeout=2, decode_responses=True)
    try:
        note = client.hgetall(_key(withdrawal_id))
    except REDIS_UNAVAILABLE:
        logger.warning("withdrawal %s: lost payout runs unknown (Redis unavailable)", withdrawal_id, exc_info=True)
        return None
    if not note:
        return None
    return LostRuns(count=int(note.get("count") or 0), token=str(note.get("token") or ""))


def lost_runs_forget(withdrawal_id: uuid.UUID | str) -> None:
    """A run ended without dying, or staff resumed the payout: the count starts over."""
    client = redis_client(settings.REDIS_URL, timeout=2)
    try:
        client.delete(_key(withdrawal_id))
    except REDIS_UNAVAILABLE:
        logger.warning("withdrawal %s: lost payout runs not cleared (Redis unavailable)", withdrawal_id, exc_info=True)
