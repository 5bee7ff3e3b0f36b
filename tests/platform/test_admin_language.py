"""The back office speaks one language: every page staff can open (each
model's list, its add page and a record's page, with records on them so the
columns show) is crawled as a superuser, and no English word of an admin's
vocabulary is left in what the page shows."""

from __future__ import annotations

import datetime as dt
import html
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from accounts.models import Account
from core.plural import plural
from payments.models import ChargeStatus, ChargeTransition
from payments.services import charge_transition
from tests import factories
from tests.helpers import staff_login
from webhooks.services import endpoint_create

pytestmark = pytest.mark.django_db

#: Words of an admin's English vocabulary (the ones this back office's models
#: and django-axes would show untranslated). Loanwords staff use as they are
#: (Pix, webhook, endpoint, HTTP, CSV, status) are not in it.
ENGLISH = re.compile(
    r"\b(Created|Updated|Amount|Is active|Active|Account|Name|Description|Date|Select|Change|Delete|Add|Save"
    r"|History|Filter|Search|Acquirer|Event|Delivery|Withdrawal|Charge|Ledger|Balance|Key|Type|Reason|Attempts?"
    r"|Purpose|Priority|Received|Processed|Payload|Headers|Secret|Label|Permission|Last used|True|False|None"
    r"|Unknown|Yes|No|Enabled|Adapter|Options|Paid|Pending|Failed|Succeeded|Approved|Canceled|Refunded|Next"
    r"|Outcome|Latency|Number|Error|Kind|Reference|Action|State|Requested|Decided|Source|Actor|Slot|Circuit"
    r"|Health|created at|is active|attempt time|Can (?:add|change|delete|view))\b"
)


def shown(page: str) -> str:
    """The text a staff member reads: no scripts, styles or markup."""
    page = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", page)
    return html.unescape(re.sub(r"(?s)<[^>]+>", " ", page))


@pytest.fixture
def pages(client: Client, django_user_model: Any) -> list[str]:
    factories.WithdrawalFactory()
    factories.ChargeAttemptFactory()
    account = Account.objects.first()
    assert account is not None
    endpoint_create(account=account, url="https://loja.example/webhooks", description="loja")
    paid = factories.ChargeFactory(account=account)
    charge_transition(charge_id=paid.pk, to_status=ChargeStatus.PAID, source=ChargeTransition.Source.SANDBOX)
    _recurrence_with_a_cycle(account)
    staff_login(client, django_user_model.objects.create_superuser("root", "root@example.com", "x"))
    urls = [reverse("admin:index")]
    for model in admin.site._registry:
        opts = model._meta
        urls += [
            reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
            reverse(f"admin:{opts.app_label}_{opts.model_name}_add"),
        ]
        record = model._default_manager.first()
        if record is not None:
            urls.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[record.pk]))
    return urls


def _recurrence_with_a_cycle(account: Account) -> None:
    """A Pix Automático recurrence and a failed cycle: their pages and the cycles inline show their columns."""
    from recurrences.models import Cycle, Recurrence

    recurrence = Recurrence.objects.create(
        account=account,
        acquirer=factories.AcquirerFactory(),
        id_rec="RR1234567820261129abcdefghijk",
        journey="push",
        terms={
            "vinculo": {"contrato": "CT-1", "devedor": {"cpf": "52998224725", "nome": "Maria"}},
            "calendario": {"dataInicial": "2026-01-10", "periodicidade": "MENSAL"},
            "valor": {"valorRec": "89.90"},
            "politicaRetentativa": "PERMITE_3R_7D",
        },
        debtor_document="52998224725",
        contract="CT-1",
        payer_bank={"ispb": "60701190", "branch": "1", "account": "123"},
    )
    Cycle.objects.create(
        recurrence=recurrence, index=0, due_date=dt.date(2026, 1, 10), amount=8990, status="failed", txid="t" * 35
    )


def test_every_back_office_page_reads_in_pt_br(client: Client, pages: list[str]) -> None:
    english: dict[str, list[str]] = {}
    for url in pages:
        response = client.get(url)
        if response.status_code == 403:  # no add page for records only services create
            continue
        assert response.status_code == 200, url
        words = sorted({match.group(0) for match in ENGLISH.finditer(shown(response.content.decode()))})
        if words:
            english[url] = words
    assert english == {}


def test_permissions_are_named_in_pt_br_even_when_created_in_english() -> None:
    """Django names default permissions "Can add …" and never renames a row
    that exists: after a migrate every one reads in pt-BR."""
    from django.contrib.auth.models import Permission
    from django.core.management import call_command

    stale = Permission.objects.get(content_type__app_label="accounts", codename="view_account")
    stale.name = "Can view account"
    stale.save(update_fields=["name"])
    call_command("migrate", verbosity=0)
    names = dict(Permission.objects.filter(content_type__app_label="accounts").values_list("codename", "name"))
    assert names["view_account"] == "Pode ver conta"
    assert names["add_account"] == "Pode adicionar conta"
    english = list(Permission.objects.filter(name__startswith="Can ").values_list("name", flat=True))
    assert english == []


def test_counted_nouns_agree_with_their_count() -> None:
    assert plural(1, "{n} saque ignorado", "{n} saques ignorados") == "1 saque ignorado"
    assert plural(3, "{n} saque ignorado", "{n} saques ignorados") == "3 saques ignorados"
    # Portuguese, as Django's own pt_BR catalogue: 0 takes the singular.
    assert plural(0, "{n} saque ignorado", "{n} saques ignorados") == "0 saque ignorado"


def test_no_message_hedges_its_plural() -> None:
    """Staff read "2 saques ignorados", never "2 saque(s) ignorado(s)": every
    counted message goes through core.plural."""
    root = Path(__file__).resolve().parents[2]
    hedged = re.compile(r"[a-zà-ú]\((?:s|es|ões)\)")
    sources = [
        path
        for path in [*root.glob("*/**/*.py"), *root.glob("templates/**/*.html"), *root.glob("*/templates/**/*.html")]
        if not {"tests", "bench", ".venv", "migrations"} & set(path.relative_to(root).parts)
    ]
    found = [
        f"{path.relative_to(root)}:{number}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if hedged.search(line.replace("http(s)", "")) and not line.lstrip().startswith("#")
    ]
    assert found == []
