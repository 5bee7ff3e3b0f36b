"""Efí's side of the payee check (``efi_pix``): the DICT lookup of a Pix
key and the owner's document on a send.

Documented by Efí (its send endpoint, ``PUT /v3/gn/pix/{idEnvio}``):
``favorecido`` takes ``chave`` and optionally ``cpf`` or ``cnpj``, and Efí
refuses the send when the key's owner does not have that document (a 4xx:
a refusal, nothing sent). Efí's SDKs also list ``GET /v2/gn/chaves/balde``
(the account's DICT lookup allowance).

ASSUMED (not in Efí's public SDK routes; see docs/api/payee-check.md, "Efí"):
the lookup itself, ``GET /v2/gn/chaves/{chave}/infos``, answering
``{"chave", "titular": {"nome", "cpf"|"cnpj"}, "conta": {"ispb",
"instituicao"}}`` (a CPF masked, ``***.456.789-**``) and, for a key not in
the DICT, a 404 ``{"nome": "chave_nao_encontrada"}``. Any other 404 (a
proxy's, a retired route) is not "not found": it is unclear, as is a refusal
to look up (no allowance left, a scope missing). Both are plain
:class:`AcquirerDeclined`: Efí is up and answered, so they never count
against its circuit breaker (shared with its payouts), and the payee check
reads anything but an owner or :class:`RecordNotFound` as unclear.

No key or document goes into a log line or an exception message (attempt
rows and logs keep them): a CPF key is a CPF.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from acquirers.adapters.apipix.client import ApiClient
from acquirers.adapters.apipix.problems import HttpDeclined, HttpNotFound
from acquirers.adapters.base import AcquirerDeclined, InvalidResponse, KeyOwner, PayeeRefused, RecordNotFound
from core.documents import bare_document

LOOKUP_PATH = "/v2/gn/chaves/{chave}/infos"
#: What logs and error messages name instead of the lookup's path.
SHOWN_PATH = LOOKUP_PATH.format(chave="<chave>")
#: Efí's error ``nome`` for a key the DICT does not hold (assumed).
KEY_NOT_FOUND = "chave_nao_encontrada"
#: Efí's error ``nome`` refusing a send whose ``favorecido.cpf``/``cnpj`` is not the key owner's.
PAYEE_INVALID = "favorecido_invalido"
_DISCLOSED = re.compile(r"^[0-9*]{11}$|^[0-9A-Z*]{14}$")


def favorecido(key_value: str, payee_document: str) -> dict[str, str]:
    """The send's ``favorecido``: the key, and the document Efí must find its owner has."""
    body = {"chave": key_value}
    if len(payee_document) == 11:
        body["cpf"] = payee_document
    elif len(payee_document) == 14:
        body["cnpj"] = payee_document
    return body


def send_refusal(refused: HttpDeclined) -> AcquirerDeclined:
    """A refusal of a send Efí does not hold: :class:`PayeeRefused` when it is
    the owner check of ``favorecido`` (its message names no document)."""
    problem_kind = refused.problem.kind if refused.problem is not None else ""
    if PAYEE_INVALID in str(refused) or problem_kind == PAYEE_INVALID:
        return PayeeRefused(f"efi: {PAYEE_INVALID} ({refused.status}): the key's owner does not have that document")
    return refused


def lookup_key(client: ApiClient, key_value: str) -> KeyOwner:
    """The key's owner as Efí's DICT lookup answers it."""
    path = LOOKUP_PATH.format(chave=urllib.parse.quote(key_value, safe=""))
    try:
        data = client.request("GET", path, idempotent=True, shown_path=SHOWN_PATH).data
    except HttpNotFound as exc:
        problem_kind = exc.problem.kind if exc.problem is not None else ""
        if KEY_NOT_FOUND in str(exc) or problem_kind == "ChaveNaoEncontrada":
            raise RecordNotFound(f"efi: key not in the DICT ({exc})") from None
        raise AcquirerDeclined(f"{exc}: not Efí's {KEY_NOT_FOUND}, so the key's owner is unknown") from None
    except HttpDeclined as exc:
        # A refusal to look up (no allowance left, a scope missing) says nothing of the key.
        raise AcquirerDeclined(f"key lookup refused, the key's owner is unknown: {exc}") from None
    return _owner(data)


def _owner(data: Any) -> KeyOwner:
    titular = data.get("titular") if isinstance(data, dict) else None
    conta = data.get("conta") if isinstance(data, dict) else None
    if not isinstance(titular, dict) or not isinstance(conta, dict):
        raise InvalidResponse("Efí's key lookup: no titular/conta in the answer")
    raw = titular.get("cpf") or titular.get("cnpj") or ""
    document = bare_document(str(raw))
    if not _DISCLOSED.match(document):
        raise InvalidResponse(f"Efí's key lookup: unreadable owner document ({len(str(raw))} characters)")
    ispb = str(conta.get("ispb") or "")
    if not re.fullmatch(r"\d{8}", ispb):
        raise InvalidResponse(f"Efí's key lookup: unreadable ISPB {ispb!r}")
    return KeyOwner(
        name=str(titular.get("nome") or "")[:140],
        document=document,
        ispb=ispb,
        bank_name=str(conta.get("instituicao") or "")[:100],
    )
