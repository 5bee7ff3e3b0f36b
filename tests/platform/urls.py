"""Test-only routes: the real URLconf plus views that fail on purpose, so the
error handler can be exercised the way a real view would reach it."""

from __future__ import annotations

from typing import Any

from django.urls import URLPattern, URLResolver, path
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import AccountAPIView, ok
from config.urls import urlpatterns as real_patterns
from core.exceptions import BusinessRuleError


class _Item(serializers.Serializer[Any]):
    priority = serializers.IntegerField()


class _Buyer(serializers.Serializer[Any]):
    buyer_document = serializers.CharField(max_length=5)


class _Body(serializers.Serializer[Any]):
    amount = serializers.IntegerField()
    buyer = _Buyer()
    acquirers = _Item(many=True)


class BoomApi(AccountAPIView):
    required_permission = "any"

    def get(self, request: Request) -> Response:
        raise RuntimeError("secret internals: password=hunter2")


class ForgetfulApi(AccountAPIView):
    """Declares no required_permission: must serve nobody."""

    def get(self, request: Request) -> Response:
        return ok({}, "should never be reached")


class CreateBoomApi(BoomApi):
    internal_error_messages = {"POST": "Ocorreu um erro ao criar o pagamento."}

    def post(self, request: Request) -> Response:
        raise ZeroDivisionError("trace must not leak")


class EchoApi(AccountAPIView):
    required_permission = "any"

    def post(self, request: Request) -> Response:
        body = _Body(data=request.data)
        body.is_valid(raise_exception=True)
        if body.validated_data["amount"] > 100:
            raise BusinessRuleError("Valor alto demais.")
        return ok(body.validated_data, "ok", status=201)


urlpatterns: list[URLPattern | URLResolver] = [
    path("api/_test/boom", BoomApi.as_view()),
    path("api/_test/create-boom", CreateBoomApi.as_view()),
    path("api/_test/echo", EchoApi.as_view()),
    path("api/_test/forgetful", ForgetfulApi.as_view()),
    *real_patterns,  # type: ignore[list-item]
]
