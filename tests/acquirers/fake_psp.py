"""A fake PSP implementing the part of Banco Central's API Pix (v2.9.0) that
the ``bacen_pix`` adapter uses, on loopback, behind mTLS.

Every request it receives and every answer it gives is validated against the
official OpenAPI document (``tests/acquirers/reference``) with openapi-core; each
violation is recorded in :attr:`FakePsp.violations` and the fixture fails the
test on any. What the spec cannot check (the OAuth2 token exchange, RFC 6749
§4.4; that every call presented our client certificate) is checked here.

Known errata of the official document, corrected before use (each would make
every valid message fail, or the document itself fail validation):

- CPF (and ``codMun``) patterns are written as JavaScript regex literals,
  ``"/^\\d{11}$/"``, which no CPF can match: the slashes are dropped;
- ``CobExpiracao.expiracao.default`` is the string ``"86400"`` for an integer;
- ``RecNotification.required`` names ``atualizacao"`` (a stray quote) and
  ``CobVGerada.required`` names ``location``, which it does not declare;
- ``PixConsultados.required`` names ``cobs`` for its list ``pix``, and the
  items of ``CobsConsultadas.cobs`` require ``idCob``, declared nowhere;
- ``DadosRecebedor.required`` puts the receiver's address at the top of a
  ``cobv`` (its own example, ``cobResponse4``, has it under ``recebedor``).

Pix Automático's (each would refuse every valid message, or accept none):

- ``RecBase.required`` names ``idRec`` (which the PSP assigns: no ``POST /rec``
  could carry it, and ``recBody1`` does not) and ``retentativa``, declared
  nowhere (``politicaRetentativa`` is required by ``RecConfiguracao``): they
  become ``calendario`` and ``vinculo``, and the answers require ``idRec``;
- ``DadosPagadorRec`` requires ``ispbParticipante`` at the top of a rec,
  where it declares ``pagador`` holding it (as every example has it): moved
  into ``pagador``;
- the ``encerramento`` of a rec and of a cobr is a ``oneOf`` of objects that
  require nothing, so every object matches both and none validates: each
  alternative now requires its own key (``rejeicao``, ``cancelamento``);
- ``SolicRecBase.required`` names ``pagador`` (the payer is ``destinatario``)
  and ``SolicRecCompleta.required`` names ``rec`` (declared: ``recPayload``);
- ``PayloadLocationRecGerada.required`` names ``tipo``, declared nowhere
  (nor in its examples);
- ``PixAutomatico.valor`` is a string that must also match an ``anyOf`` of
  objects (``componentesValor``'s parts): the ``anyOf`` is dropped.

Operations declare no 401 (a token rejected at the PSP's gateway) and the
spec's error section says any endpoint may answer 500 or 504: those answers
are validated against the ``Problema`` schema instead.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import secrets
import threading
import urllib.parse
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from openapi_core import Config, OpenAPI
from openapi_core.security.factories import SecurityProviderFactory
from openapi_core.security.providers import BaseProvider
from openapi_core.templating.responses.exceptions import ResponseNotFound
from openapi_core.testing import MockRequest, MockResponse
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

from acquirers import brcode
from tests.acquirers.fake_psp_cobv import CobvHandlerMixin
from tests.acquirers.fake_psp_rec import REC_SCOPES, RecHandlerMixin
from tests.acquirers.fake_server import TOKEN_PATH, FakeHandler, FakeServer, new_e2e_id, now_iso

# Vendored (Apache 2.0, see reference/README.md): a clean clone must test without shared/.
SPEC_PATH = Path(__file__).resolve().parent / "reference" / "bacen-api-pix-2.9.0.openapi.yaml"
#: The spec's server is ``https://pix.example.com/api/``; the fake serves the same paths under /api.
SPEC_HOST = "https://pix.example.com"
API_PREFIX = "/api"
ERROR_TYPE = "https://pix.bcb.gov.br/api/v2/error/"
PSP_ISPB = "12345678"
_SPEC_URI = "urn:bacen-api-pix-2.9.0"
#: Statuses no operation declares but any may answer (see the module docstring).
GENERAL_ERROR_STATUSES = frozenset({401, 500, 504})
COBV_SCOPES = frozenset({"cobv.write", "cobv.read", "lotecobv.write", "lotecobv.read"})


# --------------------------------------------------------------------------- the spec


def _drop_js_delimiters(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str) and value.startswith("/^") and value.endswith("$/"):
                node[key] = value[1:-1]
            else:
                _drop_js_delimiters(value)
    elif isinstance(node, list):
        for item in node:
            _drop_js_delimiters(item)


@cache
def spec_document() -> dict[str, Any]:
    """The official document with the errata above corrected, nothing else."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(SPEC_PATH, encoding="utf-8") as handle:
        document: dict[str, Any] = yaml.load(handle, Loader=loader)  # noqa: S506 - a safe loader
    schemas = document["components"]["schemas"]
    schemas["CobExpiracao"]["properties"]["expiracao"]["default"] = 86400
    schemas["RecNotification"]["required"] = ["idRec", "status", "atualizacao"]
    schemas["CobVGerada"]["required"].remove("location")
    schemas["PixConsultados"]["required"] = ["parametros", "pix"]
    del schemas["DadosRecebedor"]["required"]  # the address belongs to recebedor, which requires it itself
    schemas["CobsConsultadas"]["properties"]["cobs"]["items"]["allOf"][1]["required"] = ["status", "txid"]
    _correct_rec_errata(schemas)
    # The payload a QR's location serves (``GET /rec/{recUrlAccessToken}``, on the PSP's payload
    # host by its operation's own ``servers``) comes before ``/rec/{idRec}`` in the document, and
    # openapi-core matches the first template that fits whatever the servers: served last, it
    # keeps ``GET /rec/{idRec}`` its own (as ``/cobv/{txid}`` precedes ``/cobv/{pixUrlAccessToken}``).
    paths = document["paths"]
    paths["/rec/{recUrlAccessToken}"] = paths.pop("/rec/{recUrlAccessToken}")
    _drop_js_delimiters(document)
    return document


def _correct_rec_errata(schemas: dict[str, Any]) -> None:
    """Pix Automático's errata (see the module docstring)."""
    schemas["RecBase"]["required"] = ["calendario", "vinculo"]
    for name in ("RecCompleta", "RecCompletaPesquisada", "RecGerada"):
        schemas[name]["required"].append("idRec")
    pagador = schemas["DadosPagadorRec"]
    pagador["properties"]["pagador"]["required"] = pagador.pop("required")
    for encerramento in (
        schemas["RecEncerramento"]["properties"]["encerramento"],
        schemas["CobRAtualizacao"]["properties"]["encerramento"],
    ):
        for alternative in encerramento["oneOf"]:
            alternative["required"] = list(alternative["properties"])
    schemas["SolicRecBase"]["required"] = ["calendario", "idRec", "destinatario"]
    schemas["SolicRecCompleta"]["required"] = ["recPayload"]
    schemas["PayloadLocationRecGerada"]["required"].remove("tipo")
    del schemas["PixAutomatico"]["properties"]["valor"]["anyOf"]


class _BearerProvider(BaseProvider):
    """openapi-core leaves OAuth2 unchecked; the spec's security requirement
    means a bearer token on every call, so this checks that much (the fake
    then checks the token is one it issued)."""

    def __call__(self, parameters: Any) -> Any:
        from openapi_core.security.exceptions import SecurityProviderError

        value = parameters.header.get("Authorization", "")
        if not value.startswith("Bearer ") or not value[7:].strip():
            raise SecurityProviderError("missing bearer token")
        return value[7:]


class _Providers(SecurityProviderFactory):
    PROVIDERS = {**SecurityProviderFactory.PROVIDERS, "oauth2": _BearerProvider}


_spec_lock = threading.Lock()


def spec() -> OpenAPI:
    """Built once per process (about a second), under a lock: the first
    requests arrive together from several threads."""
    with _spec_lock:
        return _build_spec()


@cache
def _build_spec() -> OpenAPI:
    config = Config(
        extra_media_type_deserializers={"application/problem+json": json.loads},
        security_provider_factory=_Providers(),
    )
    return OpenAPI.from_dict(spec_document(), config=config)


@cache
def _registry() -> Registry[Any]:
    return Registry().with_resource(_SPEC_URI, Resource.from_contents(spec_document(), default_specification=DRAFT4))


def schema_errors(instance: Any, pointer: str) -> list[str]:
    """Violations of the schema at ``pointer`` (a JSON pointer into the spec)."""
    validator = OAS30Validator(
        {"$ref": f"{_SPEC_URI}#{pointer}"}, registry=_registry(), format_checker=oas30_format_checker
    )
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(instance)]


def _describe(exc: BaseException) -> str:
    parts = [f"{type(exc).__name__}: {exc}"]
    cause = exc.__cause__
    for error in getattr(cause, "schema_errors", ()) or ():
        parts.append(f"  - {'/'.join(map(str, error.absolute_path))}: {error.message}")
    if cause is not None and not getattr(cause, "schema_errors", None):
        parts.append(f"  cause: {cause!r}")
    return "\n".join(parts)


# --------------------------------------------------------------------------- faults


class Fault(enum.StrEnum):
    TIMEOUT = "timeout"  # act, then answer after ``FakePsp.delay`` (too late)
    UNAVAILABLE = "unavailable"  # 503 ServicoIndisponivel
    ERROR = "error"  # 500 ErroInternoDoServidor
    GATEWAY_TIMEOUT = "gateway_timeout"  # 504 IndisponibilidadePorTempoEsgotado
    DECLINED = "declined"  # 400 problem with violations
    FORBIDDEN = "forbidden"  # 403 AcessoNegado
    UNAUTHORIZED = "unauthorized"  # 401: the token was revoked
    GARBAGE = "garbage"  # a 2xx that is not JSON
    INVALID_EMV = "invalid_emv"  # cob.put, rec.get: answers a BR Code with a broken CRC (cob.put creates it first)
    LOST_ANSWER = "lost_answer"  # act, then 500 (the answer is lost on the way)
    RESET = "reset"  # close the connection without an answer
    DRIP = "drip"  # act, then answer one header byte every ``FakePsp.drip_interval`` until the client hangs up


#: Operations faults can target.
OPERATIONS = (
    "token",
    "cob.put",
    "cob.get",
    "cob.patch",
    "pix.get",
    "devolucao.put",
    "devolucao.get",
    "pix.list",
    "cob.list",
    "cobv.put",
    "cobv.get",
    "cobv.patch",
    "lotecobv.put",
    "lotecobv.get",
    "locrec.post",
    "rec.post",
    "rec.get",
    "rec.patch",
    "rec.list",
    "solicrec.post",
    "cobr.put",
    "cobr.get",
    "cobr.patch",
    "cobr.retentativa",
)


# --------------------------------------------------------------------------- the server


def problem(status: int, kind: str, title: str, detail: str = "", **extra: Any) -> dict[str, Any]:
    body = {"type": ERROR_TYPE + kind, "title": title, "status": status, **extra}
    if detail:
        body["detail"] = detail
    return body


@dataclass
class FakePsp(FakeServer[Fault]):
    #: "immediate": a devolução is DEVOLVIDO at once; "async": EM_PROCESSAMENTO until settle_refund().
    refund_mode: str = "immediate"
    #: False: a PUT /cob on a txid in use is refused (as some PSPs do); True: answers the charge again.
    idempotent_put: bool = False

    #: Most records per page of GET /pix and GET /cob, whatever the client asks (a PSP may page smaller).
    list_page_size: int = 100

    cobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    pix: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Due-date charges by txid and their batches by id (tests/acquirers/fake_psp_cobv.py).
    cobvs: dict[str, dict[str, Any]] = field(default_factory=dict)
    lotes: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: Pix Automático (tests/acquirers/fake_psp_rec.py): recurrences by idRec, their locations by id,
    #: push requests by idSolicRec, cycles by txid.
    recs: dict[str, dict[str, Any]] = field(default_factory=dict)
    locrecs: dict[int, dict[str, Any]] = field(default_factory=dict)
    solicrecs: dict[str, dict[str, Any]] = field(default_factory=dict)
    cobrs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: False: a paid cobr is answered without its ``pix[]`` (a PSP showing the Pix only in ``tentativas``).
    cobr_pix: bool = True
    #: Devoluções the PSP has taken but its API does not show yet, by e2e id (see withhold_refund).
    withheld: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _next_loc: int = 1000

    operations = OPERATIONS

    def handler(self) -> type[FakeHandler]:
        return Handler

    def warm_up(self) -> None:
        spec()
        _registry()

    # ------------------------------------------------------------------ test API

    @property
    def base_url(self) -> str:
        return self.url + API_PREFIX

    @property
    def token_url(self) -> str:
        return self.url + TOKEN_PATH

    def pay(self, txid: str, *, notify: bool = False, amount: str | None = None) -> str:
        """A payer pays the charge: the Pix is recorded, the charge CONCLUIDA,
        and (``notify``) the callback POSTed to ``webhook_url + "/pix"``."""
        with self.lock:
            cob = self.cobs[txid]
            assert cob["status"] == "ATIVA", cob["status"]
            e2e_id = new_e2e_id(PSP_ISPB)
            pix = {
                "endToEndId": e2e_id,
                "txid": txid,
                "valor": amount or cob["valor"]["original"],
                "chave": cob["chave"],
                "horario": now_iso(),
                "infoPagador": "Pagamento de teste",
            }
            self.pix[e2e_id] = pix
            cob["status"] = "CONCLUIDA"
            cob["pix"] = [pix]
        if notify:
            self.notify([e2e_id])
        return e2e_id

    def receive(self, *, txid: str | None, amount: str, at: str | None = None) -> str:
        """A Pix the PSP received that no charge of its own paid (a txid it
        never issued, or none): only its listing shows it."""
        e2e_id = new_e2e_id(PSP_ISPB)
        pix: dict[str, Any] = {"endToEndId": e2e_id, "valor": amount, "chave": self.chave, "horario": at or now_iso()}
        if txid:
            pix["txid"] = txid
        with self.lock:
            self.pix[e2e_id] = pix
        return e2e_id

    def settle_refund(self, e2e_id: str, refund_id: str, *, status: str = "DEVOLVIDO", notify: bool = False) -> None:
        """A devolução reaches its final status; the callback says so (the spec's rule)."""
        with self.lock:
            (devolucao,) = [d for d in self.pix[e2e_id].get("devolucoes", []) if d["id"] == refund_id]
            devolucao["status"] = status
            if status == "DEVOLVIDO":
                devolucao["horario"]["liquidacao"] = now_iso()
            else:
                devolucao["motivo"] = "Conta do pagador encerrada"
        if notify:
            self.notify([e2e_id])

    def withhold_refund(self, e2e_id: str, refund_id: str) -> None:
        """The PSP took this devolução but its API does not show it yet (it
        queues behind its side of the SPI): ``GET`` answers 404, and a
        ``PUT`` with its id is refused as over the Pix's value (the queued one
        counts), until :meth:`land_refund`."""
        with self.lock:
            devolucoes = self.pix[e2e_id]["devolucoes"]
            (devolucao,) = [d for d in devolucoes if d["id"] == refund_id]
            devolucoes.remove(devolucao)
            self.withheld.setdefault(e2e_id, []).append(devolucao)

    def land_refund(self, e2e_id: str, refund_id: str) -> None:
        """A withheld devolução shows up, settled."""
        with self.lock:
            (devolucao,) = [d for d in self.withheld[e2e_id] if d["id"] == refund_id]
            self.withheld[e2e_id].remove(devolucao)
            devolucao["status"] = "DEVOLVIDO"
            devolucao["horario"]["liquidacao"] = now_iso()
            self.pix[e2e_id].setdefault("devolucoes", []).append(devolucao)

    def callback_body(self, e2e_ids: list[str]) -> dict[str, Any]:
        """The ``{webhookUrl}/pix`` callback for these Pix, validated against
        the spec's ``WebhookPixBody``."""
        with self.lock:
            payload = {"pix": [json.loads(json.dumps(self.pix[e])) for e in e2e_ids]}
        schema = "/components/requestBodies/WebhookPixBody/content/application~1json/schema"
        for error in schema_errors(payload, schema):
            self.violations.append(f"callback body: {error}")
        return payload

    def notify(self, e2e_ids: list[str]) -> int:
        """POST the callback to ``webhook_url + "/pix"`` over HTTP, as the PSP
        would (in tests, straight to the live server: mTLS belongs to the edge),
        and return our service's status code."""
        return self.post_callback(self.callback_body(e2e_ids))

    # ------------------------------------------------------------------ handling

    def check_request(self, request: MockRequest) -> str | None:
        try:
            spec().validate_request(request)
        except Exception as exc:  # noqa: BLE001 - every failure is a violation to report
            return _describe(exc)
        return None

    def check_response(self, request: MockRequest, status: int, body: bytes, content_type: str) -> None:
        response = MockResponse(body, status_code=status, content_type=content_type)
        try:
            spec().validate_response(request, response)
        except ResponseNotFound:
            if status not in GENERAL_ERROR_STATUSES:
                self.violations.append(f"answer {request.method} {request.path}: {status} not in the spec")
                return
            for error in schema_errors(json.loads(body), "/components/schemas/Problema"):
                self.violations.append(f"answer {request.method} {request.path} {status}: {error}")
        except Exception as exc:  # noqa: BLE001 - every failure is a violation to report
            self.violations.append(f"answer {request.method} {request.path} {status}: {_describe(exc)}")


class Handler(CobvHandlerMixin, RecHandlerMixin, FakeHandler):
    @property
    def psp(self) -> FakePsp:
        return self.server.fake

    # ------------------------------------------------------------------ plumbing

    def _handle(self, method: str) -> None:
        incoming = self._receive(method)
        raw, parsed, path = incoming.raw, incoming.body, incoming.path
        operation = "token" if path == TOKEN_PATH and method == "POST" else _operation(method, path)
        self._record(operation, incoming)
        if operation == "token":
            self._token(raw)
            return
        request = MockRequest(
            SPEC_HOST,
            method,
            path,
            args=dict(urllib.parse.parse_qsl(incoming.query)),
            headers=dict(self.headers.items()),
            data=raw,
            content_type=(self.headers.get("Content-Type") or "application/json").lower(),
        )
        if operation is None:
            self.psp.violations.append(f"{method} {path}: not an operation the fake (or the adapter) should use")
            self._send(request, 404, problem(404, "NaoEncontrado", "Não encontrado"))
            return
        invalid = self.psp.check_request(request)
        if invalid:
            self.psp.violations.append(f"request {method} {path}: {invalid}")
            self._send(request, 400, problem(400, "RequisicaoInvalida", "Requisição inválida", invalid[:500]))
            return
        token = (self.headers.get("Authorization") or "")[7:]
        if token not in self.psp.tokens:
            self._send(request, 401, problem(401, "NaoAutorizado", "Token inválido ou expirado"))
            return
        fault = self.psp.next_fault(operation)
        if fault is Fault.RESET:
            self._hang_up()
            return
        if fault is Fault.UNAUTHORIZED:
            with self.psp.lock:
                self.psp.tokens.discard(token)
            self._send(request, 401, problem(401, "NaoAutorizado", "Token revogado"))
            return
        if fault in _FAULT_ANSWERS:
            status, body = _FAULT_ANSWERS[fault]
            self._send(request, status, body)
            return
        if fault is Fault.GARBAGE:
            self._send_garbage(method)
            return
        status, body = getattr(self, "_" + operation.replace(".", "_"))(request, parsed, fault)
        if fault is Fault.DRIP:
            self._drip()
            return
        if fault is Fault.TIMEOUT:
            self._linger(self.psp.delay)
        if fault is Fault.LOST_ANSWER:
            self._send(request, 500, problem(500, "ErroInternoDoServidor", "Erro interno"))
            return
        self._send(request, status, body)

    def _send(self, request: MockRequest, status: int, body: dict[str, Any] | None) -> None:
        if body is None:  # an answer the spec gives no content (lotecobv's 202)
            self.psp.check_response(request, status, b"", "application/json")
            self._send_raw(status, b"", "application/json")
            return
        content_type = "application/json" if status < 400 else "application/problem+json"
        data = json.dumps(body, ensure_ascii=False).encode()
        self.psp.check_response(request, status, data, content_type)
        self._send_raw(status, data, content_type)

    # ------------------------------------------------------------------ OAuth2 (RFC 6749 §4.4)

    def _token_form(self, raw: bytes) -> tuple[list[str], str]:
        errors = []
        if self._media_type() != "application/x-www-form-urlencoded":
            errors.append("token request is not form-encoded")
        fields = dict(urllib.parse.parse_qsl(raw.decode()))
        if fields.get("grant_type") != "client_credentials":
            errors.append(f"grant_type is {fields.get('grant_type')!r}")
        scopes = set(fields.get("scope", "").split())
        if not scopes <= {"cob.write", "cob.read", "pix.write", "pix.read"} | COBV_SCOPES | REC_SCOPES:
            errors.append(f"unexpected scopes {sorted(scopes)}")
        return errors, " ".join(scopes)

    # ------------------------------------------------------------------ API Pix

    def _cob_put(self, request: MockRequest, body: dict[str, Any], fault: Fault | None) -> tuple[int, Any]:
        psp = self.psp
        txid = request.path.rsplit("/", 1)[1]
        with psp.lock:
            if txid in psp.cobs:
                if psp.idempotent_put:
                    return 201, psp.cobs[txid]
                return 400, problem(
                    400,
                    "CobOperacaoInvalida",
                    "Cobrança inválida.",
                    "O txid informado já está em uso.",
                    violacoes=[{"razao": "txid em uso", "propriedade": "txid", "valor": txid}],
                )
            psp._next_loc += 1
            location = f"pix.fakepsp.test/qr/v2/{secrets.token_hex(16)}"
            created = now_iso()
            amount = int(body["valor"]["original"].replace(".", ""))
            emv = brcode.encode_dynamic(
                location=location, amount=amount, merchant_name="FAKE PSP RECEBEDOR", merchant_city="SAO PAULO"
            )
            if fault is Fault.INVALID_EMV:
                emv = emv[:-4] + ("0000" if emv[-4:] != "0000" else "FFFF")
            cob = {
                "calendario": {"criacao": created, "expiracao": body["calendario"].get("expiracao", 86400)},
                "txid": txid,
                "revisao": 0,
                "loc": {"id": psp._next_loc, "location": location, "tipoCob": "cob", "criacao": created, "txid": txid},
                "location": location,
                "status": "ATIVA",
                "valor": {"original": body["valor"]["original"], "modalidadeAlteracao": 0},
                "chave": body["chave"],
                "pixCopiaECola": emv,
            }
            for optional in ("devedor", "solicitacaoPagador"):
                if optional in body:
                    cob[optional] = body[optional]
            psp.cobs[txid] = cob
            return 201, cob

    def _cob_get(self, request: MockRequest, body: Any, fault: Fault | None) -> tuple[int, Any]:
        txid = request.path.rsplit("/", 1)[1]
        with self.psp.lock:
            cob = self.psp.cobs.get(txid)
            if cob is None:
                return 404, problem(404, "CobNaoEncontrado", "Cobrança não encontrada.")
            return 200, json.loads(json.dumps(cob))

    def _cob_patch(self, request: MockRequest, body: dict[str, Any], fault: Fault | None) -> tuple[int, Any]:
        txid = request.path.rsplit("/", 1)[1]
        with self.psp.lock:
            cob = self.psp.cobs.get(txid)
            if cob is None:
                return 404, problem(404, "CobNaoEncontrado", "Cobrança não encontrada.")
            if cob["status"] != "ATIVA":
                return 400, problem(
                    400, "CobOperacaoInvalida", "Cobrança inválida.", f"A cobrança está {cob['status']}."
                )
            if body.get("status") == "REMOVIDA_PELO_USUARIO_RECEBEDOR":
                cob["status"] = "REMOVIDA_PELO_USUARIO_RECEBEDOR"
                cob["revisao"] += 1
            return 200, {k: v for k, v in cob.items() if k != "pix"}

    def _pix_get(self, request: MockRequest, body: Any, fault: Fault | None) -> tuple[int, Any]:
        e2e_id = request.path.rsplit("/", 1)[1]
        with self.psp.lock:
            pix = self.psp.pix.get(e2e_id)
            if pix is None:
                return 404, problem(404, "NaoEncontrado", "Pix não encontrado.")
            return 200, json.loads(json.dumps(pix))

    def _page(self, request: MockRequest, key: str, records: list[dict[str, Any]]) -> tuple[int, Any]:
        """One page of a listing, as ``PixConsultados`` / ``CobsConsultadas``."""
        args = request.parameters.query
        page = int(args.get("paginacao.paginaAtual", 0))
        size = min(int(args.get("paginacao.itensPorPagina", 100)), self.psp.list_page_size)
        pages = max(1, -(-len(records) // size))
        paginacao = {
            "paginaAtual": page,
            "itensPorPagina": size,
            "quantidadeDePaginas": pages,
            "quantidadeTotalDeItens": len(records),
        }
        parametros = {"inicio": args["inicio"], "fim": args["fim"], "paginacao": paginacao}
        return 200, {"parametros": parametros, key: records[page * size : (page + 1) * size]}

    def _pix_list(self, request: MockRequest, body: Any, fault: Fault | None) -> tuple[int, Any]:
        start, end = _window(request)
        with self.psp.lock:
            found = [p for p in self.psp.pix.values() if start <= _moment(p["horario"]) <= end]
            found = json.loads(json.dumps(sorted(found, key=lambda p: (p["horario"], p["endToEndId"]))))
        return self._page(request, "pix", found)

    def _cob_list(self, request: MockRequest, body: Any, fault: Fault | None) -> tuple[int, Any]:
        start, end = _window(request)
        with self.psp.lock:
            found = [c for c in self.psp.cobs.values() if start <= _moment(c["calendario"]["criacao"]) <= end]
            found = json.loads(json.dumps(sorted(found, key=lambda c: (c["calendario"]["criacao"], c["txid"]))))
        return self._page(request, "cobs", found)

    def _devolucao_put(self, request: MockRequest, body: dict[str, Any], fault: Fault | None) -> tuple[int, Any]:
        *_, e2e_id, _, refund_id = request.path.split("/")
        with self.psp.lock:
            pix = self.psp.pix.get(e2e_id)
            if pix is None:
                return 404, problem(404, "PixNaoEncontrado", "Pix não encontrado.")
            existing = [d for d in pix.get("devolucoes", []) if d["id"] == refund_id]
            if existing:
                return 400, problem(400, "PixDevolucaoInvalida", "Devolução inválida.", "id de devolução em uso.")
            queued = pix.get("devolucoes", []) + self.psp.withheld.get(e2e_id, [])
            returned = sum(int(d["valor"].replace(".", "")) for d in queued)
            if returned + int(body["valor"].replace(".", "")) > int(pix["valor"].replace(".", "")):
                return 400, problem(400, "PixDevolucaoInvalida", "Devolução inválida.", "Valor acima do Pix.")
            devolucao = {
                "id": refund_id,
                "rtrId": f"D{PSP_ISPB}{dt.datetime.now(dt.UTC):%Y%m%d%H%M}" + secrets.token_hex(6)[:11],
                "valor": body["valor"],
                "natureza": body.get("natureza", "ORIGINAL"),
                "horario": {"solicitacao": now_iso()},
                "status": "EM_PROCESSAMENTO",
            }
            if self.psp.refund_mode == "immediate":
                devolucao["status"] = "DEVOLVIDO"
                devolucao["horario"]["liquidacao"] = now_iso()
            pix.setdefault("devolucoes", []).append(devolucao)
            return 201, json.loads(json.dumps(devolucao))

    def _devolucao_get(self, request: MockRequest, body: Any, fault: Fault | None) -> tuple[int, Any]:
        *_, e2e_id, _, refund_id = request.path.split("/")
        with self.psp.lock:
            pix = self.psp.pix.get(e2e_id) or {}
            found = [d for d in pix.get("devolucoes", []) if d["id"] == refund_id]
            if not found:
                return 404, problem(404, "NaoEncontrado", "Devolução não encontrada.")
            return 200, json.loads(json.dumps(found[0]))


_FAULT_ANSWERS: dict[Fault, tuple[int, dict[str, Any]]] = {
    Fault.UNAVAILABLE: (503, problem(503, "ServicoIndisponivel", "Serviço indisponível", "Manutenção programada.")),
    Fault.ERROR: (500, problem(500, "ErroInternoDoServidor", "Erro interno do servidor")),
    Fault.GATEWAY_TIMEOUT: (504, problem(504, "IndisponibilidadePorTempoEsgotado", "Tempo esgotado")),
    Fault.DECLINED: (
        400,
        problem(
            400,
            "CobOperacaoInvalida",
            "Cobrança inválida.",
            "A requisição que busca alterar ou criar uma cobrança não respeita o schema.",
            correlationId="corr-123",
            violacoes=[{"razao": "chave não pertence ao recebedor", "propriedade": "cob.chave", "valor": "x"}],
        ),
    ),
    Fault.FORBIDDEN: (403, problem(403, "AcessoNegado", "Acesso negado", "Escopo insuficiente.")),
}


def _moment(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _window(request: MockRequest) -> tuple[dt.datetime, dt.datetime]:
    return _moment(request.parameters.query["inicio"]), _moment(request.parameters.query["fim"])


def _operation(method: str, path: str) -> str | None:
    if not path.startswith(API_PREFIX + "/"):
        return None
    segments = path[len(API_PREFIX) + 1 :].split("/")
    if len(segments) == 1 and segments[0] in ("pix", "cob") and method == "GET":
        return f"{segments[0]}.list"
    if len(segments) == 2 and segments[0] == "cob":
        return {"PUT": "cob.put", "GET": "cob.get", "PATCH": "cob.patch"}.get(method)
    if len(segments) == 2 and segments[0] in ("cobv", "lotecobv"):
        return {
            "PUT": f"{segments[0]}.put",
            "GET": f"{segments[0]}.get",
            "PATCH": "cobv.patch" if segments[0] == "cobv" else None,
        }.get(method)
    if len(segments) == 2 and segments[0] == "pix" and method == "GET":
        return "pix.get"
    if len(segments) == 4 and segments[0] == "pix" and segments[2] == "devolucao":
        return {"PUT": "devolucao.put", "GET": "devolucao.get"}.get(method)
    return _rec_operation(method, segments)


def _rec_operation(method: str, segments: list[str]) -> str | None:
    """Pix Automático's operations (fake_psp_rec)."""
    if segments == ["locrec"] and method == "POST":
        return "locrec.post"
    if segments == ["solicrec"] and method == "POST":
        return "solicrec.post"
    if segments == ["rec"]:
        return {"POST": "rec.post", "GET": "rec.list"}.get(method)
    if len(segments) == 2 and segments[0] == "rec":
        return {"GET": "rec.get", "PATCH": "rec.patch"}.get(method)
    if len(segments) == 2 and segments[0] == "cobr":
        return {"PUT": "cobr.put", "GET": "cobr.get", "PATCH": "cobr.patch"}.get(method)
    if len(segments) == 4 and segments[0] == "cobr" and segments[2] == "retentativa" and method == "POST":
        return "cobr.retentativa"
    return None
