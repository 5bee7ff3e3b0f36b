"""Request serializers share their fields across instances and threads
(core.fields.SharedFieldsSerializer): concurrent validations each get their
own data and their own errors, as with fields of their own."""

from __future__ import annotations

import threading
from typing import Any

from payments.serializers import ChargeCreateSerializer
from withdrawals.serializers import WithdrawalCreateSerializer

THREADS = 16
ROUNDS = 40


def charge(n: int) -> dict[str, Any]:
    return {
        "payment_method": "pix",
        "amount": 1000 + n,
        "buyer": {"buyer_name": f"Pagador {n}", "buyer_document": "52998224725", "buyer_phone": "11999998888"},
        "metadata": {"n": n},
    }


def check(n: int) -> str | None:
    """One validation of body ``n``: valid when even, two field errors when odd."""
    body = charge(n)
    if n % 2:
        body["amount"] = 5  # below the minimum
        body["buyer"]["buyer_phone"] = f"x{n}"
    serializer = ChargeCreateSerializer(data=body)
    if serializer.is_valid() != (n % 2 == 0):
        return f"{n}: validity {serializer.errors}"
    if n % 2 == 0:
        data = serializer.validated_data
        seen = (data["amount"], data["buyer"]["buyer_name"], data["metadata"])
        return None if seen == (1000 + n, f"Pagador {n}", {"n": n}) else f"{n}: {seen}"
    errors = serializer.errors
    if set(errors) != {"amount", "buyer"} or set(errors["buyer"]) != {"buyer_phone"}:
        return f"{n}: errors {errors}"
    withdrawal = WithdrawalCreateSerializer(data={"amount": n, "key_value": "52998224725"})
    return None if withdrawal.is_valid() and withdrawal.validated_data["amount"] == n else f"{n}: withdrawal"


def test_concurrent_validations_keep_their_own_data_and_errors() -> None:
    start = threading.Barrier(THREADS)
    wrong: list[str] = []

    def run(thread: int) -> None:
        start.wait()
        for r in range(ROUNDS):
            problem = check(thread * ROUNDS + r)
            if problem:
                wrong.append(problem)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert wrong == []


def test_the_fields_are_built_once() -> None:
    assert ChargeCreateSerializer(data={}).fields is ChargeCreateSerializer(data={}).fields
