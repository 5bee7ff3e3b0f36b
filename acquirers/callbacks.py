"""The acquirers' callbacks: public endpoints (no account credentials) where
an acquirer posts its news. Each request goes through
:mod:`acquirers.inbound` (authenticate, store, verify, dispatch)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from acquirers.adapters.base import (
    NOTIFICATION_TOKEN_HEADER,
    AdapterError,
    InvalidNotification,
    UnreadableNotification,
)
from acquirers.exceptions import NotificationNotConfirmed, NotificationRejected, NotificationUnreadable
from acquirers.inbound import (
    notification_authenticate,
    notification_process,
    notification_store,
    notification_store_rejected,
)
from acquirers.models import ACQUIRER_KEY_PATTERN, Acquirer
from api.base import AUTH_ERRORS, ServiceAPIView, error_response, ok, success_envelope
from core.exceptions import NotFoundError

_KEY_PARAMETER = OpenApiParameter(
    "key",
    {"type": "string", "pattern": ACQUIRER_KEY_PATTERN, "maxLength": 64},
    OpenApiParameter.PATH,
    description="The acquirer's key.",
)
_TOKEN_PARAMETER = OpenApiParameter(
    "token",
    {"type": "string", "maxLength": 256},
    OpenApiParameter.PATH,
    description="The secret segment of the URL registered with the acquirer (its adapter checks it).",
)


_NOTIFICATION_RESPONSES: dict[int, Any] = {
    200: success_envelope(
        "NotificationAccepted", inline_serializer("Processed", {"processed": serializers.IntegerField()})
    ),
    400: error_response("Authentic, but not a notification the adapter reads.", "Notificação ilegível."),
    401: error_response("The acquirer's adapter could not authenticate the request.", "Notificação não autenticada."),
    404: error_response("Unknown acquirer.", "Adquirente não encontrada."),
    413: AUTH_ERRORS[413],
    500: AUTH_ERRORS[500],
    503: error_response(
        "The adapter could not confirm the notification with the acquirer; it is kept and the acquirer should retry.",
        "Notificação não confirmada na adquirente. Tente novamente.",
    ),
}


def _notification_schema(*, operation_id: str, token: bool, summary: str) -> Any:
    return extend_schema(
        operation_id=operation_id,
        tags=["psp-callbacks"],
        summary=summary,
        auth=[],
        parameters=[_KEY_PARAMETER, _TOKEN_PARAMETER] if token else [_KEY_PARAMETER],
        # The acquirer's own format, read from the raw bytes by its adapter.
        request={"application/json": OpenApiTypes.OBJECT},
        responses=_NOTIFICATION_RESPONSES,
    )


class AcquirerNotificationApi(ServiceAPIView):
    """``POST /acquirers/{key}/notifications``: the acquirer's callbacks.

    No account credentials: the acquirer's adapter authenticates the request
    (a signature, or the secret token of the URL: see the subclasses) before
    anything is stored; an authentic request is stored raw before it is
    processed, a forged one only truncated. The token is never stored.
    """

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    @_notification_schema(
        operation_id="acquirers_notifications_create", token=False, summary="Inbound notification from an acquirer"
    )
    def post(self, request: Request, key: str) -> Response:
        return self.receive(request, key, None)

    def receive(self, request: Request, key: str, token: str | None) -> Response:
        acquirer = Acquirer.objects.filter(key=key).first()
        if acquirer is None:
            raise NotFoundError("Adquirente não encontrada.")
        # request.data is never touched: the adapter verifies the raw bytes
        # (at most API_MAX_BODY_BYTES: the middleware answered 413 past it).
        body: bytes = request.body
        remote_addr = request.META.get("REMOTE_ADDR")
        # The token header comes from the URL only: a client sending it is ignored.
        headers = {k: v for k, v in request.headers.items() if k.lower() != NOTIFICATION_TOKEN_HEADER.lower()}
        given = dict(headers) if token is None else {**headers, NOTIFICATION_TOKEN_HEADER: token}
        try:
            notification_authenticate(acquirer=acquirer, headers=given, body=body)
        except InvalidNotification as exc:
            notification_store_rejected(
                acquirer=acquirer, headers=headers, body=body, remote_addr=remote_addr, reason=str(exc)
            )
            raise NotificationRejected() from exc
        except AdapterError as exc:
            # Our side cannot check it now (e.g. the token's variable is unset):
            # kept for staff, and the acquirer retries once it is fixed.
            notification_store_rejected(
                acquirer=acquirer, headers=headers, body=body, remote_addr=remote_addr, reason=str(exc)
            )
            raise NotificationNotConfirmed() from exc
        # Authentic: stored whole in its own transaction first, whatever happens
        # next (the adapter may still refuse it after asking the acquirer).
        with transaction.atomic():
            inbound = notification_store(acquirer=acquirer, headers=headers, body=body, remote_addr=remote_addr)
        try:
            results = notification_process(inbound=inbound, body=body, headers=given)
        except UnreadableNotification as exc:
            raise NotificationUnreadable() from exc
        except InvalidNotification as exc:
            raise NotificationRejected() from exc
        except AdapterError as exc:
            raise NotificationNotConfirmed() from exc
        return ok({"processed": sum(r.changed for r in results)}, "Notificação recebida.")


class AcquirerTokenNotificationApi(AcquirerNotificationApi):
    """``POST /acquirers/{key}/notifications/{token}``: the URL registered with
    an API Pix PSP (``PUT /webhook/{chave}``); its secret segment is handed to
    the adapter, which compares it in constant time."""

    @_notification_schema(
        operation_id="acquirers_notifications_token_create",
        token=True,
        summary="Inbound notification from an acquirer, authenticated by the URL's token",
    )
    def post(self, request: Request, key: str, token: str) -> Response:
        return self.receive(request, key, token)


class AcquirerTokenPixNotificationApi(AcquirerNotificationApi):
    """``POST /acquirers/{key}/notifications/{token}/pix``: where an API Pix
    PSP actually posts (it appends ``/pix`` to the registered URL)."""

    @_notification_schema(
        operation_id="acquirers_notifications_token_pix_create",
        token=True,
        summary="Inbound API Pix callback (the PSP appends /pix to the registered URL)",
    )
    def post(self, request: Request, key: str, token: str) -> Response:
        return self.receive(request, key, token)


class AcquirerTokenRecNotificationApi(AcquirerNotificationApi):
    """``POST /acquirers/{key}/notifications/{token}/rec``: automatic Pix (Pix Automatico)
    recurrence callback (the URL registered with ``PUT /webhookrec``; the PSP
    appends ``/rec``). A wake-up: the recurrence is read at the PSP."""

    @_notification_schema(
        operation_id="acquirers_notifications_token_rec_create",
        token=True,
        summary="Inbound automatic Pix recurrence callback (the PSP appends /rec to the registered URL)",
    )
    def post(self, request: Request, key: str, token: str) -> Response:
        return self.receive(request, key, token)


class AcquirerTokenCobrNotificationApi(AcquirerNotificationApi):
    """``POST /acquirers/{key}/notifications/{token}/cobr``: automatic Pix (Pix Automatico)
    cycle callback (the URL registered with ``PUT /webhookcobr``; the PSP
    appends ``/cobr``). A wake-up: the cycle's cobr is read at the PSP."""

    @_notification_schema(
        operation_id="acquirers_notifications_token_cobr_create",
        token=True,
        summary="Inbound automatic Pix cycle callback (the PSP appends /cobr to the registered URL)",
    )
    def post(self, request: Request, key: str, token: str) -> Response:
        return self.receive(request, key, token)
