"""/api/sandbox/recurrences/...: the sandbox's payer's bank over HTTP
(:mod:`recurrences.sandbox`), only with PIX_SANDBOX on."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from acquirers.adapters.sandbox_rec_records import DEFAULT_REJECTION, REJECTION_CODES
from api.base import (
    INVALID_BODY,
    VALIDATION_ERROR,
    AccountAPIView,
    error_examples,
    error_response,
    not_found,
    ok,
    responses,
    success_envelope,
)
from core.fields import IsoDateField, StrictRegexField
from recurrences import exceptions as err
from recurrences.apis import CYCLE_INDEX, RECURRENCE_ID
from recurrences.sandbox import (
    NO_ATTEMPT,
    NOT_AT_SANDBOX,
    NOT_NOW,
    NOT_SENT,
    SANDBOX_DOWN,
    sandbox_cycle_attempt,
    sandbox_recurrence_decide,
    sandbox_recurrence_get,
)
from recurrences.serializers import CycleSerializer, RecurrenceSerializer

SANDBOX_RESPONSES = (
    (503, error_response("The sandbox's state could not be reached.", SANDBOX_DOWN)),
    (404, not_found(err.RECURRENCE_NOT_FOUND)),
)
ONLY = (
    "Only with PIX_SANDBOX on, for recurrences held by an acquirer using the `sandbox` adapter (any other is "
    "a 404, like an unknown id). Credential `cashin` or `all`. "
)


class ApproveSerializer(serializers.Serializer[Any]):
    payer_ispb = StrictRegexField(
        r"^[0-9]{8}$",
        required=False,
        help_text="The payer's PSP (8 digits); default: the push journey's `payer_bank.ispb`, else 00000000.",
        error_messages={"invalid": "Informe o ISPB com 8 dígitos."},
    )


class AttemptSerializer(serializers.Serializer[Any]):
    date = IsoDateField(
        required=False, help_text="The attempt's settlement day (YYYY-MM-DD); default: the one scheduled."
    )


class FailSerializer(AttemptSerializer):
    reason = serializers.ChoiceField(
        choices=sorted(REJECTION_CODES),
        required=False,
        help_text=f"The payer's PSP's rejection code (default {DEFAULT_REJECTION}: no funds); some end the cobr.",
    )


def _decision_schema(decision: str, summary: str, description: str, body: bool) -> Any:
    return extend_schema(
        tags=["sandbox"],
        summary=f"Sandbox: {summary}",
        description=ONLY + description,
        parameters=[RECURRENCE_ID],
        request=ApproveSerializer if body else None,
        responses=responses(
            {
                200: success_envelope(
                    f"SandboxRecurrence{decision.title().replace('_', '')}Response", RecurrenceSerializer()
                )
            },
            *SANDBOX_RESPONSES,
            (
                409,
                error_examples(
                    "The recurrence's state at the sandbox does not allow it.",
                    {
                        "Not now": NOT_NOW.format(status="rejeitada"),
                        "Not at the sandbox": NOT_AT_SANDBOX,
                    },
                ),
            ),
            *([(400, INVALID_BODY), (422, VALIDATION_ERROR)] if body else []),
        ),
    )


class _Decision(AccountAPIView):
    required_permission = "cashin"
    decision: ClassVar[str]

    def post(self, request: Request, recurrence_id: str) -> Response:
        recurrence = sandbox_recurrence_get(account=request.user, recurrence_id=recurrence_id)
        ispb = ""
        if self.decision == "approve":
            body = ApproveSerializer(data=self.json_body(request))
            body.is_valid(raise_exception=True)
            ispb = body.validated_data.get("payer_ispb", "")
        now, message = sandbox_recurrence_decide(recurrence=recurrence, decision=self.decision, payer_ispb=ispb)
        return ok(RecurrenceSerializer(now).data, message)


class SandboxRecurrenceApproveApi(_Decision):
    decision = "approve"

    @_decision_schema(
        "approve",
        "the payer authorises a recurrence",
        "Awaiting authorisation → `approved` (a `recurrence` webhook); the schedule then opens its cycles in "
        "their window. Approving an approved one is a 200 that changes nothing; an ended one is a 409.",
        body=True,
    )
    def post(self, request: Request, recurrence_id: str) -> Response:
        return super().post(request, recurrence_id)


class SandboxRecurrenceRejectApi(_Decision):
    decision = "reject"

    @_decision_schema(
        "reject", "the payer refuses a recurrence", "Awaiting authorisation → `rejected`; otherwise a 409.", body=False
    )
    def post(self, request: Request, recurrence_id: str) -> Response:
        return super().post(request, recurrence_id)


class SandboxRecurrenceExpireApi(_Decision):
    decision = "expire"

    @_decision_schema(
        "expire",
        "nobody answers a recurrence in time",
        "Awaiting authorisation → `expired`; otherwise a 409.",
        body=False,
    )
    def post(self, request: Request, recurrence_id: str) -> Response:
        return super().post(request, recurrence_id)


class SandboxRecurrencePayerCancelApi(_Decision):
    decision = "payer_cancel"

    @_decision_schema(
        "payer_cancel",
        "the payer cancels a recurrence at their bank",
        "Authorised → `cancelled` with `cancelled_by` `payer`, its open cycles cancelled; otherwise a 409.",
        body=False,
    )
    def post(self, request: Request, recurrence_id: str) -> Response:
        return super().post(request, recurrence_id)


def _attempt_schema(outcome: str, summary: str, description: str, request: type[serializers.Serializer[Any]]) -> Any:
    return extend_schema(
        tags=["sandbox"],
        summary=f"Sandbox: {summary}",
        description=ONLY + description,
        parameters=[RECURRENCE_ID, CYCLE_INDEX],
        request=request,
        responses=responses(
            {200: success_envelope(f"SandboxCycle{outcome.title()}Response", CycleSerializer())},
            *SANDBOX_RESPONSES,
            (400, INVALID_BODY),
            (
                409,
                error_examples(
                    "The cycle has no attempt to settle on that day, or is not at the sandbox yet.",
                    {
                        "No attempt": NO_ATTEMPT.format(on=" para 10/12/2030"),
                        "Not sent": NOT_SENT,
                        "Not at the sandbox": NOT_AT_SANDBOX,
                    },
                ),
            ),
            (422, VALIDATION_ERROR),
        ),
    )


class _Attempt(AccountAPIView):
    required_permission = "cashin"
    outcome: ClassVar[str]
    body_serializer: ClassVar[type[AttemptSerializer]]

    def post(self, request: Request, recurrence_id: str, index: str) -> Response:
        recurrence = sandbox_recurrence_get(account=request.user, recurrence_id=recurrence_id)
        body = self.body_serializer(data=self.json_body(request))
        body.is_valid(raise_exception=True)
        cycle, message = sandbox_cycle_attempt(
            recurrence=recurrence,
            index=index,
            outcome=self.outcome,
            on=body.validated_data.get("date"),
            reason=body.validated_data.get("reason", ""),
        )
        return ok(CycleSerializer(cycle).data, message)


class SandboxCyclePayApi(_Attempt):
    outcome = "pay"
    body_serializer = AttemptSerializer

    @_attempt_schema(
        "pay",
        "the payer's bank settles a cycle",
        "The attempt scheduled on `date` (default: the one waiting) is paid: the cycle's charge is credited "
        "(its fee, the balance, a `recurrence_cycle` webhook). Paying again is a 200 that changes nothing; a day "
        "with no attempt is a 409.",
        AttemptSerializer,
    )
    def post(self, request: Request, recurrence_id: str, index: str) -> Response:
        return super().post(request, recurrence_id, index)


class SandboxCycleFailApi(_Attempt):
    outcome = "fail"
    body_serializer = FailSerializer

    @_attempt_schema(
        "fail",
        "the payer's bank rejects a cycle's attempt",
        "The attempt scheduled on `date` (default: the one waiting) is rejected with `reason`: under "
        "`3_in_7_days` the cycle is `retrying` with its next attempt's day (`next_retry_on`), else `failed`.",
        FailSerializer,
    )
    def post(self, request: Request, recurrence_id: str, index: str) -> Response:
        return super().post(request, recurrence_id, index)
