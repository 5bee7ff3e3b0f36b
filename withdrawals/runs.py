"""What a payout run that died with its process leaves for the next one:
its lease and its calls, and, when runs keep dying, a payout held for staff.

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

The calls a dead run left "in progress" (its process killed, or its
database connection lost before it recorded the answer) are unclear, as a
timeout is: the next run records them so before anything else.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from acquirers.calls import Outcome
from core.redis import UNAVAILABLE as REDIS_UNAVAILABLE
from core.redis import client as redis_client
from withdrawals import services
from withdrawals.models import HoldReason, PayoutAttempt, Withdrawal, WithdrawalStatus

logger = logging.getLogger(__name__)

#: The outcome of an attempt row until its call returns.
IN_PROGRESS = "in_progress"
#: ``error_class`` (outcome "timeout") of a call whose run ended before recording its answer.
INTERRUPTED = services.INTERRUPTED
INTERRUPTED_MESSAGE = (
    "execução interrompida antes de registrar a resposta (processo do worker perdido ou conexão com o banco "
    "caída): a adquirente pode ter recebido a chamada"
)

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


# --------------------------------------------------------------------------- the dead run's calls and the hold


def calls_interrupted(attempt_ids: list[int]) -> None:
    """Calls whose run died before recording their answer: unclear, as a
    timeout is. A send among them counts as in flight for the settle window
    after it was made, as one cut at our deadline does
    (``services.payout_sends_in_flight``): the acquirer may have it and
    record it late, so its "failed" or "not found" is not taken as final
    meanwhile, and only it, under the same idempotency id, may settle the payout."""
    if attempt_ids:
        PayoutAttempt.objects.filter(pk__in=attempt_ids, outcome=IN_PROGRESS).update(
            outcome=Outcome.TIMEOUT, error_class=INTERRUPTED, error_message=INTERRUPTED_MESSAGE
        )


def withdrawal_payout_hold_interrupted(
    *, withdrawal_id: uuid.UUID | str, runs_lost: int, take_over: str = ""
) -> WithdrawalStatus | None:
    """The payout's last ``runs_lost`` runs died with their worker process
    (``PAYOUT_MAX_LOST_RUNS`` in a row): it is held for staff
    (``HoldReason.PAYOUT_INTERRUPTED``, the "pagamento parado" filter) rather
    than run again, which would kill one more worker. The money stays
    debited. When a send is on record, the payout is also undetermined (only
    its acquirer's answer, or staff's, settles it). ``take_over``: the dead
    run's lease token, released here. Nothing runs it again until staff
    resume it (:func:`withdrawal_payout_resume`). None when held; the
    withdrawal's status when it is no longer approved."""
    with transaction.atomic():
        locked = Withdrawal.objects.select_for_update().get(pk=withdrawal_id)
        if locked.status != WithdrawalStatus.APPROVED:
            return WithdrawalStatus(locked.status)
        now = timezone.now()
        if locked.hold_reason != HoldReason.PAYOUT_INTERRUPTED:
            locked.hold_reason, locked.held_since = HoldReason.PAYOUT_INTERRUPTED, now
        if locked.payout_owner_id is not None and locked.payout_unclear_since is None:
            locked.payout_unclear_since = now
        if take_over and locked.payout_lease_token == take_over:
            locked.payout_leased_until, locked.payout_lease_token = None, ""
        held = ["hold_reason", "held_since", "payout_unclear_since", "payout_leased_until", "payout_lease_token"]
        locked.save(update_fields=[*held, "updated_at"])
        stale = PayoutAttempt.objects.filter(withdrawal_id=locked.pk, outcome=IN_PROGRESS)
        calls_interrupted(list(stale.values_list("pk", flat=True)))
    logger.error("withdrawal %s: %s payout runs in a row died with their worker; held for staff", locked.pk, runs_lost)
    return None


def withdrawal_payout_resume(*, withdrawal_id: uuid.UUID | str) -> bool:
    """Staff: run again a payout held because its runs kept dying with their
    worker process, e.g. once the cause is fixed. The count of lost runs
    starts over; the run asks the acquirer that may hold the payout first, as
    every run does. False when it is not held so (settled or resumed meanwhile)."""
    with transaction.atomic():
        resumed = Withdrawal.objects.filter(
            pk=withdrawal_id, status=WithdrawalStatus.APPROVED, hold_reason=HoldReason.PAYOUT_INTERRUPTED
        ).update(hold_reason="", held_since=None, updated_at=timezone.now())
        if resumed:
            lost_runs_forget(withdrawal_id)
            # withdrawals' one dispatch point (as webhooks.delivery uses its services').
            transaction.on_commit(functools.partial(services._enqueue_processing, uuid.UUID(str(withdrawal_id))))
    return bool(resumed)
