"""Mixed traffic from several accounts, and the client-side model of what
each account's balance must be.

Every money-moving request gets a definite answer before the client moves
on: an unclear one (no answer, a 5xx not replayed, a 409 "still running")
is retried with the same ``Idempotency-Key`` (or, for the sandbox drivers,
as is: repeating a change is a 200 that changes nothing), so the model
knows exactly what happened. A stored 5xx replayed means nothing was
written: the client tries again under a new key, as docs/api/idempotency.md,
"What a retry can count on", says.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import requests

#: How long an unclear request is retried before the run calls it a violation
#: (beyond any fault window, and beyond an in-flight key's expiry, WEB_TIMEOUT).
DEFINITE_WITHIN = 150.0
BUYER = {"buyer_name": "Fulano de Tal", "buyer_document": "52998224725", "buyer_phone": "11999998888"}


@dataclass
class Call:
    """One HTTP exchange as the client saw it (monotonic times)."""

    started: float
    ended: float
    label: str
    status: int | None
    error: str = ""


@dataclass
class Journal:
    """What every client did and what went wrong on the client's side."""

    calls: list[Call] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)

    def finding(self, text: str) -> None:
        with self.lock:
            self.findings.append(text)

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1


@dataclass
class ChargeModel:
    id: str
    amount: int
    liquid: int
    status: str = "pending"


@dataclass
class WithdrawalModel:
    id: str
    amount: int
    total: int
    liquid: int
    returned: bool = False


@dataclass
class AccountModel:
    """One account as its client knows it."""

    name: str
    headers: dict[str, str]
    secret: str  # the webhook endpoint's
    charges: dict[str, ChargeModel] = field(default_factory=dict)
    withdrawals: dict[str, WithdrawalModel] = field(default_factory=dict)
    #: (path, key, body, id) of the last POST acknowledged, for replays.
    last_post: tuple[str, str, dict[str, Any], str] | None = None

    def balance(self) -> int:
        """Decisions §4-§5 on what the client did: a charge paid credits its
        liquid amount, a refund or chargeback takes it back; a withdrawal debits its total (discount_fee
        is always true here: total = amount), a return credits its liquid."""
        credited = sum(c.liquid for c in self.charges.values() if c.status == "paid")
        debited = sum(w.total for w in self.withdrawals.values())
        returned = sum(w.liquid for w in self.withdrawals.values() if w.returned)
        return credited - debited + returned


class Client:
    def __init__(self, base: str, model: AccountModel, journal: Journal, seed: int) -> None:
        self.base = base
        self.model = model
        self.journal = journal
        self.rng = random.Random(seed)
        self.session = requests.Session()
        self.session.headers.update(model.headers)
        # One connection per request: a kept-alive one that gunicorn closes
        # (idle past its keepalive) while the next request is being sent
        # fails that request with no answer, which would read as an outage.
        self.session.headers["Connection"] = "close"

    # ------------------------------------------------------------------ HTTP

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        started = time.monotonic()
        label = f"{method} {path.split('?')[0]}"
        try:
            response = self.session.request(method, f"{self.base}{path}", json=body, headers=headers, timeout=30)
        except requests.RequestException as exc:
            self.journal.record(Call(started, time.monotonic(), label, None, f"{type(exc).__name__}: {exc}"[:300]))
            return None
        self.journal.record(Call(started, time.monotonic(), label, response.status_code))
        return response

    def definite_post(self, path: str, body: dict[str, Any], key: str | None = None) -> tuple[Any, str]:
        """POST until the answer is definite; returns it and the key it holds."""
        key = key or uuid.uuid4().hex
        deadline = time.monotonic() + DEFINITE_WITHIN
        pause = 0.5
        while time.monotonic() < deadline:
            response = self.call("POST", path, body, {"Idempotency-Key": key})
            if response is not None and response.status_code < 500 and response.status_code != 409:
                return response, key
            if response is not None and response.status_code >= 500 and response.headers.get("Idempotent-Replayed"):
                key = uuid.uuid4().hex  # a stored 5xx: nothing was written
            self.journal.count("retried")
            time.sleep(pause)
            pause = min(pause * 2, 5.0)
        self.journal.finding(f"{self.model.name}: POST {path} got no definite answer within {DEFINITE_WITHIN:.0f}s")
        return None, key

    def definite_sandbox(self, path: str) -> Any:
        deadline = time.monotonic() + DEFINITE_WITHIN
        while time.monotonic() < deadline:
            response = self.call("POST", path)
            if response is not None and response.status_code < 500:
                return response
            self.journal.count("retried")
            time.sleep(1.0)
        self.journal.finding(f"{self.model.name}: POST {path} got no definite answer within {DEFINITE_WITHIN:.0f}s")
        return None

    # ------------------------------------------------------------------ operations

    def create_charge(self) -> None:
        body = {"payment_method": "pix", "amount": self.rng.randrange(1_000, 60_000), "buyer": BUYER}
        response, key = self.definite_post("/api/transactions", body)
        if response is None:
            return
        if response.status_code != 201:
            # Every acquirer refused (a fault window): nothing was created.
            self.journal.count(f"charge refused {response.status_code}")
            return
        data = response.json()["data"]
        self.model.charges[data["id"]] = ChargeModel(data["id"], data["amount"], data["liquid_amount"])
        self.model.last_post = ("/api/transactions", key, body, data["id"])
        self.journal.count("charge created")

    def drive_charge(self, action: str, wanted: str, to: str) -> None:
        candidates = sorted(cid for cid, c in self.model.charges.items() if c.status == wanted)
        if not candidates:
            return
        charge = self.model.charges[self.rng.choice(candidates)]
        response = self.definite_sandbox(f"/api/sandbox/transactions/{charge.id}/{action}")
        if response is None:
            return
        if response.status_code != 200:
            self.journal.finding(
                f"{self.model.name}: {action} of charge {charge.id} ({wanted}) answered {response.status_code}"
            )
            return
        charge.status = to
        self.journal.count(f"charge {action}")

    def withdraw(self) -> None:
        balance = self.model.balance()
        overdraw = self.rng.random() < 0.15
        if overdraw:
            amount = max(balance, 0) + self.rng.randrange(1, 5_000)
        elif balance >= 2_000:
            amount = self.rng.randrange(1_000, min(balance, 30_000) + 1)
        else:
            return
        amount = max(amount, 1_000)
        body = {"amount": amount, "key_type": "email", "key_value": f"{self.model.name}@example.com"}
        response, key = self.definite_post("/api/withdrawals", body)
        if response is None:
            return
        if response.status_code == 201:
            data = response.json()["data"]
            if amount > balance:
                self.journal.finding(f"{self.model.name}: withdrawal of {amount} accepted over a balance of {balance}")
            self.model.withdrawals[data["id"]] = WithdrawalModel(data["id"], amount, amount, data["liquid_amount"])
            self.model.last_post = ("/api/withdrawals", key, body, data["id"])
            self.journal.count("withdrawal requested")
        elif response.status_code == 400 and amount > balance:
            self.journal.count("overdraw refused")
        else:
            self.journal.finding(
                f"{self.model.name}: withdrawal of {amount} (balance {balance}) answered "
                f"{response.status_code} {response.text[:200]}"
            )

    def return_withdrawal(self) -> None:
        candidates = sorted(wid for wid, w in self.model.withdrawals.items() if not w.returned)
        if not candidates:
            return
        withdrawal = self.model.withdrawals[self.rng.choice(candidates)]
        current = self.call("GET", f"/api/withdrawals/{withdrawal.id}")
        if current is None or current.status_code != 200 or current.json()["data"]["status"] != "paid":
            return
        response = self.definite_sandbox(f"/api/sandbox/withdrawals/{withdrawal.id}/return")
        if response is not None and response.status_code == 200:
            withdrawal.returned = True
            self.journal.count("withdrawal returned")
        elif response is not None:
            self.journal.finding(f"{self.model.name}: return of {withdrawal.id} answered {response.status_code}")

    def replay(self) -> None:
        """The last acknowledged POST again, same key and body: the same record."""
        if self.model.last_post is None:
            return
        path, key, body, record_id = self.model.last_post
        response, _ = self.definite_post(path, body, key)
        if response is None:
            return
        same = response.status_code == 201 and response.json()["data"]["id"] == record_id
        if not same or response.headers.get("Idempotent-Replayed") != "true":
            self.journal.finding(
                f"{self.model.name}: replay of {path} key {key} answered {response.status_code} "
                f"{response.text[:200]} (replayed={response.headers.get('Idempotent-Replayed')}), expected {record_id}"
            )
        self.journal.count("replayed")

    def step(self) -> None:
        operations = [
            (self.create_charge, 4),
            (lambda: self.drive_charge("pay", "pending", "paid"), 4),
            (lambda: self.drive_charge("fail", "pending", "failed"), 0.5),
            (lambda: self.drive_charge("refund", "paid", "refunded"), 0.7),
            (lambda: self.drive_charge("chargeback", "paid", "chargeback"), 0.5),
            (self.withdraw, 2.5),
            (self.return_withdrawal, 0.4),
            (self.replay, 0.8),
        ]
        operation = self.rng.choices([op for op, _ in operations], weights=[w for _, w in operations])[0]
        operation()

    def run(self, until: float, stop: threading.Event) -> None:
        while time.monotonic() < until and not stop.is_set():
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - a client bug must not end the run silently
                self.journal.finding(f"{self.model.name}: client error {type(exc).__name__}: {exc}")
            stop.wait(self.rng.uniform(0.4, 1.4))
