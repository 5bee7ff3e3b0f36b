"""Webhook management for account holders (credential ``all``)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Account
from api.base import (
    INVALID_BODY,
    VALIDATION_ERROR,
    AccountAPIView,
    ListingMixin,
    listing_schema,
    not_found,
    ok,
    responses,
    success_envelope,
)
from api.schema import PAGE_PARAMETERS, timestamp_parameter, uuid_path
from core.exceptions import ValidationFailed
from webhooks import examples, http, selectors, services
from webhooks import exceptions as err
from webhooks.models import EventType, WebhookDelivery
from webhooks.serializers import (
    DeliverySerializer,
    EndpointCreatedSerializer,
    EndpointCreateSerializer,
    EndpointSerializer,
    SecretSerializer,
)

ENDPOINT_ID = uuid_path(
    "endpoint_id",
    "Webhook endpoint id: the `id` that `POST /api/webhooks` answers, or one listed by `GET /api/webhooks`.",
)


class WebhookApiView(AccountAPIView):
    # Webhooks see both directions of money: only a full credential manages them.
    required_permission = "all"


class WebhooksApi(WebhookApiView):
    @extend_schema(
        tags=["webhooks"],
        summary="List webhook endpoints",
        responses=responses(
            {
                200: success_envelope(
                    "WebhookList", inline_serializer("WebhookListData", {"webhooks": EndpointSerializer(many=True)})
                )
            }
        ),
    )
    def get(self, request: Request) -> Response:
        endpoints = selectors.endpoints_of(request.user)  # type: ignore[arg-type]
        return ok({"webhooks": EndpointSerializer(endpoints, many=True).data}, "Webhooks listados com sucesso.")

    @extend_schema(
        tags=["webhooks"],
        summary="Register a webhook endpoint",
        description=(
            "The URL must be http(s) and must not resolve to a loopback, private, link-local or reserved "
            "address (422 on `url`). An account has at most `WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT` endpoints "
            "(16 by default; deleted ones do not count): one more is a 422 on `webhooks`. "
            "The signing secret is returned once."
        ),
        request=EndpointCreateSerializer,
        examples=examples.WEBHOOK_ENDPOINT,
        responses=responses(
            {201: success_envelope("WebhookCreated", EndpointCreatedSerializer())},
            (400, INVALID_BODY),
            (422, VALIDATION_ERROR),
        ),
    )
    def post(self, request: Request) -> Response:
        account: Account = request.user  # type: ignore[assignment]
        body = EndpointCreateSerializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        refusal = http.url_refusal(body.validated_data["url"])
        if refusal:
            raise ValidationFailed({"url": [refusal]})
        created = services.endpoint_create(
            account=account, url=body.validated_data["url"], description=body.validated_data.get("description", "")
        )
        data = {**EndpointSerializer(created.endpoint).data, "secret": created.secret}
        return ok(data, "Webhook cadastrado com sucesso.", status=201)


class WebhookDetailApi(WebhookApiView):
    @extend_schema(
        tags=["webhooks"],
        summary="Delete a webhook endpoint",
        parameters=[ENDPOINT_ID],
        responses=responses(
            {200: success_envelope("WebhookDeleted", serializers.JSONField(allow_null=True))},
            (404, not_found(err.ENDPOINT_NOT_FOUND)),
        ),
    )
    def delete(self, request: Request, endpoint_id: str) -> Response:
        endpoint = selectors.endpoint_get(account=request.user, endpoint_id=endpoint_id)  # type: ignore[arg-type]
        services.endpoint_delete(endpoint=endpoint)
        return ok(None, "Webhook removido com sucesso.")


class WebhookRotateSecretApi(WebhookApiView):
    @extend_schema(
        tags=["webhooks"],
        summary="Rotate an endpoint's signing secret",
        parameters=[ENDPOINT_ID],
        request=None,
        responses=responses(
            {200: success_envelope("WebhookSecret", SecretSerializer())}, (404, not_found(err.ENDPOINT_NOT_FOUND))
        ),
    )
    def post(self, request: Request, endpoint_id: str) -> Response:
        endpoint = selectors.endpoint_get(account=request.user, endpoint_id=endpoint_id)  # type: ignore[arg-type]
        secret = services.endpoint_rotate_secret(endpoint=endpoint)
        return ok({"id": str(endpoint.pk), "secret": secret}, "Segredo rotacionado com sucesso.")


@listing_schema(
    tags=["webhooks"],
    summary="List an endpoint's deliveries",
    parameters=[
        ENDPOINT_ID,
        OpenApiParameter("status", str, enum=["pending", "succeeded", "failed"]),
        OpenApiParameter("event_type", str, enum=list(EventType.values)),
        timestamp_parameter("created_at_start", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
        timestamp_parameter("created_at_end", "`YYYY-MM-DD HH:mm:ss`, America/Sao_Paulo, inclusive."),
        *PAGE_PARAMETERS,
    ],
    extra_responses=[(404, not_found(err.ENDPOINT_NOT_FOUND))],
)
class WebhookDeliveriesApi(ListingMixin, WebhookApiView):
    filterset_class = selectors.DeliveryFilterSet
    item_serializer = DeliverySerializer
    collection = "deliveries"
    listed_message = "Entregas listadas com sucesso."
    schema_name = "DeliveryList"

    def listing_queryset(self, request: Request, **kwargs: Any) -> QuerySet[WebhookDelivery]:
        endpoint = selectors.endpoint_get(account=request.user, endpoint_id=kwargs["endpoint_id"])  # type: ignore[arg-type]
        return selectors.deliveries_of(endpoint).prefetch_related("attempts")


class WebhookEventRedeliverApi(WebhookApiView):
    @extend_schema(
        tags=["webhooks"],
        summary="Redeliver an event's failed deliveries",
        description="Every delivery of the event that failed for good starts again with a fresh schedule.",
        parameters=[uuid_path("event_id", "Webhook event id (`X-Webhook-Event-ID`).")],
        request=None,
        responses=responses(
            {
                202: success_envelope(
                    "Redelivery", inline_serializer("RedeliveryData", {"redelivered": serializers.IntegerField()})
                )
            },
            (404, not_found(err.EVENT_NOT_FOUND)),
        ),
    )
    def post(self, request: Request, event_id: str) -> Response:
        event = selectors.event_get(account=request.user, event_id=event_id)  # type: ignore[arg-type]
        count = services.event_redeliver(event=event)
        return ok({"redelivered": count}, "Reenvio agendado.", status=202)
