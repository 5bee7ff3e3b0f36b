"""Back office for webhooks: endpoints, events, deliveries, resending."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account
from webhooks import readable
from webhooks.admin.endpoints import REF_TAKEN
from webhooks.models import EventType, WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent
from webhooks.services import endpoint_create

pytestmark = pytest.mark.django_db

ENDPOINTS = reverse("admin:webhooks_webhookendpoint_changelist")
EVENTS = reverse("admin:webhooks_webhookevent_changelist")


def make_event(account: Account, endpoint: WebhookEndpoint, status: str) -> WebhookEvent:
    event = WebhookEvent.objects.create(
        account=account, event_type=EventType.TRANSACTION, record_id=account.pk, status="paid", data={"id": "x"}
    )
    WebhookDelivery.objects.create(
        event=event,
        endpoint=endpoint,
        url=endpoint.url,
        status=status,
        attempt_count=3,
        next_attempt_at=timezone.now() if status == "pending" else None,
    )
    return event


def test_health_filter_shows_failing_and_disabled(admin_client: Client, account: Account) -> None:
    healthy = endpoint_create(account=account, url="https://a.example/hook").endpoint
    failing = endpoint_create(account=account, url="https://b.example/hook").endpoint
    disabled = endpoint_create(account=account, url="https://c.example/hook").endpoint
    WebhookEndpoint.objects.filter(pk=failing.pk).update(failing_since=timezone.now() - dt.timedelta(hours=3))
    WebhookEndpoint.objects.filter(pk=disabled.pk).update(is_active=False, disabled_reason="410 Gone")

    def listed(health: str) -> set[str]:
        page = admin_client.get(ENDPOINTS, {"health": health}).content.decode()
        return {e.url for e in (healthy, failing, disabled) if e.url in page}

    assert listed("failing") == {failing.url}
    assert listed("disabled") == {disabled.url}
    assert listed("healthy") == {healthy.url}


def test_secret_is_never_shown_on_the_change_page(admin_client: Client, account: Account) -> None:
    created = endpoint_create(account=account, url="https://a.example/hook")
    page = admin_client.get(reverse("admin:webhooks_webhookendpoint_change", args=[created.endpoint.pk]))
    assert page.status_code == 200
    assert created.secret not in page.content.decode()


def test_rotate_shows_the_new_secret_once(admin_client: Client, account: Account) -> None:
    created = endpoint_create(account=account, url="https://a.example/hook")
    posted = admin_client.post(ENDPOINTS, {"action": "rotate_secret", "_selected_action": [str(created.endpoint.pk)]})
    endpoint = WebhookEndpoint.objects.get(pk=created.endpoint.pk)
    assert endpoint.secret != created.secret
    assert endpoint.previous_secret == created.secret
    # Post/Redirect/Get: the POST answers with a redirect, the page after it shows the secret.
    assert posted.status_code == 303
    assert endpoint.secret not in posted.content.decode()
    response = admin_client.get(posted["Location"])
    assert endpoint.secret in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    later = admin_client.get(reverse("admin:webhooks_webhookendpoint_change", args=[endpoint.pk])).content.decode()
    assert endpoint.secret not in later
    # Reloading the page rotates nothing again and shows nothing.
    reloaded = admin_client.get(posted["Location"], follow=True).content.decode()
    assert endpoint.secret not in reloaded
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).secret == endpoint.secret


def test_adding_an_endpoint_shows_its_secret(admin_client: Client, account: Account) -> None:
    response = admin_client.post(
        reverse("admin:webhooks_webhookendpoint_add"),
        {
            "account": str(account.pk),
            "ref": "",
            "url": "https://new.example/hook",
            "description": "",
            "is_active": "on",
        },
    )
    endpoint = WebhookEndpoint.objects.get(url="https://new.example/hook")
    assert response.status_code == 303
    assert endpoint.secret in admin_client.get(response["Location"]).content.decode()
    assert endpoint.secret not in admin_client.get(response["Location"], follow=True).content.decode()


def test_disable_and_enable(admin_client: Client, account: Account) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    pending = make_event(account, endpoint, "pending")
    admin_client.post(ENDPOINTS, {"action": "disable", "_selected_action": [str(endpoint.pk)]})
    endpoint.refresh_from_db()
    assert not endpoint.is_active
    assert "admin" in endpoint.disabled_reason
    assert pending.deliveries.get().status == "failed"

    admin_client.post(ENDPOINTS, {"action": "enable", "_selected_action": [str(endpoint.pk)]})
    endpoint.refresh_from_db()
    assert endpoint.is_active
    assert endpoint.disabled_reason == ""


def test_resend_restarts_every_delivery(
    admin_client: Client, account: Account, django_capture_on_commit_callbacks: Any
) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    event = make_event(account, endpoint, "succeeded")
    with django_capture_on_commit_callbacks() as callbacks:
        admin_client.post(EVENTS, {"action": "resend", "_selected_action": [str(event.pk)]})
    delivery = event.deliveries.get()
    assert (delivery.status, delivery.attempt_count) == ("pending", 0)
    assert len(callbacks) == 1


def test_event_list_and_search(admin_client: Client, account: Account) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    event = make_event(account, endpoint, "failed")
    assert str(event.pk) in admin_client.get(EVENTS, {"q": str(event.pk)}).content.decode()
    assert admin_client.get(EVENTS, {"q": "not-a-uuid"}).status_code == 200
    page = admin_client.get(reverse("admin:webhooks_webhookevent_change", args=[event.pk])).content.decode()
    assert endpoint.url in page  # its deliveries inline
    assert admin_client.get(reverse("admin:webhooks_webhookevent_add")).status_code == 403


def test_support_cannot_act(staff_client: Any, account: Account) -> None:
    client = staff_client("support")
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    assert client.get(ENDPOINTS).status_code == 200
    client.post(ENDPOINTS, {"action": "disable", "_selected_action": [str(endpoint.pk)]})
    endpoint.refresh_from_db()
    assert endpoint.is_active
    assert 'value="resend"' not in client.get(EVENTS).content.decode()


def test_operations_can_resend(staff_client: Any, account: Account) -> None:
    client = staff_client("operations")
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    event = make_event(account, endpoint, "failed")
    client.post(EVENTS, {"action": "resend", "_selected_action": [str(event.pk)]})
    assert event.deliveries.get().status == "pending"


# --------------------------------------------------------------------------- one language

ADMIN_INDEX = reverse("admin:index")
DELIVERIES = reverse("admin:webhooks_webhookdelivery_changelist")


def test_back_office_names_are_pt_br(admin_client: Client, account: Account) -> None:
    index = admin_client.get(ADMIN_INDEX).content.decode()
    for shown in (
        "Adquirentes",
        "Webhooks",
        "Notificações recebidas",
        "Eventos de webhook",
        "Entregas de webhook",
        "Endpoints de webhook",
    ):
        assert shown in index, shown
    for wrong in ("Acquirers", "Notificação recebidas", "Evento de webhooks", "Endpoint de webhooks"):
        assert wrong not in index, wrong

    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    make_event(account, endpoint, "failed")
    for url, headers in (
        (ENDPOINTS, ("Ativo", "Falhando desde", "Motivo da desativação", "Criado em")),
        (EVENTS, ("Tipo de evento", "ID do registro", "Conta", "Criado em")),
        (DELIVERIES, ("Evento", "Tentativas", "HTTP", "Última falha", "Próxima tentativa", "Transação · Paga")),
    ):
        page = admin_client.get(url).content.decode()
        for header in headers:
            assert header in page, (url, header)
        for english in ("Created at", "Is active", "Event type", "Attempt count", "Last status code"):
            assert english not in page, (url, english)


def test_event_status_is_labelled_in_pt_br(admin_client: Client, account: Account) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    event = make_event(account, endpoint, "failed")  # a "paid" transaction
    listing = admin_client.get(EVENTS).content.decode()
    assert '<td class="field-status_label">Paga</td>' in listing
    page = admin_client.get(reverse("admin:webhooks_webhookevent_change", args=[event.pk])).content.decode()
    assert "Paga" in page
    assert "Falhou" in page  # the delivery's status


def test_event_status_labels_follow_the_charge_and_withdrawal_statuses() -> None:
    from payments.models import ChargeStatus
    from withdrawals.models import WithdrawalStatus

    assert readable.EVENT_STATUS_LABELS["transaction"] == dict(ChargeStatus.choices)
    assert readable.EVENT_STATUS_LABELS["due_charge"] == dict(ChargeStatus.choices)
    assert readable.EVENT_STATUS_LABELS["withdrawal"] == dict(WithdrawalStatus.choices)


def test_every_event_type_has_its_status_labels() -> None:
    from webhooks.models import EventType

    assert set(readable.EVENT_STATUS_LABELS) == set(EventType.values)


# --------------------------------------------------------------------------- read-only pages


def test_event_and_delivery_pages_have_no_save_button(admin_client: Client, account: Account) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    event = make_event(account, endpoint, "failed")
    for url in (
        reverse("admin:webhooks_webhookevent_change", args=[event.pk]),
        reverse("admin:webhooks_webhookdelivery_change", args=[event.deliveries.get().pk]),
    ):
        page = admin_client.get(url).content.decode()
        assert 'name="_save"' not in page, url
        assert 'name="_continue"' not in page, url
        assert admin_client.post(url, {}).status_code == 403


# --------------------------------------------------------------------------- delete = deactivate, history kept


def test_deleting_from_the_endpoint_page_deactivates_it_and_keeps_its_history(
    admin_client: Client, account: Account, api: Any
) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    pending = make_event(account, endpoint, "pending")
    delivered = make_event(account, endpoint, "succeeded")
    url = reverse("admin:webhooks_webhookendpoint_delete", args=[endpoint.pk])

    confirm = admin_client.get(url).content.decode()
    assert "será <strong>desativado</strong>" in confirm
    assert "Nada é apagado" in confirm
    assert "Entrega de webhook" not in confirm  # no list of related rows "to be deleted"

    response = admin_client.post(url, {"post": "yes"}, follow=True)

    assert "excluído: desativado, com o histórico de entregas mantido" in response.content.decode()
    endpoint.refresh_from_db()  # still there
    assert not endpoint.is_active
    assert endpoint.deleted_at is not None
    # As the API's DELETE leaves it: pending deliveries failed, the others kept as they were.
    assert pending.deliveries.get().status == "failed"
    assert pending.deliveries.get().last_error == "endpoint deleted"
    assert delivered.deliveries.get().status == "succeeded"
    assert WebhookDelivery.objects.filter(endpoint=endpoint).count() == 2
    assert api.get("/api/webhooks").json()["data"]["webhooks"] == []
    assert endpoint.url not in admin_client.get(ENDPOINTS).content.decode()


def test_admin_delete_leaves_what_the_api_delete_leaves(admin_client: Client, account: Account, api: Any) -> None:
    by_api = endpoint_create(account=account, url="https://a.example/hook").endpoint
    by_admin = endpoint_create(account=account, url="https://b.example/hook").endpoint
    make_event(account, by_api, "pending")
    make_event(account, by_admin, "pending")

    assert api.delete(f"/api/webhooks/{by_api.pk}").status_code == 200
    admin_client.post(reverse("admin:webhooks_webhookendpoint_delete", args=[by_admin.pk]), {"post": "yes"})

    def left(endpoint: WebhookEndpoint) -> tuple[Any, ...]:
        endpoint.refresh_from_db()
        delivery = endpoint.deliveries.get()
        return endpoint.is_active, endpoint.deleted_at is not None, delivery.status, delivery.last_error

    assert left(by_admin) == left(by_api) == (False, True, "failed", "endpoint deleted")


def test_bulk_delete_confirms_then_deactivates(admin_client: Client, account: Account) -> None:
    endpoints = [endpoint_create(account=account, url=f"https://{n}.example/hook").endpoint for n in "ab"]
    make_event(account, endpoints[0], "failed")
    selected = {"action": "delete_selected", "_selected_action": [str(e.pk) for e in endpoints]}

    confirm = admin_client.post(ENDPOINTS, selected).content.decode()
    assert "serão <strong>desativados</strong>" in confirm
    assert WebhookEndpoint.objects.filter(deleted_at__isnull=True).count() == 2  # nothing yet

    done = admin_client.post(ENDPOINTS, {**selected, "post": "yes"}, follow=True).content.decode()

    assert "2 endpoints excluídos" in done
    assert WebhookEndpoint.objects.filter(pk__in=[e.pk for e in endpoints], deleted_at__isnull=False).count() == 2
    assert WebhookDelivery.objects.filter(endpoint=endpoints[0]).count() == 1


# --------------------------------------------------------------------------- resend from the event's page


def test_resend_from_the_event_page(
    admin_client: Client, account: Account, django_capture_on_commit_callbacks: Any
) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    event = make_event(account, endpoint, "failed")
    change = reverse("admin:webhooks_webhookevent_change", args=[event.pk])
    resend = reverse("admin:webhooks_webhookevent_resend", args=[event.pk])
    assert f'href="{resend}"' in admin_client.get(change).content.decode()

    with django_capture_on_commit_callbacks() as shown:
        confirm = admin_client.get(resend).content.decode()
    assert "Confirmar: reenviar" in confirm
    assert not shown
    assert event.deliveries.get().status == "failed"  # the page alone changes nothing

    with django_capture_on_commit_callbacks() as callbacks:
        response = admin_client.post(resend, follow=True)

    assert "1 entrega agendada." in response.content.decode()
    assert response.redirect_chain[-1][0] == change
    assert len(callbacks) == 1  # exactly one delivery handed to a worker
    assert WebhookDelivery.objects.filter(event=event).count() == 1
    delivery = event.deliveries.get()
    assert (delivery.status, delivery.attempt_count) == ("pending", 0)
    assert LogEntry.objects.get(object_id=str(event.pk)).get_change_message() == "Reenviado"


def test_support_has_no_resend_on_the_event_page(staff_client: Any, account: Account) -> None:
    client = staff_client("support")
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    event = make_event(account, endpoint, "failed")
    resend = reverse("admin:webhooks_webhookevent_resend", args=[event.pk])
    assert resend not in client.get(reverse("admin:webhooks_webhookevent_change", args=[event.pk])).content.decode()
    assert client.get(resend).status_code == 403
    assert client.post(resend).status_code == 403
    assert event.deliveries.get().status == "failed"


# --------------------------------------------------------------------------- readable failures

RAW_CONNECT_TIMEOUT = (
    "ConnectionError: HTTPSConnectionPool(host='a.example', port=443): Max retries exceeded with url: /hook "
    "(Caused by ConnectTimeoutError(<urllib3.connection.HTTPSConnection object at 0x7f>, "
    "'Connection to a.example timed out. (connect timeout=3)'))"
)


@pytest.mark.parametrize(
    ("error", "status_code", "shown"),
    [
        (RAW_CONNECT_TIMEOUT, None, "Tempo esgotado ao conectar"),
        (
            "ConnectionError: HTTPSConnectionPool(host='a.example', port=443): Max retries exceeded with url: / "
            "(Caused by NewConnectionError('<urllib3.connection.HTTPSConnection>: Failed to establish a new "
            "connection: [Errno 111] Connection refused'))",
            None,
            "Conexão recusada",
        ),
        (
            "ConnectionError: HTTPSConnectionPool(host='nope.example', port=443): Max retries exceeded with url: / "
            '(Caused by NameResolutionError("<urllib3.connection.HTTPSConnection>: Failed to resolve '
            "'nope.example' ([Errno -2] Name or service not known)\"))",
            None,
            "Nome não resolvido (DNS)",
        ),
        (
            "SSLError: HTTPSConnectionPool(host='a.example', port=443): Max retries exceeded with url: / "
            "(Caused by SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate "
            "verify failed: self-signed certificate')))",
            None,
            "Certificado TLS inválido",
        ),
        (
            "ReadTimeout: HTTPSConnectionPool(host='a.example', port=443): Read timed out.",
            None,
            "Tempo esgotado aguardando a resposta",
        ),
        ("Timeout: no complete answer within 10s", None, "Tempo esgotado: sem resposta completa em 10 s"),
        ("blocked: destination address is not public", None, "Bloqueado: o endereço de destino não é público"),
        (
            "interrupted: the worker stopped before an answer was recorded",
            None,
            "Interrompida: o processo parou antes de registrar a resposta",
        ),
        ("endpoint deleted", None, "Não enviada: o endpoint foi excluído"),
        ("endpoint disabled: disabled by admin", None, "Não enviada: o endpoint está desativado"),
        ("", 500, "Resposta HTTP 500"),
        ("", 302, "Resposta HTTP 302 (redirecionamentos não são seguidos)"),
        ("", 200, ""),
        ("SomethingNew: whatever", None, "Falha de rede (veja os detalhes técnicos)"),
    ],
)
def test_delivery_errors_read_in_pt_br(error: str, status_code: int | None, shown: str) -> None:
    assert readable.delivery_error(error, status_code) == shown


def test_delivery_pages_show_readable_failures_with_the_raw_text_collapsed(
    admin_client: Client, account: Account
) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    event = make_event(account, endpoint, "failed")
    delivery = event.deliveries.get()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(last_error=RAW_CONNECT_TIMEOUT[:500])
    WebhookAttempt.objects.create(
        delivery=delivery,
        number=1,
        attempted_at=timezone.now(),
        latency_ms=3000,
        error=RAW_CONNECT_TIMEOUT[:500],
        succeeded=False,
    )
    WebhookAttempt.objects.create(
        delivery=delivery, number=2, attempted_at=timezone.now(), status_code=500, latency_ms=20, succeeded=False
    )

    listing = admin_client.get(DELIVERIES).content.decode()
    assert "Tempo esgotado ao conectar" in listing
    assert "HTTPSConnectionPool" not in listing

    page = admin_client.get(reverse("admin:webhooks_webhookdelivery_change", args=[delivery.pk])).content.decode()
    assert "Tempo esgotado ao conectar" in page
    assert "Resposta HTTP 500" in page
    assert "Tentativa 2" in page  # the attempt row is named, not titled with the exception
    assert ": ConnectionError" not in page
    assert "Detalhes técnicos" in page  # the collapsed fieldset with the stored text
    assert 'class="module collapse' in page or "<details" in page
    assert "HTTPSConnectionPool(host=&#x27;a.example&#x27;" in page  # kept, escaped, for engineers

    event_page = admin_client.get(reverse("admin:webhooks_webhookevent_change", args=[event.pk])).content.decode()
    assert "Tempo esgotado ao conectar" in event_page
    assert "<summary>detalhes técnicos</summary>" in event_page


# --------------------------------------------------------------------------- constraints on the field


def test_a_taken_ref_is_said_on_the_field_and_nothing_is_saved(admin_client: Client, account: Account) -> None:
    endpoint_create(account=account, url="https://a.example/hook", ref="pedidos")
    before = WebhookEndpoint.objects.count()
    response = admin_client.post(
        reverse("admin:webhooks_webhookendpoint_add"),
        {
            "account": str(account.pk),
            "ref": "pedidos",
            "url": "https://b.example/hook",
            "description": "",
            "is_active": "on",
        },
    )
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"ref": [REF_TAKEN]}
    page = response.content.decode()
    assert "Restrição" not in page
    assert "violada" not in page
    assert WebhookEndpoint.objects.count() == before


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("disabled by maria", "Desativado pela equipe (maria)"),
        ("every delivery failed for 5 days", "Todas as entregas falharam por 5 dias"),
        ("410 Gone", "O destino respondeu 410: o endpoint não existe mais"),
        ("", "-"),
    ],
)
def test_disable_reasons_read_in_pt_br(stored: str, shown: str) -> None:
    assert readable.disabled_reason(stored) == shown


def test_the_endpoint_list_says_why_in_pt_br_and_the_api_keeps_its_words(
    admin_client: Client, account: Account, api: Any
) -> None:
    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    admin_client.post(ENDPOINTS, {"action": "disable", "_selected_action": [str(endpoint.pk)]})
    assert "Desativado pela equipe (admin)" in admin_client.get(ENDPOINTS).content.decode()
    (listed,) = api.get("/api/webhooks").json()["data"]["webhooks"]
    assert listed["disabled_reason"] == "disabled by admin"


def test_deleting_from_the_account_page_inline_is_the_soft_delete(account: Account) -> None:
    from django.forms import inlineformset_factory

    from webhooks.admin.endpoints import WebhookEndpointInlineFormSet

    endpoint = endpoint_create(account=account, url="https://a.example/hook").endpoint
    make_event(account, endpoint, "pending")
    formset_class = inlineformset_factory(
        Account, WebhookEndpoint, formset=WebhookEndpointInlineFormSet, fields=("is_active",), extra=0
    )
    data = {
        "webhook_endpoints-TOTAL_FORMS": "1",
        "webhook_endpoints-INITIAL_FORMS": "1",
        "webhook_endpoints-0-id": str(endpoint.pk),
        "webhook_endpoints-0-account": str(account.pk),
        "webhook_endpoints-0-is_active": "on",
        "webhook_endpoints-0-DELETE": "on",
    }
    formset = formset_class(data, instance=account, queryset=WebhookEndpoint.objects.filter(account=account))
    assert formset.is_valid(), formset.errors
    formset.save()

    endpoint.refresh_from_db()
    assert (endpoint.is_active, endpoint.deleted_at is not None) == (False, True)
    assert endpoint.deliveries.get().status == "failed"
