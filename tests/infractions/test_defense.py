"""POST /api/infractions/{id}/defense: the merchant's defence, its checks in
order (422 fields, 404, 409 state), its size caps, Idempotency-Key, and
nothing changed by a refusal."""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Account
from acquirers.adapters.base import InfractionStatus
from acquirers.models import Acquirer
from infractions import examples
from infractions.models import DefenseAttachment, Infraction
from infractions.payloads import infraction_payload
from tests.factories import AccountFactory
from tests.helpers import VALIDATION
from tests.infractions.conftest import close_infraction, open_infraction, paid_charge

pytestmark = pytest.mark.django_db

PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
MIB = 1024 * 1024
TEXT = "Venda entregue ao comprador em 25/11/2026; comprovante de entrega anexo."


def attachment(content: bytes, name: str = "comprovante.pdf", content_type: str = "application/pdf") -> dict[str, str]:
    return {"name": name, "content_type": content_type, "content_base64": base64.b64encode(content).decode()}


def pdf_of(size: int) -> bytes:
    return PDF + b"0" * (size - len(PDF))


@pytest.fixture
def infraction(account: Account, acquirer: Acquirer) -> Infraction:
    return open_infraction(acquirer, paid_charge(account, acquirer))


@pytest.fixture
def defend(api: APIClient, infraction: Infraction) -> Callable[..., Any]:
    def post(body: Any, infraction_id: Any = None, **headers: Any) -> Any:
        url = f"/api/infractions/{infraction_id or infraction.pk}/defense"
        return api.post(url, json.dumps(body), content_type="application/json", **headers)

    return post


def state(infraction: Infraction) -> tuple[Any, ...]:
    """What a refusal must leave as it was."""
    row = Infraction.objects.get(pk=infraction.pk)
    return (
        row.defense_text,
        row.defense_by,
        row.defense_submitted_at,
        row.status,
        row.updated_at,
        DefenseAttachment.objects.filter(infraction=row).count(),
    )


def test_the_defence_is_recorded_and_handed_to_the_acquirer(
    defend: Callable[..., Any], infraction: Infraction, django_capture_on_commit_callbacks: Any, api: APIClient
) -> None:
    body = {"text": TEXT, "attachments": [attachment(PDF), attachment(PNG, "foto.png", "image/png")]}
    with django_capture_on_commit_callbacks() as handed_off:
        response = defend(body)

    assert response.status_code == 201, response.content
    answer = response.json()
    assert (answer["success"], answer["message"]) == (True, "Defesa registrada. Ela será enviada à adquirente.")
    row = Infraction.objects.get(pk=infraction.pk)
    assert answer["data"] == infraction_payload(row)
    defense = answer["data"]["defense"]
    assert defense["text"] == TEXT
    assert defense["sent_at"] is None
    assert defense["attachments"] == [
        {"name": "comprovante.pdf", "content_type": "application/pdf", "size": len(PDF)},
        {"name": "foto.png", "content_type": "image/png", "size": len(PNG)},
    ]
    assert row.defense_by.startswith("API (")
    stored = list(DefenseAttachment.objects.filter(infraction=row).order_by("id"))
    assert [bytes(a.content) for a in stored] == [PDF, PNG]
    assert len(handed_off) == 1  # the worker that sends it to the acquirer, after the commit
    # The documented answer has the same shape.
    assert set(examples.DEFENDED.value["data"]) == set(answer["data"])
    assert set(examples.DEFENDED.value["data"]["defense"]) == set(defense)
    # Read back as the listing shows it.
    assert api.get(f"/api/infractions/{infraction.pk}").json()["data"]["defense"] == defense


def test_text_alone_is_a_defence(defend: Callable[..., Any]) -> None:
    response = defend({"text": "Serviço prestado."})
    assert response.status_code == 201
    assert response.json()["data"]["defense"]["attachments"] == []


def refusal(acquirer: Acquirer, infraction: Infraction, defend: Callable[..., Any], reason: str) -> None:
    if reason == "closed":
        close_infraction(acquirer, infraction, InfractionStatus.REJECTED)
    elif reason == "already defended":
        assert defend({"text": "A primeira defesa."}).status_code == 201
    elif reason == "waived":
        Infraction.objects.filter(pk=infraction.pk).update(defense_waived_at=timezone.now())
    else:
        past = timezone.now() - dt.timedelta(minutes=1)
        Infraction.objects.filter(pk=infraction.pk).update(defense_deadline=past)


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("closed", "Esta infração já foi encerrada: não aceita mais defesa."),
        ("already defended", "Esta infração já tem uma defesa."),
        ("waived", "A devolução desta infração foi aceita sem defesa."),
        ("deadline passed", "O prazo de defesa desta infração terminou."),
    ],
)
def test_a_defence_the_infraction_refuses_is_a_409_that_changes_nothing(
    defend: Callable[..., Any], acquirer: Acquirer, infraction: Infraction, reason: str, message: str
) -> None:
    refusal(acquirer, infraction, defend, reason)
    before = state(infraction)

    response = defend({"text": TEXT, "attachments": [attachment(PDF)]})

    assert response.status_code == 409
    assert response.json() == {"success": False, "message": message, "data": None}
    assert state(infraction) == before


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({}, {"text"}),
        ({"text": "   "}, {"text"}),
        ({"text": "x" * 5001}, {"text"}),
        ({"text": 123}, {"text"}),
        ({"text": TEXT, "attachments": [attachment(PDF)] * 6}, {"attachments"}),
        ({"text": TEXT, "attachments": "a.pdf"}, {"attachments"}),
        (
            {"text": TEXT, "attachments": [{**attachment(PDF), "content_type": "text/html"}]},
            {"attachments.0.content_type"},
        ),
        (
            {"text": TEXT, "attachments": [{**attachment(PDF), "content_base64": "não é base64"}]},
            {"attachments.0.content_base64"},
        ),
        ({"text": TEXT, "attachments": [{**attachment(PDF), "content_base64": ""}]}, {"attachments.0.content_base64"}),
        ({"text": TEXT, "attachments": [attachment(PDF, "foto.png", "image/png")]}, {"attachments.0.content_base64"}),
        ({"text": TEXT, "attachments": [{**attachment(PDF), "name": ""}]}, {"attachments.0.name"}),
        (
            {"text": TEXT, "attachments": [attachment(PDF), {"name": "x.pdf"}]},
            {"attachments.1.content_type", "attachments.1.content_base64"},
        ),
    ],
    ids=[
        "no text",
        "blank text",
        "text too long",
        "text not a string",
        "six attachments",
        "attachments not a list",
        "type not accepted",
        "not base64",
        "empty file",
        "bytes not of the declared type",
        "no name",
        "fields missing",
    ],
)
def test_bad_fields_are_422s_by_name_and_change_nothing(
    defend: Callable[..., Any], infraction: Infraction, body: dict[str, Any], errors: set[str]
) -> None:
    before = state(infraction)
    response = defend(body)
    assert response.status_code == 422, response.content
    answer = response.json()
    assert (answer["success"], answer["message"]) == (False, VALIDATION)
    assert set(answer["data"]["errors"]) == errors
    assert state(infraction) == before


def test_size_caps(defend: Callable[..., Any], infraction: Infraction) -> None:
    before = state(infraction)
    over_one = defend({"text": TEXT, "attachments": [attachment(pdf_of(2 * MIB + 1))]})
    assert over_one.status_code == 422
    assert over_one.json()["data"]["errors"] == {
        "attachments.0.content_base64": ["Cada anexo pode ter no máximo 2 MB."]
    }
    # Each within 2 MB, together one byte over 5 MB (the body itself is under the route's 7 MiB).
    over_all = defend(
        {
            "text": TEXT,
            "attachments": [attachment(pdf_of(2 * MIB)), attachment(pdf_of(2 * MIB)), attachment(pdf_of(MIB + 1))],
        }
    )
    assert over_all.status_code == 422
    assert over_all.json()["data"]["errors"] == {"attachments": ["Os anexos somam mais de 5 MB."]}
    assert state(infraction) == before

    # Exactly 5 MB in five files: about 7 MB of body, taken on this route.
    files = [attachment(pdf_of(MIB), f"doc{i}.pdf") for i in range(5)]
    response = defend({"text": "x" * 5000, "attachments": files})
    assert response.status_code == 201, response.content[:300]
    assert sum(a["size"] for a in response.json()["data"]["defense"]["attachments"]) == 5 * MIB


def test_a_body_past_the_routes_cap_is_a_413_and_other_routes_keep_theirs(
    defend: Callable[..., Any], infraction: Infraction, api: APIClient
) -> None:
    before = state(infraction)
    response = defend({"text": TEXT, "attachments": [attachment(pdf_of(2 * MIB))] * 3})  # 8 MiB of base64
    assert response.status_code == 413
    assert response.json() == {"success": False, "message": "Corpo da requisição muito grande.", "data": None}
    assert state(infraction) == before
    big = {"payment_method": "pix", "amount": 1000, "metadata": {"x": "y" * 300 * 1024}}
    assert api.post("/api/transactions", json.dumps(big), content_type="application/json").status_code == 413


def test_fields_are_checked_before_the_infraction_and_the_infraction_before_its_state(
    defend: Callable[..., Any], acquirer: Acquirer
) -> None:
    assert defend({}, infraction_id=uuid.uuid4()).status_code == 422
    for infraction_id in (uuid.uuid4(), "abc"):
        response = defend({"text": TEXT}, infraction_id=infraction_id)
        assert response.status_code == 404
        assert response.json() == {"success": False, "message": "Infração não encontrada.", "data": None}
    other = open_infraction(acquirer, paid_charge(AccountFactory(), acquirer))
    before = state(other)
    assert defend({"text": TEXT}, infraction_id=other.pk).status_code == 404
    assert state(other) == before


def test_a_body_that_is_not_a_json_object_is_a_400(api: APIClient, infraction: Infraction) -> None:
    url = f"/api/infractions/{infraction.pk}/defense"
    for raw in ("", "[]", "{"):
        response = api.post(url, raw, content_type="application/json")
        assert response.status_code == 400
        assert response.json()["message"] == "Corpo da requisição inválido."


def test_idempotency_key_replays_the_first_answer(defend: Callable[..., Any], infraction: Infraction) -> None:
    body = {"text": TEXT, "attachments": [attachment(PDF)]}
    first = defend(body, HTTP_IDEMPOTENCY_KEY="defesa-1")
    again = defend(body, HTTP_IDEMPOTENCY_KEY="defesa-1")
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert DefenseAttachment.objects.filter(infraction=infraction).count() == 1
    other_body = defend({"text": "Outra."}, HTTP_IDEMPOTENCY_KEY="defesa-1")
    assert other_body.status_code == 422
    assert set(other_body.json()["data"]["errors"]) == {"idempotency_key"}
    # Without the key, the same body is a second defence: refused by the infraction.
    assert defend(body).status_code == 409


def test_a_defence_the_acquirer_refused_may_be_sent_again_and_counts_as_none(
    defend: Callable[..., Any], infraction: Infraction
) -> None:
    """The acquirer refused the first defence for good (too long, say): the
    merchant reads why, the infraction counts as undefended again (deadline
    notices, the back office's alert), and a corrected defence replaces it."""
    from infractions.deadlines import deadline_notices_send

    assert defend({"text": "A primeira.", "attachments": [attachment(PDF)]}).status_code == 201
    Infraction.objects.filter(pk=infraction.pk).update(
        defense_error="Recusada pela adquirente: justificativa longa demais.",
        defense_deadline=timezone.now() + dt.timedelta(hours=5),
    )
    shown = infraction_payload(Infraction.objects.get(pk=infraction.pk))["defense"]
    assert shown["error"] == "Recusada pela adquirente: justificativa longa demais."
    assert deadline_notices_send() == 1

    again = defend({"text": "A corrigida."})

    assert again.status_code == 201, again.content
    defense = again.json()["data"]["defense"]
    assert (defense["text"], defense["error"], defense["sent_at"], defense["attachments"]) == (
        "A corrigida.",
        "",
        None,
        [],
    )
    assert not DefenseAttachment.objects.filter(infraction=infraction).exists()
