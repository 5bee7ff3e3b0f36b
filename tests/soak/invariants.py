"""What must hold after the soak, checked from the API, the database, the
sandbox acquirer's own records and what the receiver got. Each check
returns the violations it found, each one sentence naming what broke."""

from __future__ import annotations

import hmac
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import requests
from standardwebhooks.webhooks import Webhook

from tests.realworld import ReceivedRequest
from tests.soak.traffic import AccountModel, Journal

Check = Callable[[], list[str]]
#: Standard Webhooks' tolerance between a delivery's timestamp and its arrival.
TOLERANCE = 300
UNSETTLED_WITHDRAWALS = ("pending", "approved")


def converge(account_ids: list[str], timeout: float) -> tuple[bool, str]:
    """Wait for the events the faults delayed: every delivery out of the
    outbox and no withdrawal still on its way. False, and what is left,
    past ``timeout``."""
    from django.db import DatabaseError, connection

    from webhooks.models import WebhookDelivery
    from withdrawals.models import Withdrawal

    deadline = time.monotonic() + timeout
    left = ""
    while True:
        try:
            pending = WebhookDelivery.objects.filter(
                event__account_id__in=account_ids, status=WebhookDelivery.Status.PENDING
            ).count()
            unsettled = Withdrawal.objects.filter(account_id__in=account_ids, status__in=UNSETTLED_WITHDRAWALS).count()
            left = f"{pending} deliveries pending, {unsettled} withdrawals pending or approved"
            if not pending and not unsettled:
                return True, left
        except DatabaseError as exc:
            left = f"database error {exc}"
        finally:
            connection.close()
        if time.monotonic() > deadline:
            return False, left
        time.sleep(1.0)


def balances(base: str, models: dict[str, AccountModel], ids: dict[str, str]) -> list[str]:
    """API balance = AccountBalance = SUM(ledger) = the client's model; each
    entry's balance_after the running sum; no withdrawal entry below zero."""
    from django.db.models import Sum

    from accounts.models import AccountBalance, LedgerEntry

    violations = []
    for name, model in models.items():
        response = requests.get(f"{base}/api/withdrawals/balance", headers=model.headers, timeout=30)
        api = response.json()["data"]["available_balance"] if response.status_code == 200 else None
        stored = AccountBalance.objects.get(account_id=ids[name]).available
        ledger = LedgerEntry.objects.filter(account_id=ids[name]).aggregate(total=Sum("amount"))["total"] or 0
        expected = model.balance()
        if not api == stored == ledger == expected:
            violations.append(
                f"{name}: balance API {api}, stored {stored}, ledger {ledger}, client model {expected} differ"
            )
        running = 0
        for entry in LedgerEntry.objects.filter(account_id=ids[name]).order_by("id"):
            running += entry.amount
            if entry.balance_after != running:
                violations.append(f"{name}: ledger entry {entry.pk} says {entry.balance_after} after, sum is {running}")
                break
            if entry.kind == "withdrawal" and entry.balance_after < 0:
                violations.append(f"{name}: withdrawal entry {entry.pk} overdrew the balance to {entry.balance_after}")
    return violations


def records(base: str, models: dict[str, AccountModel], ids: dict[str, str]) -> list[str]:
    """Every acknowledged charge and withdrawal exists once, no other exists,
    and each is in the status the client drove it to."""
    from payments.models import Charge
    from withdrawals.models import Withdrawal

    violations = []
    for name, model in models.items():
        charges = {str(k): v for k, v in Charge.objects.filter(account_id=ids[name]).values_list("id", "status")}
        for charge in model.charges.values():
            if charges.get(charge.id) != charge.status:
                violations.append(
                    f"{name}: charge {charge.id} is {charges.get(charge.id)}, the client made it {charge.status}"
                )
        for extra in sorted(set(charges) - set(model.charges)):
            violations.append(f"{name}: charge {extra} exists but was never acknowledged")
        withdrawals = {
            str(k): v for k, v in Withdrawal.objects.filter(account_id=ids[name]).values_list("id", "status")
        }
        for withdrawal in model.withdrawals.values():
            wanted = "refunded" if withdrawal.returned else "paid"
            if withdrawals.get(withdrawal.id) != wanted:
                violations.append(
                    f"{name}: withdrawal {withdrawal.id} is {withdrawals.get(withdrawal.id)}, expected {wanted}"
                )
        for extra in sorted(set(withdrawals) - set(model.withdrawals)):
            violations.append(f"{name}: withdrawal {extra} exists but was never acknowledged")
        listed = requests.get(f"{base}/api/withdrawals?per_page=1", headers=model.headers, timeout=30)
        total = listed.json()["data"]["pagination"].get("total") if listed.status_code == 200 else None
        if total is not None and total != len(model.withdrawals):
            violations.append(
                f"{name}: the API lists {total} withdrawals, the client had {len(model.withdrawals)} acknowledged"
            )
    return violations


def payouts_once(ids: dict[str, str]) -> list[str]:
    """The sandbox acquirers' own records: each withdrawal paid out by one
    acquirer at most, exactly one when paid, none when its money came back."""
    from acquirers import adapters
    from acquirers.adapters.sandbox import SandboxAdapter
    from acquirers.models import Acquirer
    from withdrawals.models import Withdrawal

    sandboxes = [adapters.build(a) for a in Acquirer.objects.filter(adapter="sandbox")]
    violations = []
    for withdrawal in Withdrawal.objects.filter(account_id__in=ids.values()):
        holders = [
            s.config.key
            for s in sandboxes
            if isinstance(s, SandboxAdapter)
            and s.get_payout_status(withdrawal.idempotency_id).status.value != "not_found"
        ]
        # Still on its way (pending, approved): paid out once at most.
        wanted = {"paid": (1,), "refunded": (1,), "failed": (0,), "canceled": (0,)}.get(withdrawal.status, (0, 1))
        if len(holders) not in wanted:
            violations.append(
                f"withdrawal {withdrawal.pk} ({withdrawal.status}) was paid out by {len(holders)} acquirers {holders}"
            )
    return violations


#: Seconds within which a payout run that died mid-call is taken up again (issue 29).
RESUMED_WITHIN = 60.0


def interrupted_payouts_resumed(ids: dict[str, str]) -> list[str]:
    """Every payout call whose run died under it (a pool child killed, a
    connection terminated: the next run marks it RunInterrupted) was
    followed within a minute by the next call on that payout or by the
    payout leaving ``approved``: the payout was taken up again, not left to
    its lease and beat's poll."""
    from withdrawals.models import PayoutAttempt, WithdrawalTransition
    from withdrawals.runs import INTERRUPTED

    violations = []
    interrupted = PayoutAttempt.objects.filter(
        withdrawal__account_id__in=ids.values(), error_class=INTERRUPTED
    ).order_by("id")
    for attempt in interrupted:
        later = PayoutAttempt.objects.filter(withdrawal_id=attempt.withdrawal_id, id__gt=attempt.id)
        settled = WithdrawalTransition.objects.filter(
            withdrawal_id=attempt.withdrawal_id, from_status="approved", created_at__gte=attempt.created_at
        )
        moments = [
            row.created_at for row in (later.order_by("id").first(), settled.order_by("id").first()) if row is not None
        ]
        waited = (min(moments) - attempt.created_at).total_seconds() if moments else None
        if waited is None or waited > RESUMED_WITHIN:
            shown = "never" if waited is None else f"after {waited:.0f}s"
            violations.append(
                f"withdrawal {attempt.withdrawal_id}: its {attempt.action} cut by a dead run was taken up {shown}"
            )
    return violations


def unverified(secret: str, request: ReceivedRequest) -> str:
    """Why a delivery fails Standard Webhooks verification ("" if it passes),
    with the reference library's signing, as of when it arrived (checked
    minutes later, every timestamp would be past the 5-minute tolerance that
    the library's ``verify`` measures from now)."""
    headers = {k.lower(): v for k, v in request.headers.items()}
    msg_id, stamp, presented = (headers.get(f"webhook-{h}", "") for h in ("id", "timestamp", "signature"))
    if not (msg_id and stamp.isdigit() and presented):
        return "missing or malformed webhook-id, webhook-timestamp or webhook-signature"
    if abs(int(stamp) - request.at) > TOLERANCE:
        return f"timestamp {stamp} is {request.at - int(stamp):.0f}s off its arrival"
    expected = Webhook(secret).sign(msg_id, datetime.fromtimestamp(int(stamp), tz=UTC), request.body.decode())
    if not any(hmac.compare_digest(expected, signature) for signature in presented.split(" ")):
        return "no matching signature"
    return ""


def webhooks(models: dict[str, AccountModel], ids: dict[str, str], received: list[ReceivedRequest]) -> list[str]:
    """Every status change (the transitions on record) reached the account's
    receiver in a delivery whose Standard Webhooks signature verifies with
    the endpoint's secret; no delivery failed for good; nothing unsigned."""
    from payments.models import ChargeTransition
    from webhooks.models import WebhookDelivery
    from withdrawals.models import WithdrawalTransition

    violations = []
    delivered: dict[str, set[tuple[str, str]]] = defaultdict(set)
    forged = Counter[str]()
    for request in received:
        name = request.path.rsplit("/", 1)[-1]
        if name not in models:
            forged[f"unknown path {request.path}"] += 1
            continue
        why = unverified(models[name].secret, request)
        if why:
            forged[f"{name}: {why}"] += 1
            continue
        data = json.loads(request.body)["data"]
        delivered[name].add((str(data["id"]), str(data["status"])))
    violations += [f"{count} deliveries did not verify ({why})" for why, count in forged.items()]
    for name, account_id in ids.items():
        changes = list(
            ChargeTransition.objects.filter(charge__account_id=account_id).values_list("charge_id", "to_status")
        ) + list(
            WithdrawalTransition.objects.filter(withdrawal__account_id=account_id).values_list(
                "withdrawal_id", "to_status"
            )
        )
        missing = [(str(r), s) for r, s in changes if (str(r), s) not in delivered[name]]
        if missing:
            violations.append(
                f"{name}: {len(missing)} of {len(changes)} status changes never delivered, e.g. {missing[:3]}"
            )
    failed = WebhookDelivery.objects.filter(event__account_id__in=ids.values()).exclude(
        status=WebhookDelivery.Status.SUCCEEDED
    )
    for delivery in failed[:5]:
        violations.append(f"delivery {delivery.pk} ended {delivery.status}: {delivery.last_error[:120]}")
    return violations


def no_5xx_outside_faults(journal: Journal, excused: Callable[[float, float], bool], origin: float) -> list[str]:
    """Answers of 5xx, or none at all, only while a fault took PostgreSQL or
    Redis away (and GRACE seconds after)."""
    bad = [c for c in journal.calls if (c.status is None or c.status >= 500) and not excused(c.started, c.ended)]
    return [
        f"{c.label} answered {c.status or c.error} at t={c.started - origin:.1f}s outside any fault window"
        for c in bad[:20]
    ]


def run_checks(checks: dict[str, Check]) -> dict[str, list[str]]:
    """Each check on its own: one that crashes is a violation, not the end."""
    from django.db import connection

    results: dict[str, list[str]] = {}
    connection.close()  # a fault may have terminated this process's connection
    for name, check in checks.items():
        try:
            results[name] = check()
        except Exception as exc:  # noqa: BLE001 - reported as the check's failure
            results[name] = [f"the check crashed: {type(exc).__name__}: {exc}"]
        finally:
            connection.close()
    return results


def describe(results: dict[str, Any]) -> str:
    lines = []
    for name, violations in results.items():
        lines.append(f"  {'ok  ' if not violations else 'FAIL'} {name}")
        lines += [f"         - {v}" for v in violations]
    return "\n".join(lines)
