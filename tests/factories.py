"""factory-boy factories. Accounts go through ``account_create`` so they get
their balance row exactly as production accounts do."""

from __future__ import annotations

import datetime as dt
from typing import Any

import factory
from django.utils import timezone

from accounts.models import Account
from accounts.services import account_create
from acquirers.models import Acquirer


class AccountFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Account

    name = factory.Sequence(lambda n: f"Loja {n} Ltda")
    document = "11222333000181"
    status = Account.Status.APPROVED

    @classmethod
    def _create(cls, model_class: type[Account], *args: Any, **kwargs: Any) -> Account:
        return account_create(**kwargs)


class AcquirerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Acquirer
        django_get_or_create = ("key",)

    key = factory.Sequence(lambda n: f"acq_{n}")
    name = factory.LazyAttribute(lambda o: o.key.title())
    nominal = factory.LazyAttribute(lambda o: f"{o.name} Pagamentos S.A.")
    adapter = "sandbox"
    options = factory.LazyFunction(lambda: {"charge": "ok", "payout": "ok"})


# ---- records for read-side tests (observability overview): rows as they
# stand in the database, created_at placed where the test needs it.


class _PlacedInTime(factory.django.DjangoModelFactory):
    """``created_at=...`` is written after the insert (auto_now_add ignores it)."""

    class Meta:
        abstract = True

    @classmethod
    def _create(cls, model_class: type[Any], *args: Any, **kwargs: Any) -> Any:
        created_at = kwargs.pop("created_at", None)
        record = super()._create(model_class, *args, **kwargs)
        if created_at is not None:
            model_class.objects.filter(pk=record.pk).update(created_at=created_at)
            record.created_at = created_at
        return record


class ChargeFactory(_PlacedInTime):
    class Meta:
        model = "payments.Charge"

    account = factory.SubFactory(AccountFactory)
    acquirer = factory.SubFactory(AcquirerFactory)
    amount = 10_000
    platform_tax = factory.LazyAttribute(lambda o: o.amount // 100)
    liquid_amount = factory.LazyAttribute(lambda o: o.amount - o.platform_tax)
    status = "pending"
    txid = factory.Sequence(lambda n: f"txoverview{n:025d}")
    emv = "000201"
    buyer_name = "Fulano de Tal"
    buyer_document = "52998224725"
    buyer_phone = "11999998888"
    expires_at = factory.LazyFunction(lambda: timezone.now() + dt.timedelta(hours=1))


class ChargeAttemptFactory(_PlacedInTime):
    class Meta:
        model = "payments.ChargeAttempt"

    charge = factory.SubFactory(ChargeFactory)
    account = factory.LazyAttribute(lambda o: o.charge.account)
    acquirer = factory.LazyAttribute(lambda o: o.charge.acquirer)
    position = 1
    outcome = "ok"
    latency_ms = 100


class WithdrawalFactory(_PlacedInTime):
    class Meta:
        model = "withdrawals.Withdrawal"

    account = factory.SubFactory(AccountFactory)
    amount = 5_000
    fee = 100
    discount_fee = False
    total_debit = factory.LazyAttribute(lambda o: o.amount + o.fee)
    liquid_amount = factory.LazyAttribute(lambda o: o.amount)
    pix_key_type = "cpf"
    pix_key = "52998224725"
    status = "pending"
    idempotency_id = factory.Sequence(lambda n: f"wdoverview{n:025d}")
