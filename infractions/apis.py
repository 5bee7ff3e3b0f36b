"""Infraction endpoints (docs/api/infractions.md): list, read, and send the
defence. What an infraction does to the money is infractions.services'."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import (
    IDEMPOTENCY_HEADER,
    INVALID_BODY,
    VALIDATION_ERROR,
    AccountAPIView,
    ListingMixin,
    created,
    error_examples,
    event_callbacks,
    listing_schema,
    not_found,
    ok,
    responses,
    success_envelope,
)
from api.idempotency import IN_FLIGHT, Claim, idempotent
from api.schema import PAGE_PARAMETERS, timestamp_parameter, uuid_path
from infractions import examples
from infractions import exceptions as err
from infractions.choices import InfractionStatus
from infractions.defenses import Attachment, infraction_defend
from infractions.models import Infraction
from infractions.selectors import InfractionFilterSet, infraction_get, infraction_key, infractions_of
from infractions.serializers import (
    DefenseCreateSerializer,
    InfractionEventSerializer,
    InfractionSerializer,
)

INFRACTION_ID = uuid_path(
    "infraction_id",
    "Infraction id: one listed by `GET /api/infractions`, or the `id` of an `infraction` webhook's `data`.",
)
INFRACTION_FILTERS = [
    OpenApiParameter("status", str, enum=list(InfractionStatus.values)),
    OpenApiParameter("transaction_id", {"type": "string", "format": "uuid"}, description="The disputed charge's id."),
    OpenApiParameter("e2e_id", {"type": "string", "maxLength": 64}, description="Exact end-to-end id of the Pix."),
    timestamp_parameter("created_at_start", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
    timestamp_parameter("created_at_end", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
    *PAGE_PARAMETERS,
]
DEFENDED = "Defesa registrada. Ela será enviada à adquirente."


class InfractionApiView(AccountAPIView):
    # Infractions are about money received: the charges' credentials see them.
    required_permission = "cashin"
    not_found_message = err.INFRACTION_NOT_FOUND


@listing_schema(
    tags=["infractions"],
    summary="List MED infractions",
    description=(
        "The account's MED infractions (fraud claims a payer's bank opened on a Pix it received), newest first. "
        "While one is open its charge is `chargeback` and `blocked_amount` is kept back from the balance "
        "(`GET /withdrawals/balance`: `blocked_balance`); a defence may be sent until `defense_deadline`. "
        "Credential `cashin` or `all`. Every change is also sent as an `infraction` webhook (see the callback)."
    ),
    operation_id="infractions_list",
    parameters=INFRACTION_FILTERS,
    example=examples.LISTING,
    callbacks=event_callbacks("infraction", InfractionEventSerializer),
)
class InfractionsApi(ListingMixin, InfractionApiView):
    filterset_class = InfractionFilterSet
    item_serializer = InfractionSerializer
    collection = "infractions"
    listed_message = "Infrações listadas com sucesso."
    schema_name = "InfractionListResponse"

    def listing_queryset(self, request: Request, **kwargs: Any) -> QuerySet[Infraction]:
        return infractions_of(request.user)  # type: ignore[arg-type]


class InfractionDetailApi(InfractionApiView):
    @extend_schema(
        tags=["infractions"],
        summary="Read a MED infraction",
        parameters=[INFRACTION_ID],
        responses=responses(
            {200: success_envelope("InfractionResponse", InfractionSerializer())},
            (404, not_found(err.INFRACTION_NOT_FOUND)),
        ),
    )
    def get(self, request: Request, infraction_id: str) -> Response:
        infraction = infraction_get(account=request.user, infraction_id=infraction_id)  # type: ignore[arg-type]
        return ok(InfractionSerializer(infraction).data, "Infração consultada com sucesso.")


class InfractionDefenseApi(InfractionApiView):
    @extend_schema(
        tags=["infractions"],
        summary="Send the defence of a MED infraction",
        description=(
            "Once per infraction, before its `defense_deadline`: the text (1 to 5000 characters) and up to 5 "
            "files (PDF, PNG or JPEG, base64; at most 2 MB each and 5 MB together, decoded; the body may then be "
            "up to 7 MiB on this route). Checks, in order: credentials (401), permission `cashin` or `all` (403), "
            "account (403), fields (422), the infraction (404, as for `GET /infractions/{id}`), its state (409: "
            "closed, already defended, return accepted without defence, deadline passed; nothing changes). On "
            "201 the defence is recorded and sent to the acquirer in the background: `defense.sent_at` is null "
            "until it took it. `Idempotency-Key` makes retries safe (per infraction)."
        ),
        parameters=[INFRACTION_ID, IDEMPOTENCY_HEADER],
        request=DefenseCreateSerializer,
        examples=examples.DEFENSE,
        responses=responses(
            {
                201: created(
                    "DefenseRecordedResponse",
                    InfractionSerializer(),
                    "Recorded: the infraction with its defence.",
                    examples.DEFENDED,
                )
            },
            (400, INVALID_BODY),
            (404, not_found(err.INFRACTION_NOT_FOUND)),
            (
                409,
                error_examples(
                    "The infraction's state refuses a defence, or a request with this Idempotency-Key is still "
                    "running. Nothing changed.",
                    {
                        "Closed": err.DEFENSE_CLOSED,
                        "Already defended": err.DEFENSE_ALREADY_SENT,
                        "Return accepted without defence": err.DEFENSE_WAIVED,
                        "Deadline passed": err.DEFENSE_DEADLINE_PASSED,
                        "Key in flight": IN_FLIGHT,
                    },
                ),
            ),
            (422, VALIDATION_ERROR),
        ),
    )
    def post(self, request: Request, infraction_id: str) -> Response:
        # Keys are per infraction: the body alone does not say which one a repeat is for.
        endpoint = f"infractions/{str(infraction_id)[:40]}/defense"
        return idempotent(self, request, endpoint, lambda claim: self._defend(request, infraction_id, claim))

    def _defend(self, request: Request, infraction_id: str, claim: Claim) -> Response:
        body = DefenseCreateSerializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        data = body.validated_data
        key = infraction_key(infraction_id)
        # One transaction for the defence and the key's answer (Claim.settle):
        # infraction_defend's own runs inside it, and its hand-off to the
        # worker waits for this commit.
        with transaction.atomic():
            infraction_defend(
                infraction_id=key,
                text=data["text"],
                attachments=[
                    Attachment(name=a["name"], content_type=a["content_type"], content=a["content_base64"])
                    for a in data.get("attachments", [])
                ],
                by=f"API ({request.auth.public_key})",  # type: ignore[union-attr]
                account=request.user,  # type: ignore[arg-type]
            )
            defended = infraction_get(account=request.user, infraction_id=key)  # type: ignore[arg-type]
            response = ok(InfractionSerializer(defended).data, DEFENDED, status=201)
            claim.settle(response)
        return response
