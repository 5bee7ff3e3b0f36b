"""Due-date charges (``cobv``, ``lotecobv``) of the ``bacen_pix`` adapter
against the fake API Pix PSP: every request and answer is validated against
Banco Central's OpenAPI 2.9.0 (the fixture fails a test on any violation)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from acquirers import adapters, brcode
from acquirers.adapters.apipix.bacen import BacenPixAdapter
from acquirers.adapters.apipix.problems import HttpDeclined
from acquirers.adapters.base import (
    AcquirerAdapter,
    AcquirerDeclined,
    AcquirerTimeout,
    CapabilityNotSupported,
    DueBatchRequest,
    DueChargeRequest,
)
from acquirers.models import Acquirer
from tests.acquirers.conftest import CHAVE, bacen_options, warm_up
from tests.acquirers.fake_psp import SPEC_PATH, FakePsp, Fault, schema_errors
from tests.acquirers.fake_psp_cobv import pay_cobv

pytestmark = pytest.mark.django_db
SCOPES = [
    "cob.write",
    "cob.read",
    "cobv.write",
    "cobv.read",
    "lotecobv.write",
    "lotecobv.read",
    "pix.write",
    "pix.read",
]
#: ``valor`` as payments.due_terms writes it: original, a 2 % fine, 1 % a month interest, a discount.
VALOR: dict[str, Any] = {
    "original": "150.00",
    "multa": {"modalidade": 2, "valorPerc": "2.00"},
    "juros": {"modalidade": 3, "valorPerc": "1.00"},
    "desconto": {"modalidade": 1, "descontoDataFixa": [{"data": "2031-01-05", "valorPerc": "10.00"}]},
}


def due_request(*, document: str = "52998224725", **extra: Any) -> DueChargeRequest:
    charge_id = uuid.uuid4()
    fields: dict[str, Any] = {
        "charge_id": charge_id,
        "txid": charge_id.hex,
        "due_date": dt.date(2031, 1, 10),
        "validity_after_due": 30,
        "debtor_name": "Fulano de Tal",
        "debtor_document": document,
        "valor": VALOR,
        "description": "Mensalidade de janeiro",
        "logradouro": "Rua 15, Numero 1",
        "cidade": "Recife",
        "uf": "PE",
        "cep": "70055751",
    }
    return DueChargeRequest(**(fields | extra))


@pytest.fixture
def adapter(make_bacen_acquirer: Callable[..., Acquirer], fake_psp: FakePsp) -> BacenPixAdapter:
    built = adapters.build(make_bacen_acquirer(options=bacen_options(fake_psp, scopes=SCOPES)))
    assert isinstance(built, BacenPixAdapter)
    return built


def test_the_interface_offers_due_charges_only_where_claimed() -> None:
    assert BacenPixAdapter.supports("due_charge")
    assert BacenPixAdapter.supports("due_charge_batch")
    assert BacenPixAdapter.missing_methods() == []

    class Bare(AcquirerAdapter):
        name = "bare"

        def parse_notification(self, headers: Any, body: bytes) -> list[Any]:
            return []

    assert not Bare.supports("due_charge")
    bare = Bare.__new__(Bare)
    with pytest.raises(CapabilityNotSupported):
        bare.create_due_charge(due_request())
    with pytest.raises(CapabilityNotSupported):
        bare.due_charge_batch_status(1)


def test_create_puts_the_cobv_the_standard_describes(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    request = due_request()

    result = adapter.create_due_charge(request)

    (call,) = fake_psp.calls_of("cobv.put")
    assert call.path == f"/api/cobv/{request.txid}"
    assert call.body == {
        "calendario": {"dataDeVencimento": "2031-01-10", "validadeAposVencimento": 30},
        "devedor": {
            "cpf": "52998224725",
            "nome": "Fulano de Tal",
            "logradouro": "Rua 15, Numero 1",
            "cidade": "Recife",
            "uf": "PE",
            "cep": "70055751",
        },
        "valor": VALOR,
        "chave": CHAVE,
        "solicitacaoPagador": "Mensalidade de janeiro",
    }
    assert schema_errors(call.body, "/components/schemas/CobVSolicitada") == []
    cobv = fake_psp.cobvs[request.txid]
    assert (result.provider_charge_id, result.status) == (request.txid, "ATIVA")
    assert (result.emv, result.location) == (cobv["pixCopiaECola"], cobv["location"])
    assert brcode.check(result.emv, amount=15000)


def test_the_schemas_own_example_body_is_what_the_adapter_would_send(
    fake_psp: FakePsp, adapter: BacenPixAdapter
) -> None:
    spec = yaml.safe_load(SPEC_PATH.read_text())
    example = spec["components"]["examples"]["loteCobVBody1"]["value"]["cobsv"][0]
    devedor = example["devedor"]
    request = due_request(
        txid=example["txid"],
        due_date=dt.date.fromisoformat(example["calendario"]["dataDeVencimento"]),
        validity_after_due=example["calendario"]["validadeAposVencimento"],
        debtor_name=devedor["nome"],
        debtor_document=devedor["cpf"],
        valor=example["valor"],
        description=example["solicitacaoPagador"],
        **{key: devedor[key] for key in ("logradouro", "cidade", "uf", "cep")},
    )
    adapter.create_due_charge(request)
    sent = fake_psp.calls_of("cobv.put")[0].body
    expected = {k: v for k, v in example.items() if k not in ("txid", "loc")} | {"chave": CHAVE}
    assert sent == expected


def test_status_reads_the_pix_with_its_componentes_valor(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    request = due_request()
    adapter.create_due_charge(request)
    e2e_id = pay_cobv(fake_psp, request.txid, amount="151.50", components={"original": "150.00", "juros": "1.50"})

    status = adapter.due_charge_status(request.txid)

    assert (status.status, status.original, status.e2e_ids) == ("CONCLUIDA", 15000, (e2e_id,))
    (pix,) = status.pix
    assert (pix.amount, dict(pix.components)) == (15150, {"original": 15000, "juros": 150})
    assert pix.paid_at is not None


def test_a_pix_returned_there_reads_back_with_its_devolucao_and_as_a_refund(
    fake_psp: FakePsp, adapter: BacenPixAdapter
) -> None:
    from payments.due_acquirer import due_paid_news

    request = due_request()
    adapter.create_due_charge(request)
    e2e_id = pay_cobv(fake_psp, request.txid, amount="151.50", components={"original": "150.00", "juros": "1.50"})
    with fake_psp.lock:
        fake_psp.cobvs[request.txid]["pix"][0]["devolucoes"] = [
            {
                "id": "D1",
                "rtrId": "D12345678202612011200abcdefghijk",
                "valor": "151.50",
                "status": "DEVOLVIDO",
                "horario": {"solicitacao": "2026-12-01T12:00:00Z", "liquidacao": "2026-12-01T12:00:05Z"},
            }
        ]

    status = adapter.due_charge_status(request.txid)

    assert (status.pix[0].returned, status.pix[0].returned_at is not None) == (15150, True)
    news = due_paid_news(status)
    assert [(n.event.value, n.e2e_id, n.amount) for n in news] == [
        ("charge.paid", e2e_id, 15150),
        ("charge.refunded", e2e_id, 15150),
    ]


def test_cancel_removes_it_and_a_repeat_reads_it_back(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    request = due_request()
    adapter.create_due_charge(request)

    assert adapter.cancel_due_charge(request.txid).status == "REMOVIDA_PELO_USUARIO_RECEBEDOR"
    assert fake_psp.calls_of("cobv.patch")[0].body == {"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"}
    # Again (an answer lost): the PSP refuses a non-active cobv; the read says it is removed.
    assert adapter.cancel_due_charge(request.txid).status == "REMOVIDA_PELO_USUARIO_RECEBEDOR"


def test_cancel_after_payment_answers_concluida(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    request = due_request()
    adapter.create_due_charge(request)
    pay_cobv(fake_psp, request.txid, amount="150.00", components={"original": "150.00"})
    assert adapter.cancel_due_charge(request.txid).status == "CONCLUIDA"


def test_a_timeout_is_unknown_and_the_get_settles_it_without_a_second_create(
    fake_psp: FakePsp, make_bacen_acquirer: Callable[..., Acquirer]
) -> None:
    options = bacen_options(fake_psp, scopes=SCOPES, max_retries=0)
    acquirer = make_bacen_acquirer(read_timeout_ms=700, options=options)
    warm_up(acquirer)
    adapter = adapters.build(acquirer)
    fake_psp.delay = 1.5
    fake_psp.fail("cobv.put", Fault.TIMEOUT)
    request = due_request()

    with pytest.raises(AcquirerTimeout):
        adapter.create_due_charge(request)
    status = adapter.due_charge_status(request.txid)

    assert status.status == "ATIVA"
    assert [c.operation for c in fake_psp.calls if c.operation != "token"] == ["cobv.put", "cobv.get"]
    assert list(fake_psp.cobvs) == [request.txid]


def test_a_retried_put_whose_first_answer_was_lost_adopts_the_cobv(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    fake_psp.fail("cobv.put", Fault.LOST_ANSWER)  # created, then a 500: the client retries the PUT
    request = due_request()
    result = adapter.create_due_charge(request)
    assert result.emv == fake_psp.cobvs[request.txid]["pixCopiaECola"]
    assert [c.operation for c in fake_psp.calls if c.operation != "token"] == ["cobv.put", "cobv.put", "cobv.get"]


def test_a_cobv_problem_is_a_decline(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    request = due_request()
    adapter.create_due_charge(request)
    # Another charge's terms under the same txid: the PSP's CobVOperacaoInvalida stands.
    with pytest.raises(AcquirerDeclined) as declined:
        adapter.create_due_charge(due_request(txid=request.txid, valor={"original": "99.00"}))
    assert isinstance(declined.value, HttpDeclined)
    assert declined.value.problem is not None
    assert declined.value.problem.kind == "CobVOperacaoInvalida"


def test_a_batch_is_put_and_read_with_its_items_problems(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    good, taken = due_request(), due_request()
    adapter.create_due_charge(taken)  # its txid is in use: the lote's item is NEGADA
    batch = DueBatchRequest(batch_id=4321, description="Mensalidades de janeiro", charges=(good, taken))

    adapter.create_due_charge_batch(batch)
    adapter.create_due_charge_batch(batch)  # the same lote again changes nothing
    status = adapter.due_charge_batch_status(4321)

    (call, _) = fake_psp.calls_of("lotecobv.put")
    assert call.path == "/api/lotecobv/4321"
    assert [item["txid"] for item in call.body["cobsv"]] == [good.txid, taken.txid]
    assert [(i.txid, i.status) for i in status.items] == [(good.txid, "CRIADA"), (taken.txid, "NEGADA")]
    assert "Cobrança inválida" in status.items[1].problem
    assert fake_psp.cobvs[good.txid]["status"] == "ATIVA"


def test_an_unknown_batch_is_not_found(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    with pytest.raises(AcquirerDeclined):
        adapter.due_charge_batch_status(999)


def test_the_schemas_own_example_answers_are_read(fake_psp: FakePsp, adapter: BacenPixAdapter) -> None:
    examples = yaml.safe_load(SPEC_PATH.read_text())["components"]["examples"]
    cobv = examples["cobResponse4"]["value"]
    # The example's loc lacks the txid and criacao its own schema requires.
    cobv["loc"] |= {"txid": cobv["txid"], "criacao": cobv["calendario"]["criacao"]}
    fake_psp.cobvs[cobv["txid"]] = cobv
    lote = examples["loteCobVResponse1"]["value"] | {"id": 77}  # the example omits the id its schema requires
    fake_psp.lotes[77] = lote

    status = adapter.due_charge_status(cobv["txid"])
    batch = adapter.due_charge_batch_status(77)

    assert (status.status, status.original, status.pix) == ("ATIVA", 12345, ())
    assert [i.status for i in batch.items] == ["CRIADA", "NEGADA"]
    assert batch.items[1].problem.startswith("Cobrança inválida.")
