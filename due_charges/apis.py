"""/api/due-charges: create, list, read, cancel and export due-date charges
(API Pix ``cobv``). Built as /api/transactions is (payments/apis.py): the
same credentials, idempotency, override, listing envelope and export."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account, ApiCredential
from api.base import (
    IDEMPOTENCY_HEADER,
    IDEMPOTENCY_RESPONSES,
    VALIDATION_ERROR,
    AccountAPIView,
    ListingMixin,
    created,
    error_response,
    event_callbacks,
    listing_schema,
    not_found,
    ok,
    responses,
    success_envelope,
)
from api.exports import PERIOD, CsvExportApi, csv_export_schema, without
from api.idempotency import Claim, idempotent
from api.schema import PAGE_PARAMETERS, TEXT_FILTER, timestamp_parameter, uuid_path
from due_charges import examples
from due_charges import exceptions as due_err
from due_charges.selectors import DueChargeFilterSet, due_charge_get, due_charges_of
from due_charges.serializers import CSV_HEADER, DueChargeCreateSerializer, DueChargeSerializer
from payments import exceptions as err
from payments.apis import CHARGE_REFUSALS
from payments.choices import ChargeSource
from payments.due_charges import TERM_FIELDS, due_charge_create, due_terms_build
from payments.due_payloads import DueChargeEventSerializer
from payments.models import Charge, ChargeStatus
from payments.services import Buyer, charge_transition, override_items

DUE_CHARGE_ID = uuid_path(
    "due_charge_id",
    "Due-date charge id: the `id` that `POST /api/due-charges` answers, or one listed by `GET /api/due-charges`.",
)
_DATE = {"type": "string", "format": "date", "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
DUE_CHARGE_FILTERS = [
    OpenApiParameter("status", str, enum=list(ChargeStatus.values)),
    OpenApiParameter("due_date_from", _DATE, description="`YYYY-MM-DD`, inclusive."),
    OpenApiParameter("due_date_to", _DATE, description="`YYYY-MM-DD`, inclusive."),
    OpenApiParameter(
        "overdue",
        str,
        enum=["true", "false"],
        description="`true`: pending with the due date before today (America/Sao_Paulo); `false`: the others.",
    ),
    timestamp_parameter("created_at_start", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
    timestamp_parameter("created_at_end", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
    # TEXT_FILTER: blank is refused (422), as every text filter of the listings.
    OpenApiParameter("document", {**TEXT_FILTER, "maxLength": 20}, description="The debtor's CPF or CNPJ."),
    OpenApiParameter("txid", {**TEXT_FILTER, "maxLength": 35}, description="Exact txid."),
    *PAGE_PARAMETERS,
]


@listing_schema(
    tags=["due-charges"],
    summary="List due-date charges",
    operation_id="due_charges_list",
    parameters=DUE_CHARGE_FILTERS,
)
class DueChargesApi(ListingMixin, AccountAPIView):
    required_permission = "cashin"
    internal_error_messages = {"POST": err.CREATE_INTERNAL_ERROR}
    filterset_class = DueChargeFilterSet
    item_serializer = DueChargeSerializer
    collection = "due_charges"
    listed_message = "Cobranças com vencimento listadas com sucesso."
    schema_name = "DueChargeListResponse"

    def listing_queryset(self, request: Request, **kwargs: Any) -> QuerySet[Charge]:
        return due_charges_of(request.user)  # type: ignore[arg-type]

    @extend_schema(
        tags=["due-charges"],
        summary="Create a due-date charge (cobv)",
        description=(
            "A charge with a due date that stays payable `days_after_due` days after it, with API Pix's "
            "fine (`multa`), interest (`juros`), rebate (`abatimento`) and discount (`desconto`) objects as "
            "they are. Checks, in order: credentials (401), permission (403), account approved and not "
            "blocked (403), fields and terms (422, every one before any acquirer is called), payment method "
            "enabled (400), amount ≤ 300000 (400), net of fees ≥ 10 (400), then the acquirers that hold due-date "
            "charges (400 when every one fails). Override with `acquirers` or `acquirer_key` as on "
            "`POST /api/transactions`. Every status change is a `due_charge` webhook."
        ),
        parameters=[IDEMPOTENCY_HEADER],
        request=DueChargeCreateSerializer,
        examples=examples.DUE_CHARGE,
        callbacks=event_callbacks("due_charge", DueChargeEventSerializer, postback=True),
        responses=responses(
            {
                201: created(
                    "DueChargeCreatedResponse",
                    DueChargeSerializer(),
                    "Created: `data.pix.emv` is the code the payer pastes; `amount_due_today` what they owe today.",
                    examples.DUE_CHARGE_CREATED,
                )
            },
            CHARGE_REFUSALS,
            (422, VALIDATION_ERROR),
            *IDEMPOTENCY_RESPONSES,
        ),
    )
    def post(self, request: Request) -> Response:
        return idempotent(self, request, "due_charges", lambda claim: self._create(request, claim))

    def _create(self, request: Request, claim: Claim) -> Response:
        account: Account = request.user  # type: ignore[assignment]
        body = DueChargeCreateSerializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        data = body.validated_data
        # The terms as API Pix validates a cobv: a 422 under our field's name.
        terms = due_terms_build(
            amount=data["amount"],
            due_date=data["due_date"],
            days_after_due=data["days_after_due"],
            terms={name: data.get(name) for name in TERM_FIELDS},
        )
        debtor = data["debtor"]
        charge = due_charge_create(
            account=account,
            terms=terms,
            debtor=Buyer(
                name=debtor["name"],
                document=debtor["document"],
                phone="",
                address={k: debtor[k] for k in ("street", "city", "state", "zip_code") if debtor.get(k)},
            ),
            email=debtor.get("email", ""),
            description=data.get("description", ""),
            override=override_items(data),
            postback_url=data.get("postback_url", ""),
            metadata=data.get("metadata"),
            # Without a key nothing commits with the charge: its insert needs no transaction.
            in_transaction=(lambda made: claim.settle(self._created(made))) if claim.record_id is not None else None,
        )
        return claim.response if claim.response is not None else self._created(charge)

    @staticmethod
    def _created(charge: Charge) -> Response:
        return ok(DueChargeSerializer(charge).data, due_err.CREATED, status=201)


@csv_export_schema(
    tags=["due-charges"],
    summary="Due-date charges as CSV",
    operation_id="due_charges_csv",
    what="The due-date charges listing's records",
    credentials="`cashin` or `all`, as for the listing",
    header=CSV_HEADER,
    example=examples.DUE_CHARGES_CSV,
    filters=without(DUE_CHARGE_FILTERS, *PERIOD, "page", "per_page"),
)
class DueChargesCsvApi(CsvExportApi):
    required_permission = "cashin"
    filterset_class = DueChargeFilterSet
    header = CSV_HEADER
    filename = "cobrancas-com-vencimento"
    period_required = "Informe o período (created_at_start e created_at_end) para exportar as cobranças."
    period_too_long = "O período das cobranças em CSV é de no máximo 31 dias."

    def export_queryset(self, request: Request) -> QuerySet[Charge]:
        return due_charges_of(request.user)  # type: ignore[arg-type]

    def export_rows(self, records: Any) -> Any:
        render = DueChargeSerializer().to_representation
        for record in records:
            item = render(record)
            item["debtor_name"] = item["debtor"]["name"]
            item["debtor_document"] = item["debtor"]["document"]
            yield ["" if item[name] is None else item[name] for name in self.header]


class DueChargeDetailApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["due-charges"],
        summary="Read a due-date charge",
        description="With `amount_due_today`: what the payer owes today (America/Sao_Paulo), by component.",
        parameters=[DUE_CHARGE_ID],
        responses=responses(
            {200: success_envelope("DueChargeResponse", DueChargeSerializer())},
            (404, not_found(due_err.DUE_CHARGE_NOT_FOUND)),
        ),
    )
    def get(self, request: Request, due_charge_id: str) -> Response:
        charge = due_charge_get(account=request.user, charge_id=due_charge_id)  # type: ignore[arg-type]
        return ok(DueChargeSerializer(charge).data, "Cobrança com vencimento consultada com sucesso.")


class DueChargeCancelApi(AccountAPIView):
    required_permission = "cashin"

    @extend_schema(
        tags=["due-charges"],
        summary="Cancel a pending due-date charge",
        description=(
            "A pending due-date charge becomes `canceled` at once (a `due_charge` webhook) and its acquirer is "
            "asked to withdraw it, until it answers. Repeating the cancel of a canceled one is a 200 that "
            "changes nothing; any other status is a 409."
        ),
        parameters=[DUE_CHARGE_ID],
        request=None,
        responses=responses(
            {200: success_envelope("DueChargeCanceledResponse", DueChargeSerializer())},
            (404, not_found(due_err.DUE_CHARGE_NOT_FOUND)),
            (
                409,
                error_response(
                    "The charge is not pending (paid, refunded...).",
                    "A transação não pode passar de Paga para Cancelada.",
                ),
            ),
        ),
    )
    def post(self, request: Request, due_charge_id: str) -> Response:
        account: Account = request.user  # type: ignore[assignment]
        charge = due_charge_get(account=account, charge_id=due_charge_id)
        credential = request.auth
        changed = charge_transition(
            charge_id=charge.pk,
            to_status=ChargeStatus.CANCELED,
            source=ChargeSource.MERCHANT,
            actor=credential.public_key if isinstance(credential, ApiCredential) else "",
            strict=True,  # only pending → canceled is in the table: any other status is a 409
        )
        charge = due_charge_get(account=account, charge_id=charge.pk)
        return ok(DueChargeSerializer(charge).data, due_err.CANCELED if changed else due_err.ALREADY_CANCELED)
