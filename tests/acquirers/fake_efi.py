"""A fake of Efí's "send Pix" API (the part ``efi_pix`` uses), on loopback,
behind mTLS (certificates from ``fake_server.Pki``, made with trustme).

Efí publishes no OpenAPI document for these endpoints, so requests are
checked here, strictly, against the fields Efí's documentation gives; every
departure is recorded in :attr:`FakeEfi.violations` and the fixture fails the
test on any:

- ``POST /oauth/token``: HTTP Basic ``client_id:client_secret``, JSON body
  exactly ``{"grant_type": "client_credentials"}``;
- ``PUT /v3/gn/pix/{idEnvio}`` (``^[a-zA-Z0-9]{1,35}$``): JSON body with
  exactly ``valor`` (``^\\d{1,10}\\.\\d{2}$``, > 0), ``pagador`` (``chave``, the
  account's key; optional ``infoPagador`` ≤ 140) and ``favorecido``
  (``chave`` ≤ 77; optional ``cpf``/``cnpj``); answers 201 ``EM_PROCESSAMENTO``;
  a reused ``idEnvio`` is a 409 ``id_envio_duplicado`` (as documented);
- ``GET /v2/gn/pix/enviados/id-envio/{idEnvio}``: no body; the send, or a 404
  problem ``PixEnviadoNaoEncontrado``;
- ``GET /v2/gn/pix/enviados?inicio&fim`` (RFC 3339; optional
  ``paginacao.paginaAtual`` and ``paginacao.itensPorPagina``): no body; the
  sends requested in the window, ``{"parametros": {inicio, fim, paginacao},
  "pix": [...]}`` (paging as the API Pix's listings);
- ``GET /v2/gn/chaves/{chave}/infos`` (the DICT lookup; route and shape
  ASSUMED, acquirers.adapters.apipix.efi_keys): no body; the owner registered
  in :attr:`FakeEfi.owners`, else a 404 ``chave_nao_encontrada``. A send whose
  ``favorecido.cpf``/``cnpj`` is not its key's registered owner's document is
  refused (400 ``favorecido_invalido``), nothing recorded;
- MED infractions, ``GET /v2/gn/infracoes`` and ``POST
  /v2/gn/infracoes/{idInfracao}/defesa``: :mod:`tests.acquirers.fake_efi_med`;
- every call with our client certificate, every API call with a token this
  fake issued.

Errors are Efí's own ``{"nome", "mensagem"}``, except the lookup's 404.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.acquirers import fake_efi_med as med
from tests.acquirers.fake_server import TOKEN_PATH, FakeHandler, FakeServer, new_e2e_id, now_iso

EFI_ISPB = "09089356"
_ID_ENVIO = re.compile(r"^[a-zA-Z0-9]{1,35}$")
_VALOR = re.compile(r"^\d{1,10}\.\d{2}$")
SEND_PREFIX = "/v3/gn/pix/"
STATUS_PREFIX = "/v2/gn/pix/enviados/id-envio/"
LIST_PATH = "/v2/gn/pix/enviados"
KEY_PREFIX, KEY_SUFFIX = "/v2/gn/chaves/", "/infos"
OPERATIONS = ("token", "send", "status", "list", "infractions", "defense", "key")


class EfiFault(enum.StrEnum):
    TIMEOUT = "timeout"  # act (record the send), then answer after ``FakeEfi.delay``: too late
    # Record the send only after ``FakeEfi.delay`` (lookups meanwhile: 404
    # PixEnviadoNaoEncontrado), then answer: Efí's queue was slow, not empty.
    LATE_RECORD = "late_record"
    # 409 id_envio_duplicado while the lookup still says 404 (Efí's record lags).
    DUPLICATE = "duplicate"
    LOST_ANSWER = "lost_answer"  # act, then 500: the answer is lost on the way
    UNAVAILABLE = "unavailable"  # 503, nothing done
    ERROR = "error"  # 500 erro_aplicacao, nothing done
    DECLINED = "declined"  # 422 pagamento_negado, nothing recorded
    INSUFFICIENT = "insufficient"  # 400 saldo_insuficiente, nothing recorded
    FORBIDDEN = "forbidden"  # 403 (scope missing): no answer about the send
    NOT_FOUND_HTML = "not_found_html"  # a 404 that is not Efí's (a proxy's page)
    GARBAGE = "garbage"  # a 2xx that is not JSON
    RESET = "reset"  # close the connection without an answer


def efi_error(nome: str, mensagem: str) -> dict[str, str]:
    return {"nome": nome, "mensagem": mensagem}


NOT_FOUND_PROBLEM = {
    "type": "https://pix.bcb.gov.br/api/v2/error/PixEnviadoNaoEncontrado",
    "title": "Não Encontrado",
    "status": 404,
    "detail": "Pix enviado não encontrado para o idEnvio informado.",
}

_FAULT_ANSWERS: dict[EfiFault, tuple[int, dict[str, Any]]] = {
    EfiFault.UNAVAILABLE: (503, efi_error("servico_indisponivel", "Serviço temporariamente indisponível")),
    EfiFault.ERROR: (500, efi_error("erro_aplicacao", "Ocorreu um erro ao validar a chave")),
    EfiFault.DECLINED: (422, efi_error("pagamento_negado", "Pagamento negado por análises")),
    EfiFault.INSUFFICIENT: (400, efi_error("saldo_insuficiente", "Saldo insuficiente para realizar o envio")),
    EfiFault.FORBIDDEN: (403, efi_error("acesso_negado", "Escopo gn.pix.send.read não liberado")),
    EfiFault.DUPLICATE: (
        409,
        efi_error("id_envio_duplicado", "O id de envio informado já foi utilizado em outro pagamento"),
    ),
}


@dataclass
class FakeEfi(FakeServer[EfiFault]):
    """``chave`` is the paying account's key: a send from another key is
    refused (chave_invalida)."""

    #: What a new send becomes right after its 201 EM_PROCESSAMENTO answer:
    #: "processing" (until :meth:`settle`), "paid" (REALIZADO) or "failed" (NAO_REALIZADO).
    outcome: str = "processing"
    #: Called with the operation ("send", "status") while its request is
    #: held: after the fake acted, before it answers (a test's fault
    #: injection elsewhere, e.g. dropping the caller's database connection).
    while_holding: Callable[[str], None] | None = None

    #: Most records per page of the sent listing.
    list_page_size: int = 100

    sends: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: MED infractions by ``idInfracao``, and every defence taken, in order.
    infractions: dict[str, dict[str, Any]] = field(default_factory=dict)
    defenses: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: The DICT as this fake knows it: key → ``{"nome", "cpf"|"cnpj", "ispb"}`` (full documents).
    owners: dict[str, dict[str, str]] = field(default_factory=dict)

    operations = OPERATIONS

    def handler(self) -> type[FakeHandler]:
        return Handler

    # ------------------------------------------------------------------ test API

    @property
    def base_url(self) -> str:
        return self.url

    def settle(self, id_envio: str, status: str = "REALIZADO", *, notify: bool = False) -> int | None:
        """The send reaches its final status; with ``notify``, the callback
        goes to ``webhook_url + "/pix"`` and our status code is returned."""
        with self.lock:
            _finish(self.sends[id_envio], status)
        return self.notify([id_envio]) if notify else None

    def record(self, id_envio: str, valor: str, status: str = "REALIZADO", *, chave: str = "x@example.com") -> str:
        """A send Efí holds however it got there (our send whose answer we
        lost, say): only the lookups and the listing show it."""
        send: dict[str, Any] = {
            "endToEndId": new_e2e_id(EFI_ISPB),
            "idEnvio": id_envio,
            "valor": valor,
            "chave": self.chave,
            "status": "EM_PROCESSAMENTO",
            "horario": {"solicitacao": now_iso()},
            "favorecido": {"chave": chave},
        }
        if status != "EM_PROCESSAMENTO":
            _finish(send, status)
        with self.lock:
            self.sends[id_envio] = send
        return str(send["endToEndId"])

    def change_mind(self, id_envio: str, status: str) -> None:
        """A self-contradicting PSP: a final status replaced by another."""
        with self.lock:
            send = self.sends[id_envio]
            send.pop("gnExtras", None)
            send["horario"].pop("liquidacao", None)
            _finish(send, status)

    def callback_body(self, ids: list[str]) -> dict[str, Any]:
        """The ``{webhookUrl}/pix`` callback for these sends, as documented."""
        entries = []
        with self.lock:
            for id_envio in ids:
                send = self.sends[id_envio]
                extras: dict[str, Any] = {"idEnvio": id_envio}
                if "gnExtras" in send:
                    extras |= send["gnExtras"]
                entries.append(
                    {
                        "endToEndId": send["endToEndId"],
                        "chave": send["chave"],
                        "tipo": "SOLICITACAO",
                        "status": send["status"],
                        "valor": send["valor"],
                        "horario": send["horario"].get("liquidacao"),
                        "gnExtras": extras,
                    }
                )
        return {"pix": entries}

    def notify(self, ids: list[str]) -> int:
        return self.post_callback(self.callback_body(ids))


def _finish(send: dict[str, Any], status: str) -> None:
    assert status in ("REALIZADO", "NAO_REALIZADO"), status
    send["status"] = status
    if status == "REALIZADO":
        send["horario"]["liquidacao"] = now_iso()
    else:
        send["gnExtras"] = {
            "erro": {
                "codigo": "AC03",
                "origem": "PSP do usuário recebedor",
                "motivo": "Número da agência e/ou conta transacional do usuário recebedor inexistente ou inválido",
            }
        }


def _operation(method: str, path: str) -> tuple[str | None, str]:
    if path == TOKEN_PATH and method == "POST":
        return "token", ""
    operation, ident = med.med_operation(method, path)
    if operation is not None:
        return operation, ident
    if path.startswith(KEY_PREFIX) and path.endswith(KEY_SUFFIX) and method == "GET":
        return "key", urllib.parse.unquote(path[len(KEY_PREFIX) : -len(KEY_SUFFIX)])
    if path.startswith(SEND_PREFIX) and method == "PUT":
        return "send", path[len(SEND_PREFIX) :]
    if path == LIST_PATH and method == "GET":
        return "list", ""
    if path.startswith(STATUS_PREFIX) and method == "GET":
        return "status", path[len(STATUS_PREFIX) :]
    return None, ""


def _moment(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _list_errors(query: str, raw: bytes) -> list[str]:
    """Departures of a listing request from Efí's documented parameters."""
    args = dict(urllib.parse.parse_qsl(query))
    errors = ["listing with a body"] if raw else []
    allowed = {"inicio", "fim", "paginacao.paginaAtual", "paginacao.itensPorPagina"}
    if not set(args) <= allowed:
        errors.append(f"unknown parameters {sorted(set(args) - allowed)}")
    for name in ("inicio", "fim"):
        try:
            moment = _moment(args[name])
        except (KeyError, ValueError):
            errors.append(f"{name} is missing or not RFC 3339")
            continue
        if moment.tzinfo is None:
            errors.append(f"{name} has no offset")
    for name in ("paginacao.paginaAtual", "paginacao.itensPorPagina"):
        if name in args and not args[name].isdigit():
            errors.append(f"{name} is not a number")
    return errors


def send_body_errors(body: Any) -> list[str]:
    """Departures of a send body from Efí's documented fields (key transfers)."""
    if not isinstance(body, dict):
        return ["body is not a JSON object"]
    errors = []
    if set(body) != {"valor", "pagador", "favorecido"}:
        errors.append(f"body fields {sorted(body)}, expected valor, pagador, favorecido")
    amount = body.get("valor")
    if not isinstance(amount, str) or not _VALOR.match(amount) or int(amount.replace(".", "")) <= 0:
        errors.append(f"valor {amount!r} is not a positive decimal with 2 places")
    pagador = body.get("pagador")
    if not isinstance(pagador, dict) or not set(pagador) <= {"chave", "infoPagador"} or "chave" not in pagador:
        errors.append(f"pagador {pagador!r}: chave and optional infoPagador only")
    elif not isinstance(pagador.get("infoPagador", ""), str) or len(pagador.get("infoPagador", "")) > 140:
        errors.append("pagador.infoPagador is not text of at most 140 characters")
    favorecido = body.get("favorecido")
    if not isinstance(favorecido, dict) or not set(favorecido) <= {"chave", "cpf", "cnpj"} or "chave" not in favorecido:
        errors.append(f"favorecido {favorecido!r}: chave (and optional cpf/cnpj) only")
    elif not isinstance(favorecido["chave"], str) or not 1 <= len(favorecido["chave"]) <= 77:
        errors.append("favorecido.chave is not a key of at most 77 characters")
    return errors


class Handler(FakeHandler):
    @property
    def efi(self) -> FakeEfi:
        return self.server.fake

    def _handle(self, method: str) -> None:
        efi = self.efi
        incoming = self._receive(method)
        raw, parsed, path = incoming.raw, incoming.body, incoming.path
        operation, id_envio = _operation(method, path)
        self._record(operation, incoming)
        if operation == "token":
            self._token(raw)
            return
        if operation is None:
            efi.violations.append(f"{method} {path}: not an operation efi_pix should use")
            self._send(404, efi_error("rota_nao_encontrada", "Rota não encontrada"))
            return
        errors = []
        if operation in ("list", "infractions"):
            errors += _list_errors(incoming.query, raw)
        elif operation == "defense":
            if self._media_type() != "application/json":
                errors.append("defence body is not application/json")
            errors += med.defense_body_errors(parsed)
        elif operation == "key":
            pass  # any key: the DICT answers
        elif not _ID_ENVIO.match(id_envio):
            errors.append(f"idEnvio {id_envio!r} does not match ^[a-zA-Z0-9]{{1,35}}$")
        if operation == "send":
            if self._media_type() != "application/json":
                errors.append("send body is not application/json")
            errors += send_body_errors(parsed)
        elif raw and operation != "defense":
            errors.append("status lookup with a body")
        if errors:
            efi.violations.extend(f"{method} {path}: {e}" for e in errors)
            self._send(400, efi_error("valor_invalido", "; ".join(errors)[:500]))
            return
        token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        if token not in efi.tokens:
            self._send(401, efi_error("nao_autorizado", "Token inválido ou expirado"))
            return
        fault = efi.next_fault(operation)
        if fault is EfiFault.RESET:
            self._hang_up()
            return
        if fault in _FAULT_ANSWERS:
            self._send(*_FAULT_ANSWERS[fault])
            return
        if fault is EfiFault.NOT_FOUND_HTML:
            self._send_raw(404, b"<html><body>404 Not Found</body></html>", "text/html")
            return
        if fault is EfiFault.GARBAGE:
            self._send_garbage(method)
            return
        if fault is EfiFault.LATE_RECORD:
            self._linger(efi.delay)
        if operation == "list":
            self._send(*self._list(incoming.query))
            return
        if operation == "infractions":
            self._send(*med.list_answer(efi, incoming.query))
            return
        if operation == "defense":
            answer = med.defense_answer(efi, id_envio, parsed)
            if fault is EfiFault.TIMEOUT:
                self._linger(efi.delay)  # taken, then answered too late
            if fault is EfiFault.LOST_ANSWER:
                self._send(500, efi_error("erro_aplicacao", "Erro interno"))
            elif answer[1] is None:
                self._send_raw(answer[0], b"", "application/json")
            else:
                self._send(answer[0], answer[1])
            return
        if operation == "key":
            self._send(*self._key(id_envio))
            return
        status, body = self._send_pix(id_envio, parsed) if operation == "send" else self._status(id_envio)
        if efi.while_holding is not None:
            efi.while_holding(operation)
        if fault is EfiFault.TIMEOUT:
            self._linger(efi.delay)
        if fault is EfiFault.LOST_ANSWER:
            self._send(500, efi_error("erro_aplicacao", "Erro interno"))
            return
        self._send(status, body)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        self._send_raw(status, json.dumps(body, ensure_ascii=False).encode(), "application/json")

    # ------------------------------------------------------------------ OAuth2, Efí's form

    def _token_form(self, raw: bytes) -> tuple[list[str], str]:
        errors = []
        if self._media_type() != "application/json":
            errors.append("token request is not JSON (Efí's form)")
        try:
            fields = json.loads(raw)
        except ValueError:
            fields = None
        if fields != {"grant_type": "client_credentials"}:
            errors.append(f"token body is {fields!r}, expected exactly grant_type client_credentials")
        return errors, "pix.send"

    # ------------------------------------------------------------------ send and lookup

    def _send_pix(self, id_envio: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        efi = self.efi
        with efi.lock:
            if id_envio in efi.sends:
                return 409, efi_error(
                    "id_envio_duplicado", "O id de envio informado já foi utilizado em outro pagamento"
                )
            owner = efi.owners.get(body["favorecido"]["chave"], {})
            for kind in ("cpf", "cnpj"):
                if kind in body["favorecido"] and owner.get(kind) != body["favorecido"][kind]:
                    return 400, efi_error(
                        "favorecido_invalido", f"O {kind.upper()} informado não é do titular da chave"
                    )
            if body["pagador"]["chave"] != efi.chave:
                return 400, efi_error("chave_invalida", "A chave informada não faz referência à conta Efí autenticada")
            send: dict[str, Any] = {
                "endToEndId": new_e2e_id(EFI_ISPB),
                "idEnvio": id_envio,
                "valor": body["valor"],
                "chave": efi.chave,
                "status": "EM_PROCESSAMENTO",
                "horario": {"solicitacao": now_iso()},
                "favorecido": {"chave": body["favorecido"]["chave"]},
            }
            if "infoPagador" in body["pagador"]:
                send["infoPagador"] = body["pagador"]["infoPagador"]
            efi.sends[id_envio] = send
            answer = {
                "idEnvio": id_envio,
                "e2eId": send["endToEndId"],
                "valor": send["valor"],
                "horario": {"solicitacao": send["horario"]["solicitacao"]},
                "status": "EM_PROCESSAMENTO",
            }
            if efi.outcome != "processing":
                _finish(send, "REALIZADO" if efi.outcome == "paid" else "NAO_REALIZADO")
            return 201, answer

    def _key(self, chave: str) -> tuple[int, dict[str, Any]]:
        with self.efi.lock:
            owner = self.efi.owners.get(chave)
        if owner is None:
            return 404, efi_error("chave_nao_encontrada", "A chave informada não foi encontrada no DICT")
        titular = {"nome": owner["nome"]}
        if "cpf" in owner:
            cpf = owner["cpf"]
            titular["cpf"] = f"***.{cpf[3:6]}.{cpf[6:9]}-**"  # masked, as the DICT discloses it
        else:
            titular["cnpj"] = owner["cnpj"]
        conta = {"ispb": owner.get("ispb", "60746948"), "instituicao": owner.get("instituicao", "BCO BRADESCO S.A.")}
        return 200, {"chave": chave, "titular": titular, "conta": conta}

    def _list(self, query: str) -> tuple[int, dict[str, Any]]:
        args = dict(urllib.parse.parse_qsl(query))
        start, end = _moment(args["inicio"]), _moment(args["fim"])
        page = int(args.get("paginacao.paginaAtual", "0"))
        size = min(int(args.get("paginacao.itensPorPagina", "100")), self.efi.list_page_size)
        with self.efi.lock:
            found = [
                json.loads(json.dumps(s))
                for s in self.efi.sends.values()
                if start <= _moment(s["horario"]["solicitacao"]) <= end
            ]
        found.sort(key=lambda s: (s["horario"]["solicitacao"], s["idEnvio"]))
        paginacao = {
            "paginaAtual": page,
            "itensPorPagina": size,
            "quantidadeDePaginas": max(1, -(-len(found) // size)),
            "quantidadeTotalDeItens": len(found),
        }
        parametros = {"inicio": args["inicio"], "fim": args["fim"], "paginacao": paginacao}
        return 200, {"parametros": parametros, "pix": found[page * size : (page + 1) * size]}

    def _status(self, id_envio: str) -> tuple[int, dict[str, Any]]:
        with self.efi.lock:
            send = self.efi.sends.get(id_envio)
            if send is None:
                return 404, NOT_FOUND_PROBLEM
            return 200, json.loads(json.dumps(send))
