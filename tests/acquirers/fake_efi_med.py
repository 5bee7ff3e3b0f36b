"""The MED part of the Efí fake (``fake_efi.FakeEfi``): infractions on the Pix
the account received, as Efí's SDKs document them (sdk-node-apis-efi
``medList`` / ``medDefense``; Efí publishes no OpenAPI document for them):

- ``GET /v2/gn/infracoes?inicio&fim`` (RFC 3339; optional
  ``paginacao.paginaAtual`` and ``paginacao.itensPorPagina``), no body: the
  infractions created in the window (``criadoEm``; what Efí filters on is
  not documented, this fake takes the narrowest reading), ``{"parametros":
  {inicio, fim, paginacao}, "infracoes": [...]}``;
- ``POST /v2/gn/infracoes/{idInfracao}/defesa`` with exactly ``{"analise":
  "aceito"|"rejeitado", "justificativa": <text>}``: 200, empty body; the
  infraction goes ``EM_DEFESA``. A closed infraction, one past
  ``dadosAnalise.prazoFinalizacao`` or one already defended is refused with
  a 400 in Efí's ``{"nome", "mensagem"}`` (names and words this fake's own).
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import urllib.parse
from typing import TYPE_CHECKING, Any

from tests.acquirers.fake_server import now_iso

if TYPE_CHECKING:
    from tests.acquirers.fake_efi import FakeEfi

LIST_PATH = "/v2/gn/infracoes"
DEFENSE_PREFIX = "/v2/gn/infracoes/"
DEFENSE_SUFFIX = "/defesa"
CLOSED = ("ACEITA", "REJEITADA", "CANCELADA_EFI")


def med_operation(method: str, path: str) -> tuple[str | None, str]:
    if path == LIST_PATH and method == "GET":
        return "infractions", ""
    if path.startswith(DEFENSE_PREFIX) and path.endswith(DEFENSE_SUFFIX) and method == "POST":
        return "defense", urllib.parse.unquote(path[len(DEFENSE_PREFIX) : -len(DEFENSE_SUFFIX)])
    return None, ""


def defense_body_errors(body: Any) -> list[str]:
    if not isinstance(body, dict) or set(body) != {"analise", "justificativa"}:
        return [f"defence body {body!r}: exactly analise and justificativa"]
    errors = []
    if body["analise"] not in ("aceito", "rejeitado"):
        errors.append(f"analise {body['analise']!r} is not aceito or rejeitado")
    if not isinstance(body["justificativa"], str) or not body["justificativa"].strip():
        errors.append("justificativa is not text")
    return errors


def new_infraction(
    efi: FakeEfi,
    *,
    e2e_id: str,
    valor: str,
    status: str = "ABERTA",
    deadline: dt.datetime | None = None,
    created: dt.datetime | None = None,
) -> str:
    """An infraction Efí reports on the Pix ``e2e_id``; its ``idInfracao``."""
    id_infracao = secrets.token_hex(8)
    moment = (created or dt.datetime.now(dt.UTC)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    limit = deadline or dt.datetime.now(dt.UTC) + dt.timedelta(days=7)
    with efi.lock:
        efi.infractions[id_infracao] = {
            "idInfracao": id_infracao,
            "endToEndId": e2e_id,
            "protocolo": str(secrets.randbelow(10**9)),
            "dataTransacao": moment,
            "valor": valor,
            "chave": efi.chave,
            "status": status,
            "razao": "Golpe",
            "tipoSituacao": "golpe",
            "identificadorTicket": [],
            "dadosAnalise": {"abertura": moment, "prazoFinalizacao": limit.isoformat().replace("+00:00", "Z")},
            "origem": {"nomeParticipante": "Banco do Pagador", "conta": "1234", "nome": "Fulano", "documento": "***"},
            "destino": {"nomeParticipante": "Efí", "conta": "5678", "nome": "Loja", "documento": "***"},
            "criadoEm": moment,
            "atualizadoEm": moment,
        }
    return id_infracao


def decide(efi: FakeEfi, id_infracao: str, status: str) -> None:
    """Efí's analysis ends: ``ACEITA``, ``REJEITADA`` or ``CANCELADA_EFI``."""
    assert status in CLOSED, status
    with efi.lock:
        infraction = efi.infractions[id_infracao]
        infraction["status"] = status
        infraction["dadosAnalise"]["finalizacao"] = infraction["atualizadoEm"] = now_iso()


def _moment(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def list_answer(efi: FakeEfi, query: str) -> tuple[int, dict[str, Any]]:
    args = dict(urllib.parse.parse_qsl(query))
    start, end = _moment(args["inicio"]), _moment(args["fim"])
    page = int(args.get("paginacao.paginaAtual", "0"))
    size = min(int(args.get("paginacao.itensPorPagina", "100")), efi.list_page_size)
    with efi.lock:
        found = [json.loads(json.dumps(i)) for i in efi.infractions.values() if start <= _moment(i["criadoEm"]) <= end]
    found.sort(key=lambda i: (i["criadoEm"], i["idInfracao"]))
    paginacao = {
        "paginaAtual": page,
        "itensPorPagina": size,
        "quantidadeDePaginas": max(1, -(-len(found) // size)),
        "quantidadeTotalDeItens": len(found),
    }
    parametros = {"inicio": args["inicio"], "fim": args["fim"], "paginacao": paginacao}
    return 200, {"parametros": parametros, "infracoes": found[page * size : (page + 1) * size]}


def defense_answer(efi: FakeEfi, id_infracao: str, body: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
    """Record the defence and answer (None: the empty 200)."""
    with efi.lock:
        infraction = efi.infractions.get(id_infracao)
        if infraction is None:
            return 404, {"nome": "infracao_nao_encontrada", "mensagem": "Infração não encontrada"}
        if infraction["status"] in CLOSED:
            return 400, {"nome": "infracao_encerrada", "mensagem": "A infração foi encerrada e não aceita defesa"}
        if infraction.get("defesa") is not None:
            return 400, {"nome": "defesa_ja_enviada", "mensagem": "A infração já possui uma defesa"}
        if _moment(infraction["dadosAnalise"]["prazoFinalizacao"]) <= dt.datetime.now(dt.UTC):
            return 400, {"nome": "prazo_expirado", "mensagem": "O prazo de defesa da infração expirou"}
        efi.defenses.append((id_infracao, dict(body)))
        infraction["defesa"] = body["justificativa"]
        infraction["status"] = "EM_DEFESA"
        infraction["dadosAnalise"]["recebimentoDefesa"] = infraction["atualizadoEm"] = now_iso()
        return 200, None
