"""What an ask for a devolução came to: the rule a charge's refund
(:mod:`payments.refunds`) and a late payment's return
(:mod:`payments.late_payments`) share, each applying the verdict to its own
record.

Only an explicit "not made" (``NAO_REALIZADO``) is final at once. A refusal
of the ask (a 4xx after the adapter found no devolução of that id), or "no
such devolução", is final only while no earlier ask went unanswered: after a
timeout or a 5xx the PSP may be processing that first ask without showing it
yet, and it refuses the next one because the queued devolução already takes
the Pix's value. Reading that as "not made" gives the money back to the
merchant (a refund's reservation released) or lets staff decide again (a
late payment credited or returned again) while the first devolução lands:
the money goes out twice. Such a refusal is asked again (the caller's task
backoff and beat's sweep) until :data:`DEVOLUCAO_GRACE` after the last
unanswered ask, and is then final only when the acquirer's read
(``refund_status``: a GET, never a PUT) finds no such devolução. "Not found"
in answer to the ask is never read as done. Asks that never left (circuit
open, no capacity) start nothing.

The record keeps when its last unanswered ask was (``unclear_at``), updated
with :func:`unclear_at_after`. Holds no transaction: the caller holds none
either while the acquirer is asked.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass
from typing import Literal

from django.db.models import F, Value
from django.db.models.expressions import Combinable
from django.db.models.functions import Coalesce
from django.utils import timezone

from acquirers import calls
from acquirers.adapters.base import RefundRequest, RefundResult, RefundStatus
from acquirers.calls import Outcome
from acquirers.models import Acquirer

#: After an ask left unanswered (a timeout, a 5xx), how long a refusal or a
#: "no such devolução" is taken as "not visible yet" rather than "not made":
#: a PSP settles a devolução in seconds, but may queue it for hours when its
#: side of the SPI is down. One concluded too early pays the payer twice; one
#: concluded late only waits (a refund's amount stays reserved meanwhile).
DEVOLUCAO_GRACE = dt.timedelta(hours=24)

#: What an answer without a definitive outcome says of the ask
#: (:func:`unclear_at_after`).
Seen = Literal["asked", "not_answered", "not_asked"]


class Verdict(enum.StrEnum):
    DONE = "done"  # the money went back to the payer
    NOT_MADE = "not_made"  # final: the acquirer did not make it
    PROCESSING = "processing"  # the acquirer has it in processing: ask again later
    UNCLEAR = "unclear"  # no definitive answer: ask again later


@dataclass(frozen=True)
class DevolucaoAnswer:
    """A verdict, what the acquirer said (a failure's reason, or the last
    error of one asked again), and for one asked again what it says of the
    ask (``seen``, for :func:`unclear_at_after`)."""

    verdict: Verdict
    detail: str = ""
    seen: Seen = "not_asked"


def devolucao_judge(
    *, acquirer: Acquirer, request: RefundRequest, call: calls.Call[RefundResult], unclear_at: dt.datetime | None
) -> DevolucaoAnswer:
    """Read the answer to an ask for a devolução (``call``: the guarded
    ``refund_charge``), given when the record's last unanswered ask was
    (``unclear_at``): see the module's rule. May read the devolução's state
    from the acquirer (``refund_status``) once the grace has passed."""
    result = call.result
    if result is None:
        if call.outcome is Outcome.DECLINED:
            # The acquirer refused the request (the API Pix adapter read our id's state first: none).
            return _refused(acquirer, request, call.error_message or "recusada", unclear_at)
        # A timeout, a 5xx, an unreadable answer: the ask may have made it.
        # Not asked at all (circuit open, no capacity): nothing learned.
        asked = call.outcome not in (Outcome.CIRCUIT_OPEN, Outcome.BUSY)
        return DevolucaoAnswer(Verdict.UNCLEAR, call.error_message or call.outcome, "asked" if asked else "not_asked")
    if result.status is RefundStatus.FAILED:
        return DevolucaoAnswer(Verdict.NOT_MADE, result.reason or "sem motivo")
    if result.status is RefundStatus.PROCESSING:
        return DevolucaoAnswer(Verdict.PROCESSING, "em processamento na adquirente", "asked")
    if result.status is RefundStatus.NOT_FOUND:
        # No answer to a request to make it (never "done"): judged like a refusal.
        detail = "devolução não encontrada na adquirente"
        return _refused(acquirer, request, detail, unclear_at, first_unclear=True)
    return DevolucaoAnswer(Verdict.DONE)


def _refused(
    acquirer: Acquirer,
    request: RefundRequest,
    detail: str,
    since: dt.datetime | None,
    *,
    first_unclear: bool = False,
) -> DevolucaoAnswer:
    """The ask was refused, or the acquirer knows no such devolução. Not made
    when no earlier ask went unanswered (and ``first_unclear`` is off); else
    asked again until :data:`DEVOLUCAO_GRACE` after the last unanswered ask,
    then not made only if ``refund_status`` finds none. ``first_unclear``:
    this answer itself is no answer to the ask (a "not found"), so the grace
    starts now if it has not."""
    if since is None and not first_unclear:
        return DevolucaoAnswer(Verdict.NOT_MADE, detail)
    if since is None or timezone.now() < since + DEVOLUCAO_GRACE:
        why = "não é resposta ao pedido" if since is None else "um pedido anterior ficou sem resposta"
        note = f"{detail}; {why} e a devolução pode estar em processamento: pedido de novo"
        return DevolucaoAnswer(Verdict.UNCLEAR, note, "not_answered")
    look = calls.call(acquirer, "refund_status", lambda adapter: adapter.refund_status(request))
    if look.result is None:
        return DevolucaoAnswer(Verdict.UNCLEAR, f"{detail}; consulta falhou: {look.error_message or look.outcome}")
    status = look.result.status
    if status is RefundStatus.NOT_FOUND:
        hours = int(DEVOLUCAO_GRACE.total_seconds() // 3600)
        return DevolucaoAnswer(Verdict.NOT_MADE, f"{detail}; sem devolução na adquirente {hours} h depois")
    if status is RefundStatus.FAILED:
        return DevolucaoAnswer(Verdict.NOT_MADE, look.result.reason or detail)
    if status is RefundStatus.PROCESSING:
        return DevolucaoAnswer(Verdict.PROCESSING, "em processamento na adquirente", "asked")
    return DevolucaoAnswer(Verdict.DONE)


def unclear_at_after(seen: Seen) -> Combinable:
    """The record's new ``unclear_at``, for an ``update()``: ``asked``, the
    ask reached the acquirer and may have made the devolução (the grace
    starts again); ``not_answered``, an answer that does not answer the ask
    (a refusal or "not found" within the grace: it starts if it had not,
    never extends); ``not_asked``, nothing reached it (circuit open, a read
    that failed)."""
    now = timezone.now()
    if seen == "asked":
        return Value(now)
    if seen == "not_answered":
        return Coalesce(F("unclear_at"), Value(now))
    return F("unclear_at")
