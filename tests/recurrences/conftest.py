"""What the recurrence API tests share: an account with an ``all``
credential, and an acquirer holding recurrences through a test adapter kept
in memory (``RecAdapter``): it answers ``POST /rec`` as a PSP does (an
``idRec`` and, for the QR journey, a BR Code and its location), records
every call, and fails on demand (``options["rec"]``: ``ok`` or ``fail``)."""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest
from rest_framework.test import APIClient

from accounts.models import Account
from acquirers import adapters, brcode
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerDeclined,
    ChargeRequest,
    ChargeResult,
    CycleChargeRequest,
    CycleChargeState,
    InvalidNotification,
    Notification,
    PushRequest,
    PushSent,
    RecurrenceCreated,
    RecurrenceRequest,
    RecurrenceState,
)
from acquirers.adapters.recurrence import JOURNEY_QR
from acquirers.models import Acquirer
from tests.due_charges.helpers import client_of
from tests.factories import AccountFactory, AcquirerFactory


@adapters.register
class RecAdapter(AcquirerAdapter):
    """Pix Automático in memory (see the module's docstring)."""

    name = "test_rec"
    # A cash-in acquirer (the chain offers recurrences to those only), whose charges are not in these tests.
    supports_payout = False
    supports_recurrence = True
    calls: ClassVar[list[str]] = []
    recs: ClassVar[dict[str, dict[str, Any]]] = {}

    def _called(self, what: str) -> None:
        self.calls.append(what)
        if self.options.get("rec") == "fail":
            raise AcquirerDeclined(f"{what}: refused (test)")

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        raise AcquirerDeclined("not in these tests")

    def create_recurrence(self, request: RecurrenceRequest) -> RecurrenceCreated:
        self._called("create_recurrence")
        letter = "R" if request.terms["politicaRetentativa"] == "PERMITE_3R_7D" else "N"
        id_rec = f"R{letter}12345678{dt.date.today():%Y%m%d}{secrets.token_hex(6)[:11]}"
        self.recs[id_rec] = {"status": "CRIADA", "terms": dict(request.terms)}
        if request.journey != JOURNEY_QR:
            return RecurrenceCreated(id_rec=id_rec, status="CRIADA")
        location = f"pix.test.local/qr/v2/rec/{id_rec}"
        emv = brcode.encode_dynamic(location=location, amount=None, merchant_name="LOJA", merchant_city="SAO PAULO")
        return RecurrenceCreated(id_rec=id_rec, status="CRIADA", location=location, emv=emv)

    def find_recurrence(self, *, debtor_document: str, contract: str, since: dt.datetime) -> RecurrenceState | None:
        self._called("find_recurrence")
        return None

    def recurrence_status(self, id_rec: str) -> RecurrenceState:
        self._called("recurrence_status")
        return RecurrenceState(id_rec=id_rec, status=self.recs[id_rec]["status"])

    def request_authorisation(self, request: PushRequest) -> PushSent:
        self._called("request_authorisation")
        return PushSent(id_solic_rec="SC" + request.id_rec[2:], status="CRIADA")

    def cancel_recurrence(self, id_rec: str) -> RecurrenceState:
        self._called("cancel_recurrence")
        self.recs[id_rec]["status"] = "CANCELADA"
        return RecurrenceState(id_rec=id_rec, status="CANCELADA", cancelled_by="USUARIO_RECEBEDOR")

    def create_cycle_charge(self, request: CycleChargeRequest) -> CycleChargeState:
        self._called("create_cycle_charge")
        return CycleChargeState(txid=request.txid, status="ATIVA", amount=request.amount)

    def cycle_charge_status(self, txid: str) -> CycleChargeState:
        raise AcquirerDeclined("not in these tests")

    def cancel_cycle_charge(self, txid: str) -> CycleChargeState:
        raise AcquirerDeclined("not in these tests")

    def retry_cycle_charge(self, txid: str, on: dt.date) -> CycleChargeState:
        raise AcquirerDeclined("not in these tests")

    def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
        raise InvalidNotification("not in these tests")


@pytest.fixture(autouse=True)
def _fresh_adapter() -> None:
    RecAdapter.calls.clear()
    RecAdapter.recs.clear()


@pytest.fixture
def acquirer(db: Any) -> Acquirer:
    return AcquirerFactory(key="rec_ok", adapter=RecAdapter.name, options={}, default_priority=1)


@pytest.fixture
def account(db: Any) -> Account:
    return AccountFactory()


@pytest.fixture
def api(account: Account) -> APIClient:
    return client_of(account)
