"""factory-boy factories. Accounts go through ``account_create`` so they get
their balance row exactly as production accounts do."""

from __future__ import annotations

from typing import Any

import factory

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
