"""The built-in ``sandbox`` acquirer (decisions §8).

Options: ``{"charge": <behaviour>, "payout": "ok"|"fail"|"timeout",
"notification_secret": "..."}`` (``key_lookup``: :mod:`.sandbox_keys`). Charge behaviours:

- ``ok``: a valid BR Code at once; ``fail``: refused (unavailable);
- ``timeout``: creates the charge, then waits past the acquirer's deadline
  (connect + read timeout), where the call ends as a real one is cut
  (:func:`core.deadline.sleep`): the case a real timeout leaves us in, the
  acquirer may have acted although we gave up;
- ``slow``: answers well, after half the deadline;
- ``flaky``: the 1st, 3rd, 5th... call to this acquirer is refused, the
  others succeed (counted in Redis, so across processes);
- ``garbage``: an answer the adapter cannot read (``InvalidResponse``), nothing created;
- ``invalid_emv``: creates the charge but answers a BR Code with a wrong CRC,
  which the service's checker refuses.

Payouts: ``timeout`` records the transfer, then waits past the deadline.
For reconciliation it lists what it recorded: ``list_sent`` the transfers,
``list_received`` the Pix its charges received (recorded by the drivers,
:meth:`SandboxAdapter.receive`, as a real PSP holds the Pix it received;
a refund it made marks it returned).

Refunds (``refund``): ``ok`` returns the money at once; ``processing`` answers
"processing" and returns it on the next ask; ``fail`` answers that the refund
was not made; ``timeout`` returns it, then answers past the deadline. Asked
again, a refund id answers its recorded state (idempotent); ``refund_status``
reads it (a processing refund settles on that read too), "not found" when none.
MED infractions: :mod:`.sandbox_infractions` (opened and decided by the drivers).
Due-date charges (cobv): :mod:`.sandbox_due`; Pix Automático and the payer's
bank: :mod:`.sandbox_recurrence`; both with the same charge behaviours.
What the sandbox "created" or received (charges, cancellations, payouts and
how many times each payout was requested) is kept in Redis so every process
sees the same acquirer.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import string
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

import acquirers.adapters.sandbox_signing as signing
from acquirers import brcode
from acquirers.adapters.apipix.formats import valor
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerDeclined,
    AcquirerUnavailable,
    CancelResult,
    ChargeRequest,
    ChargeResult,
    InvalidNotification,
    InvalidOptions,
    InvalidResponse,
    Notification,
    NotificationEvent,
    PayoutRequest,
    PayoutResult,
    PayoutStatus,
    ProviderListing,
    ProviderPixRecord,
    ProviderRecordStatus,
    RefundRequest,
    RefundResult,
    RefundStatus,
    UnreadableNotification,
)
from acquirers.adapters.registry import register
from acquirers.adapters.sandbox_due import SandboxDueCharges, answered_emv
from acquirers.adapters.sandbox_infractions import SandboxInfractions
from acquirers.adapters.sandbox_keys import KEY_LOOKUP_BEHAVIOURS, SandboxKeyLookup
from acquirers.adapters.sandbox_recurrence import SandboxRecurrences
from acquirers.adapters.sandbox_state import STATE_TTL as _STATE_TTL
from acquirers.adapters.sandbox_state import state as _state
from core import deadline
from core.redis import Direct
from core.redis import direct as redis_direct

CHARGE_BEHAVIOURS = ("ok", "fail", "timeout", "slow", "flaky", "garbage", "invalid_emv")
PAYOUT_BEHAVIOURS = ("ok", "fail", "timeout")
REFUND_BEHAVIOURS = ("ok", "processing", "fail", "timeout")
SANDBOX_ISPB = "99999999"
#: Version 2 of the cache's keys in its Redis: version 1 held Django's pickles; these are strings.
_STATE_VERSION = 2


def _state_direct() -> Direct:
    """The same Redis on this thread's own connection (core.redis.Direct), for
    the write on every instant sandbox charge."""
    return redis_direct(settings.CACHES["default"]["LOCATION"], timeout=5.0, decode_responses=True)


_ALNUM = string.ascii_letters + string.digits
#: A charge's state at the sandbox, changed in one step (KEYS[1]: its key, ARGV[1]: the TTL).
_CANCEL_SCRIPT = "local s = redis.call('GET', KEYS[1]) if s and s ~= 'paid' then redis.call('SET', KEYS[1], 'canceled', 'EX', ARGV[1]) end return s"  # noqa: E501
_PAY_SCRIPT = "if redis.call('GET', KEYS[1]) == 'canceled' then return 0 end redis.call('SET', KEYS[1], 'paid', 'EX', ARGV[1]) return 1"  # noqa: E501


def new_e2e_id(ispb: str = SANDBOX_ISPB, at: dt.datetime | None = None) -> str:
    """``E`` + ISPB + ``yyyyMMddHHmm`` (UTC) + 11 random characters: 32 in all."""
    moment = (at or timezone.now()).astimezone(dt.UTC)
    return f"E{ispb}{moment:%Y%m%d%H%M}" + "".join(secrets.choice(_ALNUM) for _ in range(11))


@register
class SandboxAdapter(SandboxKeyLookup, SandboxInfractions, SandboxDueCharges, SandboxRecurrences, AcquirerAdapter):
    name = "sandbox"
    # What its drivers record (acquirers.adapters.sandbox_infractions), listed and defended.
    supports_infractions = True
    # cobv (acquirers.adapters.sandbox_due); no lotecobv: a batch's charges are created one by one.
    supports_due_charge = True
    supports_recurrence = True  # and the payer's bank (acquirers.adapters.sandbox_recurrence)
    supports_list_received = True
    supports_list_sent = True
    supports_refund = True
    supports_cancel = True
    # Its charges are paid by the sandbox drivers, which may give no e2e id.
    refund_needs_e2e_id = False

    @classmethod
    def enabled(cls) -> bool:
        # It pays whatever the account's own credential asks it to (decisions §8).
        return bool(settings.PIX_SANDBOX)

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        clean = {"charge": options.get("charge", "ok"), "payout": options.get("payout", "ok")}
        clean |= {name: options[name] for name in ("refund", "key_lookup") if name in options}  # else "ok"
        behaviours = {"charge": CHARGE_BEHAVIOURS, "payout": PAYOUT_BEHAVIOURS, "refund": REFUND_BEHAVIOURS}
        for operation, allowed in (behaviours | {"key_lookup": KEY_LOOKUP_BEHAVIOURS}).items():
            if operation in clean and clean[operation] not in allowed:
                raise InvalidOptions(f"{operation} must be one of {', '.join(allowed)}")
        secret = options.get("notification_secret")
        if secret is not None and (not isinstance(secret, str) or len(secret) < 16):
            raise InvalidOptions("notification_secret must be a string of at least 16 characters")
        if secret:
            clean["notification_secret"] = secret
        return clean

    # ------------------------------------------------------------------ helpers

    def _key(self, *parts: str) -> str:
        # The cache's prefix keeps test suites sharing one Redis apart.
        return cache.make_key(":".join(("sandbox", self.config.key, *parts)), version=_STATE_VERSION)

    def _deadline(self) -> float:
        return self.config.connect_timeout + self.config.read_timeout

    def _late(self) -> None:
        # Past the whole deadline (connect + read) by a margin, so the
        # caller's deadline fires first: the wait ends there, raising what a
        # call cut at its deadline raises. Called with no deadline, it answers late.
        deadline.sleep(self._deadline() + 0.5)

    def _load(self, *parts: str) -> dict[str, Any] | None:
        raw = _state().get(self._key(*parts))
        return json.loads(raw) if raw is not None else None

    def _store(self, value: Mapping[str, Any], *parts: str) -> None:
        _state().set(self._key(*parts), json.dumps(value), ex=_STATE_TTL)

    def _count(self, *parts: str) -> int:
        """Atomic counter shared by every process (the cache is Redis)."""
        key = self._key(*parts)
        pipe = _state().pipeline(transaction=True)
        pipe.incr(key)
        pipe.expire(key, _STATE_TTL)
        return int(pipe.execute()[0])

    # ------------------------------------------------------------------ charges

    def _charge_behaviour(self) -> str:
        """``options["charge"]`` acted out before any charge (cob or cobv) is created; returned for the rest."""
        behaviour = str(self.options["charge"])
        if behaviour == "fail":
            raise AcquirerUnavailable("sandbox: charge refused (options.charge = fail)")
        if behaviour == "flaky" and self._count("charge_calls") % 2 == 1:
            raise AcquirerUnavailable("sandbox: charge refused (options.charge = flaky)")
        if behaviour == "garbage":
            raise InvalidResponse("sandbox: unreadable answer (options.charge = garbage)")
        if behaviour == "slow":
            deadline.sleep(self._deadline() / 2)
        return behaviour

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        behaviour = self._charge_behaviour()
        emv = brcode.encode_dynamic(
            location=f"pix.sandbox.local/qr/v2/{request.txid}",
            amount=request.amount,
            merchant_name=request.merchant_name,
            merchant_city=request.merchant_city,
        )
        emv = answered_emv(emv, behaviour)
        # add, not set: a cancellation that arrived first must stand.
        _state_direct().execute(("SET", self._key("charge", request.txid), "active", "EX", _STATE_TTL, "NX"))
        if behaviour == "timeout":
            self._late()  # created, but we hear nothing in time
        return ChargeResult(provider_charge_id=f"sbx_{request.txid}", emv=emv)

    def cancel_charge(self, txid: str) -> CancelResult:
        """Withdraw the charge (one step in Redis), unless its payer paid it first
        (the drivers' ``pay`` marks it ``paid``, as a PSP concludes a cob)."""
        state = _state().eval(_CANCEL_SCRIPT, 1, self._key("charge", txid), _STATE_TTL)
        if state is None:  # as a PSP's 404 while the late create is in flight: asked again
            raise AcquirerUnavailable(f"sandbox: charge {txid} not found (yet)")
        return CancelResult.PAID if state == "paid" else CancelResult.REMOVED

    def charge_paid(self, txid: str) -> bool:
        """The payer pays the charge: False, changing nothing, once withdrawn."""
        return bool(_state().eval(_PAY_SCRIPT, 1, self._key("charge", txid), _STATE_TTL))

    def charge_state(self, txid: str) -> str | None:
        """For tests and operators: ``active``, ``canceled``, ``paid`` or None (never created)."""
        value = _state().get(self._key("charge", txid))
        return str(value) if value is not None else None

    # ------------------------------------------------------------------ payouts

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        # What a real acquirer's logs would show: every request, even repeats.
        self._count("payout_requests", request.idempotency_id)
        done = self.get_payout_status(request.idempotency_id)
        if done.status is not PayoutStatus.NOT_FOUND:
            return done  # idempotent: the same id is never paid twice
        behaviour = self.options["payout"]
        if behaviour == "fail":
            raise AcquirerDeclined("sandbox: payout refused (options.payout = fail)")
        result = PayoutResult(
            status=PayoutStatus.PAID,
            provider_payout_id=f"sbx_{request.idempotency_id}",
            e2e_id=new_e2e_id(),
            paid_at=timezone.now(),
        )
        payload = {
            "e2e_id": result.e2e_id,
            "paid_at": result.paid_at.isoformat() if result.paid_at else None,
            "amount": request.amount,
        }
        # Recorded before the late answer: the transfer happened even if we time out.
        _state().set(self._key("payout", request.idempotency_id), json.dumps(payload), ex=_STATE_TTL)
        if behaviour == "timeout":
            self._late()
        return result

    def payout_requests(self, idempotency_id: str) -> int:
        """For tests and operators: how many times this payout was requested."""
        return int(_state().get(self._key("payout_requests", idempotency_id)) or 0)

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        raw = _state().get(self._key("payout", idempotency_id))
        if raw is None:
            return PayoutResult(status=PayoutStatus.NOT_FOUND)
        data = json.loads(raw)
        return PayoutResult(
            status=PayoutStatus.PAID,
            provider_payout_id=f"sbx_{idempotency_id}",
            e2e_id=data["e2e_id"],
            paid_at=dt.datetime.fromisoformat(data["paid_at"]) if data.get("paid_at") else None,
        )

    # ------------------------------------------------------------------ received Pix

    def receive(
        self, *, txid: str, amount: int, e2e_id: str, at: dt.datetime, components: Mapping[str, int] | None = None
    ) -> None:
        """Record the Pix a charge received, as the sandbox's own evidence
        (the sandbox drivers call it once the payment is applied), with a
        cobv's ``componentesValor`` as API Pix's ``GET /pix`` lists it. The
        first record stands: paying again names the same Pix."""
        record: dict[str, Any] = {
            "txid": txid,
            "amount": amount,
            "e2e_id": e2e_id,
            "paid_at": at.isoformat(),
            "refunded": False,
        }
        if components:
            record["componentesValor"] = {name: {"valor": valor(value)} for name, value in components.items()}
        _state().set(self._key("received", txid), json.dumps(record), ex=_STATE_TTL, nx=True)

    def received_refunded(self, txid: str) -> None:
        """Mark a received Pix returned to the payer (a refund made here, or the drivers')."""
        key = self._key("received", txid)
        raw = _state().get(key)
        if raw is not None:
            _state().set(key, json.dumps({**json.loads(raw), "refunded": True}), ex=_STATE_TTL)

    def list_received(self, start: dt.datetime, end: dt.datetime, page: str | None = None) -> ProviderListing:
        """The Pix this sandbox acquirer recorded with ``paid_at`` in
        ``[start, end]``, in one page (its records live a week)."""
        records = [
            ProviderPixRecord(
                reference=data["txid"],
                status=ProviderRecordStatus.REFUNDED if data.get("refunded") else ProviderRecordStatus.PAID,
                amount=int(data["amount"]),
                e2e_id=data["e2e_id"],
                occurred_at=paid_at,
                raw=data,
            )
            for _, data in self._recorded("received")
            if start <= (paid_at := dt.datetime.fromisoformat(data["paid_at"])) <= end
        ]
        return ProviderListing(records=tuple(sorted(records, key=lambda r: r.reference)))

    def _recorded(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """Every record of ``kind`` this acquirer keeps, with its id."""
        prefix = self._key(kind, "")
        found = []
        for key in _state().scan_iter(match=prefix + "*", count=500):
            raw = _state().get(key)
            if raw is not None:
                found.append((str(key)[len(prefix) :], json.loads(raw)))
        return found

    def list_sent(self, start: dt.datetime, end: dt.datetime, page: str | None = None) -> ProviderListing:
        """The transfers this sandbox acquirer recorded with ``paid_at`` in
        ``[start, end]``, in one page (its records live a week)."""
        records = []
        for idempotency_id, data in self._recorded("payout"):
            paid_at = dt.datetime.fromisoformat(data["paid_at"]) if data.get("paid_at") else None
            if paid_at is None or not start <= paid_at <= end:
                continue
            records.append(
                ProviderPixRecord(
                    reference=idempotency_id,
                    status=ProviderRecordStatus.PAID,
                    amount=int(data.get("amount", 0)),
                    e2e_id=data.get("e2e_id"),
                    occurred_at=paid_at,
                    raw=data,
                )
            )
        return ProviderListing(records=tuple(sorted(records, key=lambda r: r.reference)))

    # ------------------------------------------------------------------ refunds

    def refund_charge(self, request: RefundRequest) -> RefundResult:
        key = self._key("refund", request.refund_id)
        if _state().get(key) is not None:
            return self.refund_status(request)  # asked again: its recorded state
        behaviour = self.options.get("refund", "ok")
        status = {"fail": RefundStatus.FAILED, "processing": RefundStatus.PROCESSING}.get(behaviour, RefundStatus.DONE)
        _state().set(key, status.value, ex=_STATE_TTL)
        if behaviour == "timeout":
            self._late()  # returned, but we hear nothing in time
        return self._refund_result(request, status)

    def refund_status(self, request: RefundRequest) -> RefundResult:
        key = self._key("refund", request.refund_id)
        stored = _state().get(key)
        status = RefundStatus(str(stored)) if stored is not None else RefundStatus.NOT_FOUND
        if status is RefundStatus.PROCESSING:
            # The next ask (or look) finds it done, as a devolução settles at a real PSP.
            _state().set(key, RefundStatus.DONE.value, ex=_STATE_TTL)
            status = RefundStatus.DONE
        return self._refund_result(request, status)

    def _refund_result(self, request: RefundRequest, status: RefundStatus) -> RefundResult:
        if status is RefundStatus.DONE:
            self.received_refunded(request.txid)
        reason = "sandbox: refund refused (options.refund = fail)" if status is RefundStatus.FAILED else ""
        return RefundResult(status=status, provider_refund_id=f"sbx_{request.refund_id}", reason=reason)

    # ------------------------------------------------------------------ notifications

    def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
        """Body: one object or a list of ``{"event", "reference", "e2e_id"?, "occurred_at"?}``
        (``infraction.changed``: ``reference`` is the infraction's id here, a wake-up for the poller),
        with ``X-Sandbox-Timestamp: <unix seconds>`` and ``X-Sandbox-Signature:
        hex(HMAC-SHA256(notification_secret, "<timestamp>." + body))``; refused
        when the timestamp is more than :data:`signing.SIGNATURE_TOLERANCE` seconds
        away from now (no replay)."""
        secret = self.options.get("notification_secret")
        if not secret:
            raise InvalidNotification("this sandbox acquirer has no notification_secret")
        signing.verify(headers, body, secret)
        try:
            data = json.loads(body)
            items = data if isinstance(data, list) else [data]
            return [
                Notification(
                    event=NotificationEvent(item["event"]),
                    reference=str(item["reference"]),
                    e2e_id=item.get("e2e_id"),
                    occurred_at=dt.datetime.fromisoformat(item["occurred_at"]) if item.get("occurred_at") else None,
                    raw=item,
                )
                for item in items
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise UnreadableNotification(f"unreadable body: {exc}") from exc
