"""The back office's infractions: the queue staff work through before each
defence deadline, the defence sent on the account's behalf, and the
requests a second staff member decides (register an infraction an acquirer
without an infractions API reported by other means, accept a return
without defence, close one as rejected). Nothing moves before an approval."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.exceptions import ApprovalRefused
from accounts.models import Account
from acquirers.adapters.base import InfractionStatus as RecordStatus
from acquirers.models import Acquirer
from infractions import exceptions as err
from infractions.approvals import infraction_request_action, infraction_request_register
from infractions.choices import InfractionSource, InfractionStatus
from infractions.defenses import Attachment, infraction_defend
from infractions.models import Infraction, InfractionRequest
from payments.models import Charge, ChargeStatus
from tests.helpers import admin_action, admin_messages, staff_login, staff_user
from tests.infractions.conftest import paid_charge, reported

pytestmark = pytest.mark.django_db

INFRACTIONS = reverse("admin:infractions_infraction_changelist")
REQUESTS = reverse("admin:infractions_infractionrequest_changelist")
REGISTER = reverse("admin:infractions_infractionrequest_add")
Money = Callable[[Account], tuple[int, list[tuple[str, int]]]]


def change(infraction: Infraction) -> str:
    return reverse("admin:infractions_infraction_change", args=[infraction.pk])


def ask(client: Client, infraction: Infraction, kind: str, **data: str) -> Any:
    url = reverse("admin:infractions_infraction_request", args=[infraction.pk, kind])
    return client.post(url, {"reason": "adquirente informou por e-mail", **data}, follow=True)


def decide(client: Client, action: str, pending: InfractionRequest) -> Any:
    return admin_action(client, REQUESTS, action, [pending.pk], reason="conferido com a adquirente")


def listed_ids(page: str) -> list[str]:
    """The infractions' full ids in the list's order (each row's id cell carries it as its title)."""
    return re.findall(r'<span title="([0-9a-f-]{36})">', page)


# --------------------------------------------------------------------------- the queue


def test_queue_lists_open_ones_first_nearest_deadline_first(
    admin_client: Client, account: Account, with_api: Acquirer, without_api: Acquirer
) -> None:
    later = reported(with_api, paid_charge(account, with_api), deadline=dt.timedelta(days=5))
    closed = reported(with_api, paid_charge(account, with_api), status=RecordStatus.REJECTED)
    sooner = reported(with_api, paid_charge(account, with_api), deadline=dt.timedelta(hours=5))
    no_deadline = reported(without_api, paid_charge(account, without_api), deadline=None)
    unmatched = reported(with_api, None, deadline=dt.timedelta(days=2))

    page = admin_client.get(INFRACTIONS).content.decode()

    assert listed_ids(page) == [str(i.pk) for i in (sooner, unmatched, later, no_deadline, closed)]
    assert "R$ 100,00" in page  # amounts in reais
    assert "Não enviada" in page
    assert "(em 4 h)" in page or "(em 5 h)" in page  # the near deadline stands out

    def filtered(**params: Any) -> list[str]:
        return listed_ids(admin_client.get(INFRACTIONS, params).content.decode())

    assert filtered(status__exact="rejected") == [str(closed.pk)]
    assert filtered(acquirer__id__exact=without_api.pk) == [str(no_deadline.pk)]
    assert filtered(queue="deadline_near") == [str(sooner.pk)]
    assert filtered(queue="open") == [str(i.pk) for i in (sooner, unmatched, later, no_deadline)]
    assert filtered(q=sooner.e2e_id) == [str(sooner.pk)]


def test_an_infractions_page_shows_its_money_and_lets_nothing_be_typed(
    admin_client: Client, account: Account, with_api: Acquirer
) -> None:
    infraction = reported(with_api, paid_charge(account, with_api), blocked=4_000)
    page = admin_client.get(change(infraction)).content.decode()
    assert "R$ 40,00" in page
    assert "R$ 100,00" in page
    for field in ("amount", "blocked_amount", "hold", "returned_amount", "debited_amount", "status"):
        assert f'name="{field}"' not in page
    assert admin_client.post(change(infraction), {"amount": "1"}).status_code == 403
    assert Infraction.objects.get(pk=infraction.pk).amount == 10_000


# --------------------------------------------------------------------------- the defence on the account's behalf


def test_operations_sends_the_defence_on_the_accounts_behalf(
    staff_member: Callable[[str, str], Client], account: Account, with_api: Acquirer
) -> None:
    infraction = reported(with_api, paid_charge(account, with_api))
    operations = staff_member("operations", "olivia")
    assert "Enviar defesa em nome da conta" in operations.get(change(infraction)).content.decode()
    url = reverse("admin:infractions_infraction_defend", args=[infraction.pk])
    receipt = SimpleUploadedFile("entrega.pdf", b"%PDF-1.4 entregue", content_type="application/pdf")
    defence = {"text": "Produto entregue; segue comprovante.", "attachments": [receipt]}
    response = operations.post(url, defence, follow=True)

    assert "Defesa registrada em nome da conta" in " ".join(admin_messages(response))
    infraction.refresh_from_db()
    assert (infraction.defense_text, infraction.defense_by) == ("Produto entregue; segue comprovante.", "olivia")
    assert [(a.name, a.size) for a in infraction.attachments.all()] == [("entrega.pdf", 17)]
    assert LogEntry.objects.filter(object_id=str(infraction.pk), user__username="olivia").exists()

    # A second one is refused with the service's reason, nothing changed.
    again = operations.post(url, {"text": "outra"}, follow=True)
    assert err.DEFENSE_ALREADY_SENT in admin_messages(again)
    infraction.refresh_from_db()
    assert infraction.defense_text == "Produto entregue; segue comprovante."


def test_the_defence_page_refuses_a_closed_infraction_and_support(
    staff_member: Callable[[str, str], Client], account: Account, with_api: Acquirer
) -> None:
    closed = reported(with_api, paid_charge(account, with_api), status=RecordStatus.CANCELED)
    url = reverse("admin:infractions_infraction_defend", args=[closed.pk])
    response = staff_member("operations", "olivia").post(url, {"text": "defesa"}, follow=True)
    assert err.DEFENSE_CLOSED in admin_messages(response)
    assert Infraction.objects.get(pk=closed.pk).defense_submitted_at is None

    support = staff_member("support", "sergio")
    assert support.get(url).status_code == 403
    assert support.get(INFRACTIONS).status_code == 200  # support sees the queue


def test_the_list_action_opens_the_defence_page(admin_client: Client, account: Account, with_api: Acquirer) -> None:
    infraction = reported(with_api, paid_charge(account, with_api))
    response = admin_client.post(INFRACTIONS, {"action": "defend", "_selected_action": [str(infraction.pk)]})
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:infractions_infraction_defend", args=[infraction.pk])


# --------------------------------------------------------------------------- register (acquirer without the API)


def register_form(acquirer: Acquirer, charge: Charge, **overrides: str) -> dict[str, Any]:
    return {
        "acquirer": acquirer.pk,
        "external_id": "OFICIO-2026-77",
        "e2e_id": charge.e2e_id,
        "amount": "100,00",
        "blocked_amount": "100,00",
        "infraction_reason": "Fraude: conta do pagador invadida",
        "defense_deadline": (timezone.localtime() + dt.timedelta(days=6)).strftime("%d/%m/%Y %H:%M"),
        "reason": "Ofício da adquirente recebido por e-mail em 28/11",
        **overrides,
    }


def test_registering_on_an_acquirer_without_the_api_blocks_money_only_after_approval(
    staff_member: Callable[[str, str], Client], account: Account, without_api: Acquirer, money: Money
) -> None:
    charge = paid_charge(account, without_api)
    before = money(account)
    maker = staff_member("operations", "otavio")

    response = maker.post(REGISTER, register_form(without_api, charge), follow=True)

    assert "nada foi bloqueado" in " ".join(admin_messages(response))
    pending = InfractionRequest.objects.get()
    assert (pending.kind, pending.state, pending.amount) == ("register", "pending", 10_000)
    assert not Infraction.objects.exists()
    assert money(account) == before
    assert Charge.objects.get(pk=charge.pk).status == ChargeStatus.PAID

    # Operations may ask, not decide.
    assert decide(maker, "approve_requests", pending).status_code == 200
    assert InfractionRequest.objects.get().state == "pending"
    assert money(account) == before

    decide(staff_member("finance", "fatima"), "approve_requests", pending)

    pending.refresh_from_db()
    infraction = Infraction.objects.get()
    assert pending.decided_by == User.objects.get(username="fatima")
    assert (pending.state, pending.infraction_id) == ("approved", infraction.pk)
    assert (infraction.source, infraction.external_id, infraction.hold) == (
        InfractionSource.STAFF,
        "OFICIO-2026-77",
        charge.liquid_amount,
    )
    assert Charge.objects.get(pk=charge.pk).status == ChargeStatus.CHARGEBACK
    balance, entries = money(account)
    assert balance == before[0] - charge.liquid_amount
    assert entries[-1] == ("med_hold", -charge.liquid_amount)


def test_the_maker_never_decides(
    staff_member: Callable[[str, str], Client], account: Account, without_api: Acquirer, money: Money
) -> None:
    charge = paid_charge(account, without_api)
    staff_member("operations", "otavio").post(REGISTER, register_form(without_api, charge))
    pending = InfractionRequest.objects.get()
    # Someone with both halves (finance and operations) asked: they still cannot approve.
    both = User.objects.get(username="otavio")
    both.groups.add(Group.objects.get(name="finance"))
    response = decide(staff_login(Client(), both), "approve_requests", pending)
    assert any("foi feito por você" in m for m in admin_messages(response))
    assert InfractionRequest.objects.get().state == "pending"
    assert not Infraction.objects.exists()
    # And the database refuses it too.
    with pytest.raises(IntegrityError), transaction.atomic():
        InfractionRequest.objects.filter(pk=pending.pk).update(
            state="approved", decided_by=both, decided_at=timezone.now()
        )


def test_a_rejected_registration_changes_nothing(
    staff_member: Callable[[str, str], Client], account: Account, without_api: Acquirer, money: Money
) -> None:
    charge = paid_charge(account, without_api)
    before = money(account)
    staff_member("operations", "otavio").post(REGISTER, register_form(without_api, charge))
    pending = InfractionRequest.objects.get()
    decide(staff_member("finance", "fatima"), "reject_requests", pending)
    assert InfractionRequest.objects.get().state == "rejected"
    assert not Infraction.objects.exists()
    assert money(account) == before


def test_an_acquirer_with_the_api_is_not_registered_by_hand(
    staff_member: Callable[[str, str], Client], account: Account, with_api: Acquirer
) -> None:
    charge = paid_charge(account, with_api)
    operations = staff_member("operations", "otavio")
    assert f'value="{with_api.pk}"' not in operations.get(REGISTER).content.decode()  # not even offered
    response = operations.post(REGISTER, register_form(with_api, charge))
    assert response.status_code == 200  # the form again, with why
    assert list(response.context["form"].errors) == ["acquirer"]
    with pytest.raises(ApprovalRefused, match="informa as infrações pela API"):
        infraction_request_register(
            acquirer=with_api,
            external_id="X1",
            e2e_id=charge.e2e_id or "",
            amount=100,
            blocked_amount=100,
            infraction_reason="",
            defense_deadline=None,
            requested_by=User.objects.get(username="otavio"),
            reason="e-mail",
        )
    assert not InfractionRequest.objects.exists()


# --------------------------------------------------------------------------- accept the return, close as rejected


def test_accepting_the_return_at_an_acquirer_with_the_api_only_waives_the_defence(
    staff_member: Callable[[str, str], Client], account: Account, with_api: Acquirer, money: Money
) -> None:
    infraction = reported(with_api, paid_charge(account, with_api))
    before = money(account)
    ask(staff_member("operations", "otavio"), infraction, "accept_return")
    pending = InfractionRequest.objects.get()
    assert Infraction.objects.get(pk=infraction.pk).defense_waived_at is None

    decide(staff_member("finance", "fatima"), "approve_requests", pending)

    infraction.refresh_from_db()
    assert InfractionRequest.objects.get().state == "approved"
    assert infraction.defense_waived_at is not None
    assert (infraction.status, infraction.closed_at) == (InfractionStatus.OPEN, None)  # the acquirer closes it
    assert money(account) == before
    with pytest.raises(err.DefenseNotAllowed):
        infraction_defend(infraction_id=infraction.pk, text="tarde demais", by="loja", account=account)


def test_accepting_the_return_at_an_acquirer_without_the_api_closes_it_with_the_return(
    staff_member: Callable[[str, str], Client], account: Account, without_api: Acquirer, money: Money
) -> None:
    charge = paid_charge(account, without_api)
    infraction = reported(without_api, charge)
    before = money(account)
    response = ask(staff_member("operations", "otavio"), infraction, "accept_return", returned_amount="60,00")
    assert "nada mudou ainda" in " ".join(admin_messages(response))
    assert money(account) == before

    decide(staff_member("finance", "fatima"), "approve_requests", InfractionRequest.objects.get())

    infraction.refresh_from_db()
    assert (infraction.status, infraction.returned_amount, infraction.debited_amount) == ("accepted", 6_000, 6_000)
    assert infraction.defense_waived_at is not None
    assert Charge.objects.get(pk=charge.pk).status == ChargeStatus.REFUNDED
    balance, entries = money(account)
    assert entries[len(before[1]) :] == [("med_hold_release", charge.liquid_amount), ("med_return", -6_000)]
    assert balance == before[0] + charge.liquid_amount - 6_000


def test_closing_as_rejected_releases_the_block_after_approval_only(
    staff_member: Callable[[str, str], Client], account: Account, without_api: Acquirer, money: Money
) -> None:
    charge = paid_charge(account, without_api)
    infraction = reported(without_api, charge)
    before = money(account)
    ask(staff_member("operations", "otavio"), infraction, "close_rejected")
    pending = InfractionRequest.objects.get()
    assert money(account) == before
    assert Infraction.objects.get(pk=infraction.pk).closed_at is None

    decide(staff_member("finance", "fatima"), "approve_requests", pending)

    infraction.refresh_from_db()
    assert (infraction.status, infraction.hold_released) == ("rejected", True)
    assert Charge.objects.get(pk=charge.pk).status == ChargeStatus.PAID
    assert money(account)[0] == before[0] + charge.liquid_amount
    assert LogEntry.objects.filter(object_id=str(infraction.pk), user__username="fatima").exists()


def test_a_rejected_close_changes_nothing(
    staff_member: Callable[[str, str], Client], account: Account, without_api: Acquirer, money: Money
) -> None:
    infraction = reported(without_api, paid_charge(account, without_api))
    before = money(account)
    ask(staff_member("operations", "otavio"), infraction, "accept_return", returned_amount="100,00")
    decide(staff_member("finance", "fatima"), "reject_requests", InfractionRequest.objects.get())
    infraction.refresh_from_db()
    assert (infraction.status, infraction.defense_waived_at) == ("open", None)
    assert money(account) == before


def test_an_acquirer_with_the_api_is_not_closed_by_hand(
    staff_member: Callable[[str, str], Client], account: Account, with_api: Acquirer
) -> None:
    infraction = reported(with_api, paid_charge(account, with_api))
    operations = staff_member("operations", "otavio")
    assert "Encerrar como rejeitada" not in operations.get(change(infraction)).content.decode()
    response = ask(operations, infraction, "close_rejected")
    assert any("informa as infrações pela API" in m for m in admin_messages(response))
    assert not InfractionRequest.objects.exists()


def test_an_infraction_that_moved_on_fails_the_approval_with_nothing_changed(
    staff_member: Callable[[str, str], Client], account: Account, without_api: Acquirer, money: Money
) -> None:
    infraction = reported(without_api, paid_charge(account, without_api))
    ask(staff_member("operations", "otavio"), infraction, "close_rejected")
    # Meanwhile the acquirer's letter says it was canceled, and that was applied.
    reported(without_api, infraction.charge, status=RecordStatus.CANCELED, external_id=infraction.external_id)
    after_cancel = money(account)

    decide(staff_member("finance", "fatima"), "approve_requests", InfractionRequest.objects.get())

    pending = InfractionRequest.objects.get()
    assert (pending.state, pending.outcome) == ("failed", "Esta infração já foi encerrada.")
    assert Infraction.objects.get(pk=infraction.pk).status == "canceled"
    assert money(account) == after_cancel


def test_one_open_request_per_infraction(account: Account, without_api: Acquirer) -> None:
    infraction = reported(without_api, paid_charge(account, without_api))
    maker = staff_user("operations", "otavio")
    infraction_request_action(infraction=infraction, kind="close_rejected", requested_by=maker, reason="ofício")
    with pytest.raises(ApprovalRefused, match="Já existe um pedido"):
        infraction_request_action(
            infraction=infraction, kind="accept_return", requested_by=maker, reason="ofício", returned_amount=1
        )
    with pytest.raises(ApprovalRefused, match="Sem permissão"):
        infraction_request_action(
            infraction=infraction, kind="close_rejected", requested_by=staff_user("support", "s"), reason="x"
        )


# --------------------------------------------------------------------------- who may do what


def test_each_group_holds_its_half(db: Any) -> None:
    def may(group: str) -> set[str]:
        user = staff_user(group, f"{group}-member")
        return {
            codename
            for codename in ("defend_infraction", "request_infraction_action", "approve_infraction_action")
            if user.has_perm(f"infractions.{codename}")
        } | ({"view"} if user.has_perm("infractions.view_infraction") else set())

    assert may("support") == {"view"}
    assert may("operations") == {"view", "defend_infraction", "request_infraction_action"}
    assert may("finance") == {"view", "approve_infraction_action"}


def test_a_requests_page_offers_the_decision_to_another_approver_only(
    staff_member: Callable[[str, str], Client], account: Account, without_api: Acquirer
) -> None:
    infraction = reported(without_api, paid_charge(account, without_api))
    maker = staff_member("operations", "otavio")
    ask(maker, infraction, "close_rejected")
    pending = InfractionRequest.objects.get()
    url = reverse("admin:infractions_infractionrequest_change", args=[pending.pk])

    assert "Aprovar e aplicar" not in maker.get(url).content.decode()
    page = staff_member("finance", "fatima").get(url).content.decode()
    assert "Aprovar e aplicar" in page
    assert str(infraction.charge_id) in page  # the charge it would release, for the approver to check
    # The infraction's page lists the request and no longer offers another one.
    infraction_page = maker.get(change(infraction)).content.decode()
    assert f"#{pending.pk}" in infraction_page
    assert "Pedir: Encerrar como rejeitada" not in infraction_page


def test_every_infraction_page_reads_in_pt_br(
    admin_client: Client, account: Account, without_api: Acquirer, with_api: Acquirer
) -> None:
    from tests.platform.test_admin_language import ENGLISH, shown

    defended = reported(with_api, paid_charge(account, with_api))
    infraction_defend(
        infraction_id=defended.pk,
        text="entregue",
        by="loja",
        account=account,
        attachments=[Attachment(name="nota.pdf", content_type="application/pdf", content=b"%PDF")],
    )
    infraction = reported(without_api, paid_charge(account, without_api))
    ask(admin_client, infraction, "close_rejected")
    pending = InfractionRequest.objects.get()
    other = reported(without_api, paid_charge(account, without_api))
    urls = [
        INFRACTIONS,
        REQUESTS,
        REGISTER,
        change(defended),
        change(infraction),
        reverse("admin:infractions_infractionrequest_change", args=[pending.pk]),
        reverse("admin:infractions_infraction_defend", args=[infraction.pk]),
        reverse("admin:infractions_infraction_request", args=[other.pk, "accept_return"]),
        reverse("admin:index"),
    ]
    for url in urls:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        assert ENGLISH.findall(shown(response.content.decode())) == [], url


def test_a_defence_for_an_acquirer_without_the_api_says_staff_deliver_it(
    admin_client: Client, account: Account, without_api: Acquirer
) -> None:
    infraction = reported(without_api, paid_charge(account, without_api))
    url = reverse("admin:infractions_infraction_defend", args=[infraction.pk])
    response = admin_client.post(url, {"text": "Produto entregue."}, follow=True)
    assert any("não recebe defesas pela API: entregue-a pelo canal dela" in m for m in admin_messages(response))
    assert Infraction.objects.get(pk=infraction.pk).defense_text == "Produto entregue."


def test_a_defence_whose_files_are_too_big_is_not_recorded(
    admin_client: Client, account: Account, with_api: Acquirer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infractions.admin import pages

    monkeypatch.setattr(pages, "DEFENSE_MAX_BYTES", 1024 * 1024)
    infraction = reported(with_api, paid_charge(account, with_api))
    url = reverse("admin:infractions_infraction_defend", args=[infraction.pk])
    big = SimpleUploadedFile("video.mp4", b"0" * (1024 * 1024 + 1), content_type="video/mp4")
    response = admin_client.post(url, {"text": "segue o vídeo", "attachments": [big]})
    assert response.status_code == 200
    assert response.context["form"].errors["attachments"] == ["Os anexos somam mais de 1 MB."]
    infraction.refresh_from_db()
    assert (infraction.defense_submitted_at, infraction.attachments.count()) == (None, 0)
