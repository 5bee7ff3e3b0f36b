"""Pix Automático of the API Pix standard (``rec``, ``locrec``, ``solicrec``,
``cobr``) for the ``bacen_pix`` adapter; a mixin so :mod:`.bacen` stays one
screenful, as :mod:`.cobv` is for due-date charges.

Errors as for every API Pix call (:mod:`.problems`): a 4xx is
:class:`AcquirerDeclined` (404 :class:`HttpNotFound`, the not-found every
read raises), 5xx and 429 :class:`AcquirerUnavailable`, timeouts
:class:`AcquirerTimeout`, an unreadable answer :class:`InvalidResponse`.

- **A recurrence is not idempotent at the PSP** (``POST /rec``: the PSP names
  it): a create whose answer is lost is settled by :meth:`find_recurrence`,
  never by a second POST. For the QR journey the location (``POST /locrec``)
  is made *first* and given in the ``POST /rec`` itself (``loc``, as the
  standard's ``recBody1``), not PATCHed in afterwards: the recurrence then
  exists with its location or not at all, so a timeout has one unknown to
  settle, and a refused PATCH can never leave a recurrence behind that the
  caller believes was not created. An orphan location (the POST /rec failed)
  costs nothing: it serves no payload.
- **A cycle (``cobr``) is ours by txid**: ``PUT /cobr/{txid}`` is retried on
  5xx and timeouts, and a refusal after a retry whose first answer was lost
  reads the cobr back and takes it when it is the same (idRec, amount).
- **Cancels are PATCHes to CANCELADA**, repeated safely; a refusal is read
  back, and an end reached first (cancelled, paid, rejected, expired) is the answer.

Scopes: ``rec.write rec.read solicrec.write solicrec.read cobr.write
cobr.read payloadlocationrec.write`` (:data:`REC_SCOPES`), added to the
acquirer's ``scopes`` like cobv's: not asked by default, so credentials
without them keep working for cob and cobv.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import urlencode

from acquirers.adapters.apipix.client import ApiClient
from acquirers.adapters.apipix.formats import valor
from acquirers.adapters.apipix.listing import MAX_PAGES, PAGE_SIZE, moment
from acquirers.adapters.apipix.problems import HttpDeclined, HttpNotFound
from acquirers.adapters.apipix.rec_records import (
    _CNPJ,
    _CPF,
    _ID_REC,
    _ISPB,
    CANCELLED,
    CLOCK_SKEW,
    COBR_ENDED,
    LIVE_REC,
    SOLICREC_STATUSES,
    TERMS_FIELDS,
    _check_id_rec,
    _check_txid,
    _contract,
    _created_at,
    check_rec_code,
    cycle_state,
    recurrence_state,
)
from acquirers.adapters.base import (
    AcquirerDeclined,
    AcquirerUnavailable,
    CycleChargeRequest,
    CycleChargeState,
    InvalidOptions,
    InvalidResponse,
    PushRequest,
    PushSent,
    RecurrenceCreated,
    RecurrenceRequest,
    RecurrenceState,
)
from acquirers.adapters.recurrence import JOURNEY_PUSH, JOURNEY_QR


class BacenRecMixin:
    """The nine Pix Automático methods, for an adapter with ``_client()`` and options cleaned by
    :func:`~acquirers.adapters.apipix.options.clean_receiver_account`."""

    options: dict[str, Any]

    def _client(self) -> ApiClient:
        raise NotImplementedError

    # ------------------------------------------------------------------ recurrences

    def create_recurrence(self, request: RecurrenceRequest) -> RecurrenceCreated:
        if request.journey not in (JOURNEY_PUSH, JOURNEY_QR):
            raise ValueError(f"journey {request.journey!r} is neither the push nor the QR journey")
        body = {key: request.terms[key] for key in TERMS_FIELDS if key in request.terms}
        contract = _contract(body)
        client = self._client()
        location = ""
        if request.journey == JOURNEY_QR:
            # POST /locrec takes no body in the standard (the operation declares none).
            loc = client.request("POST", "/locrec", idempotent=False).data
            if not isinstance(loc.get("id"), int) or not isinstance(loc.get("location"), str) or not loc["location"]:
                raise InvalidResponse("POST /locrec: no id or location")
            body["loc"] = loc["id"]
            location = loc["location"]
        created = client.request("POST", "/rec", json_body=body, idempotent=False).data
        state = recurrence_state(created, None)
        if _contract(created, strict=False) != contract or state.status != "CRIADA":
            raise InvalidResponse(f"rec {state.id_rec}: not the CRIADA recurrence of contract {contract!r}")
        if request.journey == JOURNEY_PUSH:
            return RecurrenceCreated(id_rec=state.id_rec, status=state.status)
        # The code is only in GET /rec/{idRec} (dadosQR; RecGerada has none). Lost here, the
        # recurrence exists: the caller's find_recurrence / recurrence_status settles it.
        rec = client.request("GET", f"/rec/{state.id_rec}", idempotent=True).data
        read = recurrence_state(rec, state.id_rec)
        given = rec.get("loc")
        if not isinstance(given, dict) or given.get("location") != location:
            raise InvalidResponse(f"rec {state.id_rec}: not linked to location {location!r}")
        dados = rec.get("dadosQR")
        emv = dados.get("pixCopiaECola") if isinstance(dados, dict) else None
        if not isinstance(emv, str) or not emv:
            raise InvalidResponse(f"rec {state.id_rec}: no dadosQR.pixCopiaECola")
        check_rec_code(emv, location)
        return RecurrenceCreated(id_rec=read.id_rec, status=read.status, location=location, emv=emv)

    def find_recurrence(self, *, debtor_document: str, contract: str, since: dt.datetime) -> RecurrenceState | None:
        """``GET /rec?inicio&fim&cpf|cnpj``, page by page, kept to ``vinculo.contrato``.
        Several live ones (CRIADA, APROVADA) mean earlier creates landed too:
        the newest (its CRIADA moment) is the one the last, unsettled create
        made, which the caller was waiting for; the others are leftovers for
        it to cancel. None live: the newest of any status (its end tells the
        caller what became of it); none at all: None."""
        if _CPF.match(debtor_document):
            document = {"cpf": debtor_document}
        elif _CNPJ.match(debtor_document):
            document = {"cnpj": debtor_document}
        else:
            raise ValueError("find_recurrence needs the debtor's CPF or CNPJ")
        window = {
            "inicio": moment(since - CLOCK_SKEW),
            "fim": moment(dt.datetime.now(dt.UTC) + CLOCK_SKEW),
        }
        client = self._client()
        found: list[tuple[dt.datetime, RecurrenceState]] = []
        number = 0
        while True:
            query = urlencode(
                window | document | {"paginacao.paginaAtual": number, "paginacao.itensPorPagina": PAGE_SIZE}
            )
            page = client.request("GET", f"/rec?{query}", idempotent=True).data
            recs = page.get("recs")
            if not isinstance(recs, list):
                raise InvalidResponse("GET /rec: recs is not a list")
            for rec in recs:
                if isinstance(rec, dict) and _contract(rec, strict=False) == contract:
                    state = recurrence_state(rec, None)
                    found.append((_created_at(rec), state))
            parametros = page.get("parametros")
            paginacao = parametros.get("paginacao") if isinstance(parametros, dict) else None
            pages = paginacao.get("quantidadeDePaginas") if isinstance(paginacao, dict) else None
            if not isinstance(pages, int) or pages < 0:
                raise InvalidResponse("GET /rec: no parametros.paginacao.quantidadeDePaginas")
            number += 1
            if number >= min(pages, MAX_PAGES):
                break
        if not found:
            return None
        live = [entry for entry in found if entry[1].status in LIVE_REC]
        return max(live or found, key=lambda entry: entry[0])[1]

    def recurrence_status(self, id_rec: str) -> RecurrenceState:
        """``GET /rec/{idRec}``; :class:`HttpNotFound` when the PSP has none."""
        _check_id_rec(id_rec)
        return recurrence_state(self._client().request("GET", f"/rec/{id_rec}", idempotent=True).data, id_rec)

    def request_authorisation(self, request: PushRequest) -> PushSent:
        """``POST /solicrec``. Not idempotent either: a lost answer is settled by
        :meth:`recurrence_status` (its ``solicitacao``, ``push_status``)."""
        _check_id_rec(request.id_rec)
        if not _ISPB.match(request.payer_ispb):
            raise ValueError("payer_ispb is not an ISPB (8 characters)")
        if not 1 <= len(request.payer_account) <= 20 or len(request.payer_branch) > 4:
            raise ValueError("payer_account is 1-20 characters, payer_branch at most 4")
        if _CPF.match(request.payer_document):
            destinatario: dict[str, str] = {"cpf": request.payer_document}
        elif _CNPJ.match(request.payer_document):
            destinatario = {"cnpj": request.payer_document}
        else:
            raise ValueError("a push needs the payer's CPF or CNPJ")
        destinatario |= {"conta": request.payer_account, "ispbParticipante": request.payer_ispb}
        if request.payer_branch:
            destinatario["agencia"] = request.payer_branch
        if request.expires_at.tzinfo is None:
            raise ValueError("expires_at must be aware")
        body = {
            "idRec": request.id_rec,
            "calendario": {"dataExpiracaoSolicitacao": moment(request.expires_at)},
            "destinatario": destinatario,
        }
        solic = self._client().request("POST", "/solicrec", json_body=body, idempotent=False).data
        id_solic = solic.get("idSolicRec")
        if not isinstance(id_solic, str) or not _ID_REC.match(id_solic) or solic.get("idRec") != request.id_rec:
            raise InvalidResponse("POST /solicrec: no idSolicRec, or another recurrence's")
        status = solic.get("status")
        if status not in SOLICREC_STATUSES:
            raise InvalidResponse(f"solicrec {id_solic}: unknown status {status!r}")
        return PushSent(id_solic_rec=id_solic, status=str(status))

    def cancel_recurrence(self, id_rec: str) -> RecurrenceState:
        """PATCH to CANCELADA. A 404 raises; a refusal is read back: a
        recurrence already ended (cancelled, by either side, rejected,
        expired) is answered as read; still live, the refusal stands."""
        _check_id_rec(id_rec)
        client = self._client()
        path = f"/rec/{id_rec}"
        try:
            rec = client.request("PATCH", path, json_body={"status": CANCELLED}, idempotent=True).data
        except HttpDeclined as refused:
            if isinstance(refused, HttpNotFound):
                raise
            current = recurrence_state(client.request("GET", path, idempotent=True).data, id_rec)
            if current.status in LIVE_REC:
                raise
            return current
        return recurrence_state(rec, id_rec)

    # ------------------------------------------------------------------ cycles

    def create_cycle_charge(self, request: CycleChargeRequest) -> CycleChargeState:
        body = self._cobr_body(request)
        client = self._client()
        path = f"/cobr/{request.txid}"
        try:
            cobr = client.request("PUT", path, json_body=body, idempotent=True).data
        except HttpDeclined as refused:
            if isinstance(refused, HttpNotFound):
                raise
            # A txid in use after a retry whose first answer was lost: ours if it matches.
            try:
                cobr = client.request("GET", path, idempotent=True).data
            except (AcquirerUnavailable, AcquirerDeclined):
                raise refused from None
        state = cycle_state(cobr, request.txid)
        if cobr.get("idRec") != request.id_rec or state.amount != request.amount:
            raise InvalidResponse(f"cobr {request.txid} is another recurrence's or another amount")
        return state

    def cycle_charge_status(self, txid: str) -> CycleChargeState:
        """``GET /cobr/{txid}``; :class:`HttpNotFound` when the PSP has none."""
        _check_txid(txid)
        return cycle_state(self._client().request("GET", f"/cobr/{txid}", idempotent=True).data, txid)

    def cancel_cycle_charge(self, txid: str) -> CycleChargeState:
        """PATCH to CANCELADA. A 404 raises (the create may not have landed:
        ask again); a refusal is read back: ended already (paid first:
        CONCLUIDA) is answered as read, still open the refusal stands (the
        standard refuses a cancel on or after the first attempt's date)."""
        _check_txid(txid)
        client = self._client()
        path = f"/cobr/{txid}"
        try:
            cobr = client.request("PATCH", path, json_body={"status": CANCELLED}, idempotent=True).data
        except HttpDeclined as refused:
            if isinstance(refused, HttpNotFound):
                raise
            current = cycle_state(client.request("GET", path, idempotent=True).data, txid)
            if current.status not in COBR_ENDED:
                raise
            return current
        return cycle_state(cobr, txid)

    def retry_cycle_charge(self, txid: str, on: dt.date) -> CycleChargeState:
        """``POST /cobr/{txid}/retentativa/{data}``: a POST, never repeated by
        the client; a lost answer is settled by reading the attempts."""
        _check_txid(txid)
        path = f"/cobr/{txid}/retentativa/{on.isoformat()}"
        return cycle_state(self._client().request("POST", path, idempotent=False).data, txid)

    def _cobr_body(self, request: CycleChargeRequest) -> dict[str, Any]:
        _check_txid(request.txid)
        _check_id_rec(request.id_rec)
        if request.amount <= 0:
            raise ValueError("a cycle's amount must be positive")
        account = self.options.get("receiver_account")
        if not account:
            raise InvalidOptions("Pix Automático cycles need the receiver_account option (the cobr's recebedor)")
        recebedor = {"conta": account, "tipoConta": self.options.get("receiver_account_type", "CORRENTE")}
        if self.options.get("receiver_branch"):
            recebedor["agencia"] = self.options["receiver_branch"]
        body: dict[str, Any] = {
            "idRec": request.id_rec,
            "calendario": {"dataDeVencimento": request.due_date.isoformat()},
            "valor": {"original": valor(request.amount)},
            "ajusteDiaUtil": request.adjust_to_business_day,
            "recebedor": recebedor,
        }
        if request.description:
            body["infoAdicional"] = request.description[:140]
        return body


# --------------------------------------------------------------------------- reading answers
