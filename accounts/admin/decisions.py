"""What the back office's queues of requests share (*Pedidos de aprovação*,
``money_actions``; *Pedidos de alteração de conta*, ``changes``): each
selected request decided in its own transaction with its audit entries, the
counts staff read after, and the approve / reject buttons on a request's
own page."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from django.contrib import messages
from django.contrib.admin import helpers
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import unquote
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Case, QuerySet, Value, When
from django.http import HttpRequest, HttpResponse

from accounts.exceptions import ApprovalRefused
from core.plural import plural

# Both queues' states: pending, approved, rejected, failed.
PENDING, APPROVED, REJECTED, FAILED = "pending", "approved", "rejected", "failed"


#: The columns every request shows: why, where it stands, who asked and who decided, when.
DECISION_COLUMNS = ("reason", "state", "requested_by", "requested_at", "decided_by", "decided_at")
#: A queue: what waits for a decision first, oldest first; then the decided ones.
QUEUE_ORDERING = (Case(When(state=PENDING, then=Value(0)), default=Value(1)).asc(), "requested_at", "id")


def staff_user(request: HttpRequest) -> User:
    if not isinstance(request.user, User):
        raise PermissionDenied
    return request.user


def log_on_record(
    request: HttpRequest, content_type: ContentType, object_id: str, object_repr: str, message: str
) -> None:
    """Write a decision into the admin history of the record a request is
    about (every queue's ``log_on_target``)."""
    LogEntry.objects.create(
        user_id=staff_user(request).pk,
        content_type=content_type,
        object_id=object_id,
        object_repr=object_repr[:200],
        action_flag=CHANGE,
        change_message=message[:1000],
    )


@dataclass(frozen=True)
class RequestQueue:
    """How one queue's decisions read in messages and in the admin log."""

    #: "Pedido", "Pedido de alteração": the request as staff name it.
    label: str
    #: What a request approved but not carried out is: "não executado".
    not_done: str
    #: The approved count, singular and plural ("{n} pedido aprovado e executado.").
    approved: tuple[str, str]
    #: What the request is about, after its number: "(Resolver contestação…, R$ 98,50)".
    describe: Callable[[Any], str]
    #: Writes the decision on the record the request is about too.
    log_on_target: Callable[[HttpRequest, Any, str], None]


def decide_each(
    modeladmin: Any,
    request: HttpRequest,
    queryset: QuerySet[Any],
    note: str,
    *,
    decide: Callable[[Any, User, str], Any],
    verb: str,
    queue: RequestQueue,
) -> None:
    """``decide(pk, staff, note)`` for each pending request selected, the
    decision and its audit entries (on the request and its target) committed
    together; a refusal is reported and the next one decided."""
    counts: dict[str, int] = {}
    # Counted before deciding: the ones decided below would count too.
    skipped = queryset.exclude(state=PENDING).count()
    for pending in queryset.filter(state=PENDING).order_by("pk"):
        try:
            with transaction.atomic():
                decided = decide(pending.pk, staff_user(request), note)
                summary = f"{verb} {queue.label.lower()} #{decided.pk} {queue.describe(decided)}"
                if decided.state == FAILED:
                    summary += f": {queue.not_done}, {decided.outcome}"
                message = f"{summary}. Observação: {note}"
                modeladmin.log_change(request, decided, message)
                queue.log_on_target(request, decided, message)
        except ApprovalRefused as exc:
            modeladmin.message_user(request, exc.message, messages.ERROR)
            continue
        counts[decided.state] = counts.get(decided.state, 0) + 1
        if decided.state == FAILED:
            modeladmin.message_user(request, f"{queue.label} #{decided.pk}: {decided.outcome}", messages.ERROR)
    if counts.get(APPROVED):
        modeladmin.message_user(request, plural(counts[APPROVED], *queue.approved), messages.SUCCESS)
    if counts.get(REJECTED):
        modeladmin.message_user(
            request, plural(counts[REJECTED], "{n} pedido rejeitado.", "{n} pedidos rejeitados."), messages.SUCCESS
        )
    if skipped:
        modeladmin.message_user(
            request,
            plural(skipped, "{n} pedido já decidido ignorado.", "{n} pedidos já decididos ignorados."),
            messages.WARNING,
        )


class DecideButtonsMixin:
    """Approve or reject from the request's own page: the buttons submit the
    list's action for this request, which asks for confirmation and a note."""

    #: (action name, button label), shown while the request is pending to staff who may decide.
    decide_buttons: ClassVar[list[tuple[str, str]]] = []

    def has_decide_permission(self, request: HttpRequest) -> bool:
        raise NotImplementedError

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        pending = self.get_object(request, unquote(object_id))  # type: ignore[attr-defined]
        extra_context = {
            **(extra_context or {}),
            "decide_actions": (
                self.decide_buttons
                if pending is not None and pending.state == PENDING and self.has_decide_permission(request)
                else []
            ),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        response: HttpResponse = super().change_view(  # type: ignore[misc]
            request, object_id, form_url, extra_context
        )
        return response
