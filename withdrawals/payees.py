"""The payee check (docs/api/payee-check.md): before a
payout's first send, who owns its key, through an acquirer that offers the
DICT lookup, and whether that owner has the expected document.

A lookup moves no money: it goes through the one guarded call
(:func:`acquirers.calls.call`, no transaction held), to the first acquirer
of the account's payout chain that offers it, then the next ones when one
cannot answer now. Answers are cached in Redis for
``PAYEE_LOOKUP_CACHE_SECONDS`` by key type and value (the DICT throttles
lookups that lead to no payment), and the lookups made at acquirers are
counted per account and day (America/Sao_Paulo) for the back office and in
the ``pix_payee_lookups_total`` metric. The result is stored on the
withdrawal (``payee_*``) in one short UPDATE.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import enum
import json
import logging
import uuid
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from redis import Redis

from accounts.models import Account
from acquirers import adapters, calls
from acquirers.adapters.base import KeyOwner, PayeeRefused, RecordNotFound
from acquirers.selectors import payout_chain
from core import metrics
from core.daily_counts import PAYEE_LOOKUPS, daily_count, daily_count_add
from core.redis import UNAVAILABLE
from core.redis import client as redis_client
from withdrawals import exceptions as err
from withdrawals import services
from withdrawals.models import PayeeCheck, PayoutAttempt, Withdrawal, WithdrawalStatus, WithdrawalTransition
from withdrawals.payee_rules import expected_document, matches, shown

logger = logging.getLogger(__name__)

#: A cached "no such key" (the cache keeps the owner, or this).
_ABSENT = {"found": False}
#: The per-account daily count of DICT lookups made at acquirers (core.daily_counts; the account's admin page).
LOOKUPS = PAYEE_LOOKUPS


class Decision(enum.StrEnum):
    SEND = "send"  # matched, or no check due: send
    DEFERRED = "deferred"  # nobody could answer now: not sent, tried again later
    FAILED = "failed"  # mismatch, key not found, or no answer for too long: failed, money back


def _redis() -> Redis:
    return redis_client(settings.CACHES["default"]["LOCATION"], timeout=2.0, decode_responses=True)


def _cache_key(key_type: str, key_value: str) -> str:
    return cache.make_key(f"payee:owner:{key_type}:{key_value}")


def payee_lookups_today(*, account_id: uuid.UUID | str) -> int:
    """The DICT lookups made at acquirers for this account today (America/Sao_Paulo)."""
    return daily_count(LOOKUPS, account_id)


def _cached(key_type: str, key_value: str) -> dict[str, Any] | None:
    try:
        raw = _redis().get(_cache_key(key_type, key_value))
    except UNAVAILABLE:
        return None
    return json.loads(raw) if raw is not None else None


def _remember(key_type: str, key_value: str, answer: dict[str, Any]) -> None:
    with contextlib.suppress(*UNAVAILABLE):  # unremembered: the next check asks an acquirer again
        _redis().set(_cache_key(key_type, key_value), json.dumps(answer), ex=settings.PAYEE_LOOKUP_CACHE_SECONDS)


def key_owner(*, account: Account, key_type: str, key_value: str, amount: int) -> dict[str, Any] | None:
    """The key's owner (``{"found": True, name, document, ispb, bank_name}``)
    or ``{"found": False}``, from the cache or the first acquirer of the
    account's payout chain able to answer; None when none could (unclear:
    never a mismatch)."""
    cached = _cached(key_type, key_value)
    if cached is not None:
        metrics.PAYEE_LOOKUPS.labels("none", "cached").inc()
        return cached
    offering = set(adapters.adapter_names(supporting="key_lookup"))
    for acquirer in payout_chain(account, amount):
        if acquirer.adapter not in offering:
            continue
        gate = calls.admit(acquirer, "key_lookup")
        if not gate.allowed:
            continue
        # The lookup may be the breaker's half-open probe: its outcome must
        # close (or re-open) the circuit, else the probe's claim blocks payouts.
        done = calls.call(
            acquirer, "key_lookup", lambda adapter: adapter.lookup_key(key_type, key_value), probe=gate.probe
        )
        if done.outcome is calls.Outcome.BUSY:
            continue
        daily_count_add(LOOKUPS, account.pk)
        answer: dict[str, Any] | None = None
        if isinstance(done.result, KeyOwner):
            answer = {"found": True, **dataclasses.asdict(done.result)}
        elif isinstance(done.error, RecordNotFound):
            answer = dict(_ABSENT)
        metrics.PAYEE_LOOKUPS.labels(
            acquirer.key, "unclear" if answer is None else "found" if answer["found"] else "not_found"
        ).inc()
        if answer is not None:
            _remember(key_type, key_value, answer)
            return answer
        # The outcome and class only: adapters' messages may name the key (a CPF key is a CPF).
        logger.info("payee lookup at %s unclear: %s (%s)", acquirer.key, done.outcome, done.error_class)
    return None


def payee_look_up(*, withdrawal_id: uuid.UUID | str) -> str | None:
    """Look the withdrawal's key up and store what was found on it (staff
    see it on the approval screen); its :class:`PayeeCheck`, or None when no
    check is due or nobody could answer. Only while it is pending or
    approved: a settled withdrawal is left as it is."""
    withdrawal = Withdrawal.objects.select_related("account").get(pk=withdrawal_id)
    expected = expected_document(account=withdrawal.account, payee_document=withdrawal.payee_document)
    if not expected or withdrawal.status not in (WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED):
        return None
    return _look_up(withdrawal, expected)


def _look_up(withdrawal: Withdrawal, expected: str) -> str | None:
    owner = key_owner(
        account=withdrawal.account,
        key_type=withdrawal.pix_key_type,
        key_value=withdrawal.pix_key,
        amount=withdrawal.liquid_amount,
    )
    if owner is None:
        return None
    found = bool(owner["found"])
    check = (
        PayeeCheck.NOT_FOUND
        if not found
        else PayeeCheck.MATCHED
        if matches(expected, owner["document"])
        else PayeeCheck.MISMATCH
    )
    Withdrawal.objects.filter(
        pk=withdrawal.pk, status__in=(WithdrawalStatus.PENDING, WithdrawalStatus.APPROVED)
    ).update(
        payee_check=check,
        payee_name=str(owner.get("name", ""))[:140] if found else "",
        payee_document_masked=shown(owner["document"]) if found else "",
        payee_ispb=str(owner.get("ispb", ""))[:8] if found else "",
        payee_bank=str(owner.get("bank_name", ""))[:100] if found else "",
        payee_checked_at=timezone.now(),
        updated_at=timezone.now(),
    )
    return check


def _fresh(withdrawal: Withdrawal) -> str | None:
    """The check stored on the withdrawal (as the payout run loaded it) while
    within the cache window: the one staff saw."""
    checked_at = withdrawal.payee_checked_at
    window = dt.timedelta(seconds=settings.PAYEE_LOOKUP_CACHE_SECONDS)
    if withdrawal.payee_check and checked_at is not None and timezone.now() - checked_at < window:
        return str(withdrawal.payee_check)
    return None


def _unclear_since(withdrawal_id: uuid.UUID) -> dt.datetime:
    """When the check of this withdrawal first found nobody able to answer (kept in Redis)."""
    now = timezone.now()
    key = cache.make_key(f"payee:unclear:{withdrawal_id}")
    try:
        client = _redis()
        client.set(key, now.isoformat(), nx=True, ex=7 * 24 * 3600)
        return dt.datetime.fromisoformat(str(client.get(key) or now.isoformat()))
    except UNAVAILABLE:
        return now


def payee_verdict(withdrawal: Withdrawal, *, expected: str, lease_token: str) -> Decision:
    """The check right before a payout's first send (withdrawals.payouts),
    against ``expected`` (``payee_rules.expected_document``): send on a match
    (or when none is due); fail the withdrawal, money back, on a mismatch or
    a key not found; defer when nobody could answer, and fail once that has
    lasted ``PAYEE_CHECK_GIVE_UP_MINUTES``."""
    if not expected:
        return Decision.SEND
    check = _fresh(withdrawal) or _look_up(withdrawal, expected)
    if check == PayeeCheck.MATCHED:
        return Decision.SEND
    if check is None:
        waited = timezone.now() - _unclear_since(withdrawal.pk)
        if waited < dt.timedelta(minutes=settings.PAYEE_CHECK_GIVE_UP_MINUTES):
            services.withdrawal_process_later(withdrawal_id=withdrawal.pk, retry_in=settings.PAYEE_LOOKUP_RETRY_SECONDS)
            return Decision.DEFERRED
        reason = err.PAYEE_LOOKUP_GAVE_UP
    else:
        reason = err.PAYEE_MISMATCH if check == PayeeCheck.MISMATCH else err.PAYEE_KEY_NOT_FOUND
    services.withdrawal_transition(
        withdrawal_id=withdrawal.pk,
        to_status=WithdrawalStatus.FAILED,
        source=WithdrawalTransition.Source.SYSTEM,
        reason=reason,
        lease_token=lease_token,
    )
    metrics.PAYOUTS.labels("none", "payee_" + (check or "unclear")).inc()
    return Decision.FAILED


def payee_send_refused(withdrawal: Withdrawal, *, lease_token: str) -> WithdrawalStatus:
    """A checked payout (``PayoutRequest.payee_document`` sent) refused or
    failed for good by the acquirer it was sent to: failed, money back, never
    sent to the next acquirer of the chain, which may not check the owner
    (Efí checks the full document, the DICT shows 6 CPF digits). The reason
    is the mismatch when the adapter said so (:class:`PayeeRefused`)."""
    last = (
        PayoutAttempt.objects.filter(withdrawal=withdrawal, released=True)
        .order_by("-id")
        .values_list("error_class", flat=True)
        .first()
    )
    mismatch = last == PayeeRefused.__name__
    services.withdrawal_transition(
        withdrawal_id=withdrawal.pk,
        to_status=WithdrawalStatus.FAILED,
        source=WithdrawalTransition.Source.SYSTEM,
        reason=err.PAYEE_MISMATCH if mismatch else err.PAYEE_CHECKED_SEND_REFUSED,
        lease_token=lease_token,
    )
    metrics.PAYOUTS.labels("none", "payee_refused" if mismatch else "payee_send_refused").inc()
    return WithdrawalStatus.FAILED
